/**
 * Summarises a V8 .cpuprofile (node --cpu-prof, or `node dist/bench/http.js --profile DIR`):
 * self time by function, and self and inclusive time by package / source area.
 *
 *   node dist/bench/profile-top.js FILE.cpuprofile [--top 30] [--from SECONDS] [--to SECONDS] [--timeline]
 *
 * `--from` skips the first seconds of the profile (process start, module loading, migrations) so
 * that what remains is the load phase; `--to` ends the window (one route of a sweep that loaded
 * several in turn). `--timeline` prints the busy share of every second instead, to find the windows.
 */
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number }
  children?: number[]
}

interface Profile {
  startTime: number
  nodes: ProfileNode[]
  samples: number[]
  timeDeltas: number[]
}

/** `node_modules/@mikro-orm/core/…` → `@mikro-orm/core`; our files by folder; node internals as one */
function areaOf(url: string): string {
  if (!url) return '(vm/native)'
  if (url.startsWith('node:')) return 'node internals'
  const nm = url.lastIndexOf('node_modules/')
  if (nm !== -1) {
    const parts = url.slice(nm + 'node_modules/'.length).split('/')
    return parts[0].startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]
  }
  const m = /\/dist\/(core\/[^/]+|plugins\/[^/]+|host|bench)/.exec(url)
  return m ? `mamkit ${m[1]}` : url.replace(/^file:\/\//, '')
}

function main() {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string', default: '30' }, from: { type: 'string', default: '0' }, to: { type: 'string' }, timeline: { type: 'boolean' } } })
  if (!positionals[0]) {
    console.error('usage: node dist/bench/profile-top.js FILE.cpuprofile [--top N]')
    process.exit(2)
  }
  const profile = JSON.parse(readFileSync(positionals[0], 'utf8')) as Profile
  const top = Number(values.top)
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const parent = new Map<number, number>()
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id)

  const selfUs = new Map<number, number>()
  const fromUs = Number(values.from) * 1e6
  const toUs = values.to === undefined ? Infinity : Number(values.to) * 1e6
  if (values.timeline) return timeline(profile, byId)
  let total = 0
  let at = 0
  profile.samples.forEach((id, i) => {
    const dt = profile.timeDeltas[i] ?? 0
    at += dt
    if (at < fromUs || at >= toUs) return
    selfUs.set(id, (selfUs.get(id) ?? 0) + dt)
    total += dt
  })

  const fnSelf = new Map<string, number>()
  const fnInclusive = new Map<string, number>()
  const areaSelf = new Map<string, number>()
  const areaInclusive = new Map<string, number>()
  const label = (n: ProfileNode) => {
    const f = n.callFrame
    const file = f.url ? f.url.replace(/^file:\/\/.*?\/(node_modules|dist)\//, '$1/') : ''
    return `${f.functionName || '(anonymous)'}  ${file}${file ? `:${f.lineNumber + 1}` : ''}`
  }
  for (const [id, us] of selfUs) {
    const node = byId.get(id)!
    fnSelf.set(label(node), (fnSelf.get(label(node)) ?? 0) + us)
    const area = areaOf(node.callFrame.url)
    areaSelf.set(area, (areaSelf.get(area) ?? 0) + us)
    // inclusive: every area and function on the stack gets the sample once
    const seen = new Set<string>()
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const frame = byId.get(cur)!
      for (const [key, map] of [
        [`area ${areaOf(frame.callFrame.url)}`, areaInclusive],
        [`fn ${label(frame)}`, fnInclusive],
      ] as const) {
        if (seen.has(key)) continue
        seen.add(key)
        const name = key.slice(key.indexOf(' ') + 1)
        map.set(name, (map.get(name) ?? 0) + us)
      }
    }
  }

  const pct = (us: number) => `${((100 * us) / total).toFixed(1).padStart(5)} %`
  const print = (title: string, map: Map<string, number>, n: number) => {
    console.log(`\n${title}`)
    for (const [k, us] of [...map].sort((a, b) => b[1] - a[1]).slice(0, n)) console.log(`${pct(us)}  ${k}`)
  }
  console.log(`${positionals[0]}: ${(total / 1e6).toFixed(1)} s sampled${fromUs ? ` after the first ${values.from} s` : ''}${values.to ? ` until ${values.to} s` : ''}`)
  print('self time by area', areaSelf, top)
  print('inclusive time by area (an area counted once per sample)', areaInclusive, top)
  print('self time by function', fnSelf, top)
  print('inclusive time by function (a function counted once per sample)', fnInclusive, top)
}

/** the share of each second's samples that were not idle: where the load phases are */
function timeline(profile: Profile, byId: Map<number, ProfileNode>) {
  const busy: number[] = []
  const all: number[] = []
  let at = 0
  profile.samples.forEach((id, i) => {
    const dt = profile.timeDeltas[i] ?? 0
    at += dt
    const s = Math.floor(at / 1e6)
    all[s] = (all[s] ?? 0) + dt
    if (byId.get(id)!.callFrame.functionName !== '(idle)') busy[s] = (busy[s] ?? 0) + dt
  })
  for (let s = 0; s < all.length; s++) console.log(`${String(s).padStart(5)} s  ${'#'.repeat(Math.round((50 * (busy[s] ?? 0)) / (all[s] || 1)))}`)
}

main()
