/**
 * Archive and restore throughput of the strategies plugin against plain copies of the same files,
 * in one run: a disk target (vs `cp -r` + `sync`, timed before and after the archive, the faster
 * counts) and, when the Debian packages are installed, a real Ceph RGW (vs lib-storage's Upload
 * alone). Files per second for many small files (vs `cp -r` + `sync` of them). A move between
 * storages (`POST /projects/tier`) vs `cp -r` + `sync`. And the process's RSS, sampled every
 * 100 ms, while a large project is archived and restored (the server runs in this process).
 *
 *   npx tsc -p . && node dist/bench/strategies.js [--mib 256] [--small 10000] [--large-gib 10] [--only disk,known,small,s3,tier,rss,verify,pages] [--copy-threads N]
 *
 * `--only known`: the disk runs again on a project whose files are assets hashed by the assets plugin
 * (`rehash`), so the archive knows their checksums (copies by the kernel, see plugins/strategies/README.md).
 * `--only pages` (not in the default set): the copying and releasing stages of small files alone
 * (`--pages-files`, 2,000), one file at a time on the event loop vs a page of 64 in worker tasks, alternating.
 * `--only verify` (not in the default set): the fingerprint check alone, read back and hashed vs
 * compared with the originals, alternating in one process (medians of 7).
 * `--cold`: the disk copies are not preceded by freeing page cache (warmPages, below).
 * `--large-gib 0` leaves the RSS run out; it needs twice that much free disk below the temp dir.
 */
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { createReadStream, readFileSync } from 'node:fs'
import { lstat, mkdir, mkdtemp, open, readdir, rm, stat, unlink, writeFile } from 'node:fs/promises'
import { loadavg, tmpdir } from 'node:os'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { performance } from 'node:perf_hooks'
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3'
import { Upload } from '@aws-sdk/lib-storage'
import { startTestServer, waitForJobs, type TestServer } from '../core/testing/index.js'
import { startRgw } from '../test/helpers/rgw.js'
import { Copier } from '../plugins/strategies/copier.js'
import { eachLimit } from '../plugins/strategies/concurrency.js'
import { DiskTarget } from '../plugins/strategies/targets/disk.js'
import type { Sums } from '../plugins/strategies/targets/types.js'
import { PARALLEL, copyVerified, verify } from '../plugins/strategies/transfer.js'

const { values } = parseArgs({ options: { mib: { type: 'string', default: '256' }, small: { type: 'string', default: '10000' }, 'large-gib': { type: 'string', default: '10' }, only: { type: 'string', default: 'disk,known,small,s3,tier,rss' }, 'copy-threads': { type: 'string' }, 'pages-files': { type: 'string', default: '2000' }, cold: { type: 'boolean', default: false } } })
/** `--cold`: no warmPages before the timed disk copies (as before 2026-11-25 03:20) */
const COLD = values.cold
/** the strategies plugin's `copyThreads` (0: hashing in the event loop's thread, as before the Copier); default one per core */
const THREADS = values['copy-threads'] === undefined ? undefined : Number(values['copy-threads'])
const MIB = Number(values.mib)
const SMALL = Number(values.small)
/** `--only pages`: files copied per run */
const PAGES_FILES = Number(values['pages-files'])
const LARGE_GIB = Number(values['large-gib'])
const ONLY = new Set(values.only.split(','))
const mibs = (bytes: number, ms: number) => (bytes / 1048576) / (ms / 1000)
const rate = (bytes: number, ms: number) => `${mibs(bytes, ms).toFixed(1)} MiB/s`
const perSecond = (n: number, ms: number) => `${(n / (ms / 1000)).toFixed(0)} files/s`
const ratio = (plainMs: number, ms: number) => `${(plainMs / ms).toFixed(2)}x`
const load = () => loadavg().map((l) => l.toFixed(1)).join(' ')

/** a project of the plain user with files of random bytes (large ones written in 16 MiB pieces, each a little different) */
async function project(s: TestServer, name: string, files: Record<string, number>) {
  const r = await s.request('POST', '/projects', { token: s.user.token, json: { name } })
  if (r.status !== 201) throw new Error(r.text)
  const id = r.body.project.id
  const root = (await s.request('GET', `/projects/${id}`, { token: s.admin.token })).body.project.path
  const piece = randomBytes(16 << 20)
  for (const [f, size] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(root, f)), { recursive: true })
    if (size <= 1 << 20) {
      await writeFile(path.join(root, f), randomBytes(size))
      continue
    }
    const handle = await open(path.join(root, f), 'w')
    for (let at = 0; at < size; at += piece.length) {
      randomBytes(64).copy(piece, 0)
      await handle.write(piece, 0, Math.min(piece.length, size - at), at)
    }
    await handle.close()
  }
  return { id, root }
}

/**
 * Registers the project's files as assets and has the assets plugin hash them (`rehash`: SHA-256 and
 * CRC-32 recorded with the size and modification time), as files ingested into a project are: the
 * archive then knows their checksums. Waits until no job is left queued or running.
 */
async function withKnownSums(s: TestServer, id: number, paths: string[]) {
  for (let i = 0; i < paths.length; i += 500) {
    const r = await s.request('POST', `/projects/${id}/addassets`, { token: s.user.token, json: { paths: paths.slice(i, i + 500) } })
    if (r.status !== 201) throw new Error(r.text)
  }
  await quiet(s)
  const r = await s.request('PUT', `/projects/${id}/rehash`, { token: s.user.token })
  if (r.status !== 202) throw new Error(r.text)
  await quiet(s)
  const hashed = await s.runtime.db.knex('assets').where({ project_id: id }).whereNotNull('sha256').count({ n: '*' })
  if (Number(hashed[0].n) !== paths.length) throw new Error(`only ${hashed[0].n} of ${paths.length} assets hashed`)
}

/** until no job is running or due within a minute (the core's test helper; later recurring jobs do not count) */
const quiet = (s: TestServer) => waitForJobs(s, { timeoutMs: 600_000 })

/** a request, once more when a kept-alive connection the server closed meanwhile was reset (the request never arrived) */
async function request(s: TestServer, ...args: Parameters<TestServer['request']>) {
  try {
    return await s.request(...args)
  } catch (err) {
    if ((err as any)?.cause?.code !== 'ECONNRESET') throw err
    return s.request(...args)
  }
}

/** time until the state rests; `stages` collects how long each state lasted (polled every 20 ms) */
async function timeArchive(s: TestServer, id: number, strategy: number, direction: 'archive' | 'unarchive', stages?: Map<string, number>) {
  const t0 = performance.now()
  const r = await request(s, 'PUT', `/projects/${id}/${direction}`, { token: s.user.token, json: direction === 'archive' ? { strategy } : {} })
  if (r.status !== 202) throw new Error(r.text)
  let last = { state: 'queued', at: t0 }
  for (;;) {
    const st = await s.runtime.db.knex('archive_states').where({ project_id: id }).first('state', 'error')
    const now = performance.now()
    if (st.state !== last.state) {
      stages?.set(last.state, (stages.get(last.state) ?? 0) + now - last.at)
      last = { state: st.state, at: now }
    }
    if (['archived', 'online', 'failed'].includes(st.state)) {
      if (st.state === 'failed') throw new Error(st.error)
      return now - t0
    }
    await new Promise((res) => setTimeout(res, 20))
  }
}
const timeline = (stages: Map<string, number>) => [...stages].map(([k, ms]) => `${k} ${(ms / 1000).toFixed(1)} s`).join(', ')

/** CPU time (user + system, ms) of this process's waited-for children: cutime + cstime of /proc/self/stat, in ticks of 10 ms */
function childCpuMs() {
  const fields = readFileSync('/proc/self/stat', 'utf8').replace(/^.*\) /, '').split(' ')
  return (Number(fields[13]) + Number(fields[14])) * 10
}
/** CPU time (user + system, ms) of this process (the server, its worker threads, the bench) */
const ownCpuMs = () => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1000
}

/**
 * Frees `bytes` of page cache just before a timed copy, so that every copy (cp, archive, restore)
 * writes into memory the guest freed a moment ago. On this VM (virtio-balloon with free page
 * reporting) memory freed for more than a second or two is handed back to the host, and writing
 * into it again costs a host fault per page: 512 MiB of buffered writes took 0.14–0.55 s right
 * after 512 MiB were freed and 2.7–4.9 s six seconds later. Without this, whichever copy happened
 * to follow a delete (the archive after cp's `rm -rf`, not the size check after a restore) won.
 */
async function warmPages(bytes: number) {
  if (COLD) return
  const file = path.join(targets, '.warm')
  const handle = await open(file, 'w')
  const piece = Buffer.alloc(16 << 20, 1)
  for (let at = 0; at < bytes; at += piece.length) await handle.write(piece, 0, piece.length, at)
  await handle.close()
  await rm(file)
}

/** `cp -r` + `sync` of a tree into `into` (removed after); `cpu` collects the CPU time of cp and sync */
function timeCp(from: string, into: string, cpu?: { ms: number }) {
  const c0 = childCpuMs()
  const t0 = performance.now()
  execFileSync('cp', ['-r', from, into])
  execFileSync('sync')
  const ms = performance.now() - t0
  if (cpu) cpu.ms = childCpuMs() - c0
  execFileSync('rm', ['-rf', into])
  return ms
}

async function waitJob(s: TestServer, id: number) {
  for (;;) {
    const j = await s.runtime.db.knex('jobs').where({ id }).first('state', 'error')
    if (['finished', 'failed', 'cancelled'].includes(j.state)) {
      if (j.state !== 'finished') throw new Error(`job ${id} ${j.state}: ${j.error}`)
      return
    }
    await new Promise((res) => setTimeout(res, 20))
  }
}

/** the process's RSS every 100 ms while `fn` runs */
async function sampled<T>(fn: () => Promise<T>): Promise<{ value: T; min: number; max: number; samples: number }> {
  const rss: number[] = []
  const timer = setInterval(() => rss.push(process.memoryUsage().rss), 100)
  try {
    const value = await fn()
    rss.push(process.memoryUsage().rss)
    return { value, min: Math.min(...rss), max: Math.max(...rss), samples: rss.length }
  } finally {
    clearInterval(timer)
  }
}
const mb = (n: number) => `${(n / 1048576).toFixed(0)} MiB`

const targets = await mkdtemp(path.join(tmpdir(), 'mamkit-bench-targets-'))
const slow = await mkdtemp(path.join(tmpdir(), 'mamkit-bench-slow-'))
const s = await startTestServer({ config: { logLevel: 'silent', plugins: { strategies: { roots: [targets], ...(THREADS === undefined ? {} : { copyThreads: THREADS }) }, storage: { storages: { slow } } } } })
console.log(`load average at start: ${load()}`)
try {
  const bytes = MIB * 1048576
  const big: Record<string, number> = {}
  for (let i = 0; i < 4; i++) big[`Media/f${i}.mov`] = bytes / 4
  const strategy = async (name: string, destination: string, target?: Record<string, unknown>, check = 'fingerprint') =>
    (await s.request('POST', '/archive_strategies', { token: s.admin.token, json: { name, destination, target, transmission_check: check } })).body.archivestrategy.id
  const disk = await strategy('disk', path.join(targets, 'disk'))
  const p = await project(s, 'Big', big)

  if (ONLY.has('disk')) {
    const sized = await strategy('disk, size check', path.join(targets, 'disk-size'), undefined, 'size')
    const cpCpu = { ms: 0 }
    const warm = bytes * 1.25
    await warmPages(warm)
    const cpBefore = timeCp(p.root, path.join(targets, 'cp'), cpCpu)
    const stages = new Map<string, number>()
    await warmPages(warm)
    const c0 = ownCpuMs()
    const elu0 = performance.eventLoopUtilization()
    const archiveMs = await timeArchive(s, p.id, disk, 'archive', stages)
    const archiveCpu = ownCpuMs() - c0
    const archiveElu = performance.eventLoopUtilization(elu0)
    await warmPages(warm)
    const r0 = ownCpuMs()
    const restoreMs = await timeArchive(s, p.id, disk, 'unarchive')
    const restoreCpu = ownCpuMs() - r0
    const sizedStages = new Map<string, number>()
    await warmPages(warm)
    const s0 = ownCpuMs()
    const sizedMs = await timeArchive(s, p.id, sized, 'archive', sizedStages)
    const sizedCpu = ownCpuMs() - s0
    await timeArchive(s, p.id, sized, 'unarchive')
    await warmPages(warm)
    const cpMs = Math.min(cpBefore, timeCp(p.root, path.join(targets, 'cp')))
    console.log(`disk, ${MIB} MiB in 4 files: cp -r + sync ${rate(bytes, cpMs)} (${rate(bytes, cpBefore)} before, the faster counts); CPU time: cp + sync ${(cpCpu.ms / 1000).toFixed(2)} s, archive (whole process) ${(archiveCpu / 1000).toFixed(2)} s, event loop busy ${(archiveElu.active / 1000).toFixed(2)} s (copyThreads ${THREADS ?? 'default'}${COLD ? ', --cold' : ', page cache freed before each copy'})`)
    console.log(`  archive (one pass: hash while copying; batched fsync; fingerprint read-back; release) ${rate(bytes, archiveMs)} = ${ratio(cpMs, archiveMs)} (${timeline(stages)})`)
    console.log(`  archive with transmission_check size (no read-back) ${rate(bytes, sizedMs)} = ${ratio(cpMs, sizedMs)} (${timeline(sizedStages)}); CPU ${(sizedCpu / 1000).toFixed(2)} s`)
    console.log(`  restore (copy, hash, batched fsync, link) ${rate(bytes, restoreMs)} = ${ratio(cpMs, restoreMs)}; CPU ${(restoreCpu / 1000).toFixed(2)} s`)
    console.log(`  load average: ${load()}`)
  }

  if (ONLY.has('known')) {
    // the same files registered as assets and hashed by the assets plugin (its recorded SHA-256 and
    // CRC-32): what a project of ingested media is; the archive may use the checksums it has
    const k = await project(s, 'Known', big)
    await withKnownSums(s, k.id, Object.keys(big))
    const fp = await strategy('disk, known sums', path.join(targets, 'disk-known'))
    const sized = await strategy('disk, known sums, size check', path.join(targets, 'disk-known-size'), undefined, 'size')
    const warm = bytes * 1.25
    const stages = new Map<string, number>()
    const timed = async (fn: () => Promise<number>) => {
      await warmPages(warm)
      const c0 = ownCpuMs()
      const ms = await fn()
      return { ms, cpu: ownCpuMs() - c0 }
    }
    const cpCpu = { ms: 0 }
    await warmPages(warm)
    const cpBefore = timeCp(k.root, path.join(targets, 'cp'), cpCpu)
    const a = await timed(() => timeArchive(s, k.id, fp, 'archive', stages))
    const r = await timed(() => timeArchive(s, k.id, fp, 'unarchive'))
    const z = await timed(() => timeArchive(s, k.id, sized, 'archive'))
    await timeArchive(s, k.id, sized, 'unarchive')
    await warmPages(warm)
    const cpMs = Math.min(cpBefore, timeCp(k.root, path.join(targets, 'cp')))
    const line = (what: string, t: { ms: number; cpu: number }) => `  ${what} ${rate(bytes, t.ms)} = ${ratio(cpMs, t.ms)}; CPU ${(t.cpu / 1000).toFixed(2)} s`
    console.log(`known sums (assets hashed by rehash), ${MIB} MiB in 4 files: cp -r + sync ${rate(bytes, cpMs)} (${rate(bytes, cpBefore)} before, the faster counts); CPU of cp + sync ${(cpCpu.ms / 1000).toFixed(2)} s`)
    console.log(`${line('archive, fingerprint', a)} (${timeline(stages)})`)
    console.log(line('archive, size check', z))
    console.log(line('restore', r))
    console.log(`  load average: ${load()}`)
  }

  if (ONLY.has('verify')) {
    // the fingerprint check alone, both ways in this one process (alternating, medians): the 4 large
    // files copied once to a disk target, then read back 4 at once in the Copier's worker threads and
    // hashed (main's way) or compared with their originals (COMPARE_FROM and up); both in page cache,
    // as right after an archive's copy
    const copier = new Copier(THREADS)
    const target = new DiskTarget(path.join(targets, 'verify'))
    const files = Object.keys(big).map((rel) => ({ rel, key: `v/${rel}` }))
    const sums = new Map<string, Sums>()
    await eachLimit(files, PARALLEL, async ({ rel, key }) => {
      const batch = target.batch()
      const from = await open(path.join(p.root, rel), 'r')
      try {
        sums.set(key, await batch.putFile!(key, from, bytes / 4, copier.copy))
      } finally {
        await from.close()
      }
      await batch.commit()
    })
    const stats = new Map(await Promise.all(files.map(async ({ rel }) => [rel, await stat(path.join(p.root, rel))] as const)))
    const timeOne = async (how: 'hash' | 'compare') => {
      const c0 = ownCpuMs()
      const t0 = performance.now()
      await eachLimit(files, PARALLEL, ({ rel, key }) =>
        verify(target, key, sums.get(key)!, 'fingerprint', undefined, copier.copy, how === 'compare' ? { root: p.root, path: rel, stats: stats.get(rel)!, compare: copier.compare } : undefined),
      )
      return { ms: performance.now() - t0, cpu: ownCpuMs() - c0 }
    }
    await timeOne('hash')
    await timeOne('compare')
    const runs: Record<'hash' | 'compare', Array<{ ms: number; cpu: number }>> = { hash: [], compare: [] }
    for (let i = 0; i < 7; i++) for (const how of i % 2 ? (['compare', 'hash'] as const) : (['hash', 'compare'] as const)) runs[how].push(await timeOne(how))
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
    const of = (how: 'hash' | 'compare') => ({ ms: median(runs[how].map((r) => r.ms)), cpu: median(runs[how].map((r) => r.cpu)) })
    const h = of('hash')
    const c = of('compare')
    console.log(`verify, ${MIB} MiB in 4 files (page cache), medians of 7: read back and hashed ${rate(bytes, h.ms)}, CPU ${(h.cpu / 1000).toFixed(2)} s; compared with the originals ${rate(bytes, c.ms)}, CPU ${(c.cpu / 1000).toFixed(2)} s; compare/hash time ${(c.ms / h.ms).toFixed(2)}, CPU ${(c.cpu / h.cpu).toFixed(2)}; load average ${load()}`)
    await copier.close()
  }

  if (ONLY.has('pages')) {
    // the copying and releasing stages of small files alone, both ways in this one process
    // (alternating, medians): copyVerified of pages of 64 files of 4 KiB with a fingerprint check,
    // then the copies removed as a release removes originals (lstat, compare, unlink), one file at a
    // time on the event loop, 4 at once (main's way), or a page in worker tasks (Copier.copyPage: one
    // task; removePage: 4 at once)
    const copier = new Copier(THREADS)
    const ways = ['per-file', 'page'] as const
    type Way = (typeof ways)[number]
    const files: Record<string, number> = {}
    for (let i = 0; i < PAGES_FILES; i++) files[`s/${Math.floor(i / 100)}/f${i}.bin`] = 4096
    const src = await project(s, 'Pages', files)
    const names = Object.keys(files)
    let round = 0
    const measured = async <T>(fn: () => Promise<T>) => {
      const c0 = ownCpuMs()
      const elu0 = performance.eventLoopUtilization()
      const t0 = performance.now()
      await fn()
      return { ms: performance.now() - t0, cpu: ownCpuMs() - c0, loop: performance.eventLoopUtilization(elu0).active }
    }
    // archive.ts release's per-file way: lstat, compare, unlink, 4 at once on the event loop
    const removeEach = async (page: Array<{ path: string; size: number; mtimeMs: number }>) => {
      const removed: string[] = []
      await eachLimit(page, PARALLEL, async (f) => {
        const st = await lstat(f.path)
        if (!st.isFile() || st.size !== f.size || Math.floor(st.mtimeMs) !== f.mtimeMs) return void removed.push('changed')
        await unlink(f.path)
        removed.push('removed')
      })
      return removed
    }
    const timeOne = async (way: Way) => {
      const dir = path.join(targets, `pages-${round++}`)
      const target = new DiskTarget(dir)
      const signal = new AbortController().signal
      const copyPage = way === 'per-file' ? undefined : copier.copyPage
      const copy = await measured(async () => {
        for (let i = 0; i < names.length; i += 64) {
          const page = names.slice(i, i + 64).map((rel) => ({ item: rel, root: src.root, path: rel, key: rel, size: 4096 }))
          const done = await copyVerified(target, page, { check: 'fingerprint', signal, reuse: false, copy: copier.copy, compare: copier.compare, copyPage })
          if (done.some((o) => o.error)) throw new Error(`${way}: ${done.find((o) => o.error)!.error!.message}`)
        }
      })
      // the copies' times, as an archive's rows have the originals'
      const copies = await Promise.all(names.map(async (rel) => ({ path: path.join(dir, rel), size: 4096, mtimeMs: Math.floor((await stat(path.join(dir, rel))).mtimeMs) })))
      const release = await measured(async () => {
        for (let i = 0; i < copies.length; i += 64) {
          const page = copies.slice(i, i + 64)
          const removed = way === 'per-file' ? await removeEach(page) : await copier.removePage!(page)
          if (removed.some((r) => r !== 'removed')) throw new Error(`${way}: not every copy removed`)
        }
      })
      await rm(dir, { recursive: true, force: true })
      return { copy, release }
    }
    const runs = new Map<Way, Array<Awaited<ReturnType<typeof timeOne>>>>()
    for (let i = 0; i < 5; i++) for (const way of i % 2 ? [...ways].reverse() : ways) runs.set(way, [...(runs.get(way) ?? []), await timeOne(way)])
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
    const figures = (list: Array<{ ms: number; cpu: number; loop: number }>) =>
      `${perSecond(PAGES_FILES, median(list.map((r) => r.ms)))}, ${((median(list.map((r) => r.cpu)) * 1000) / PAGES_FILES).toFixed(0)} µs CPU/file, event loop ${((median(list.map((r) => r.loop)) * 1000) / PAGES_FILES).toFixed(0)} µs/file`
    console.log(`pages, ${PAGES_FILES} files of 4 KiB in pages of 64, medians of 5 (load average ${load()}):`)
    for (const way of ways) {
      const list = runs.get(way)!
      console.log(`  ${way}: copy (fingerprint) ${figures(list.map((r) => r.copy))}; release ${figures(list.map((r) => r.release))}`)
    }
    await copier.close()
  }

  if (ONLY.has('small')) {
    const small: Record<string, number> = {}
    for (let i = 0; i < SMALL; i++) small[`s/${Math.floor(i / 100)}/f${i}.bin`] = 4096
    const q = await project(s, 'Small', small)
    const cpMs = timeCp(q.root, path.join(targets, 'cp-small'))
    const stages = new Map<string, number>()
    const c0 = ownCpuMs()
    const smallMs = await timeArchive(s, q.id, disk, 'archive', stages)
    const archiveCpu = ownCpuMs() - c0
    const r0 = ownCpuMs()
    const smallBack = await timeArchive(s, q.id, disk, 'unarchive')
    const restoreCpu = ownCpuMs() - r0
    // CPU per file: the process's (server, its threads, the bench's 20 ms polling) while each ran
    const perFile = (ms: number) => `${((ms * 1000) / SMALL).toFixed(0)} µs CPU/file`
    console.log(`disk, ${SMALL} files of 4 KiB: cp -r + sync ${perSecond(SMALL, cpMs)}; archive ${perSecond(SMALL, smallMs)} = ${ratio(cpMs, smallMs)}, ${perFile(archiveCpu)} (${timeline(stages)}); restore ${perSecond(SMALL, smallBack)} = ${ratio(cpMs, smallBack)}, ${perFile(restoreCpu)}; load average ${load()}`)
  }

  if (ONLY.has('tier')) {
    const cpMs = timeCp(p.root, path.join(slow, 'cp'))
    const move = async (storage: string) => {
      const t0 = performance.now()
      const r = await request(s, 'POST', '/projects/tier', { token: s.admin.token, json: { project_id: p.id, storage } })
      if (r.status !== 202) throw new Error(r.text)
      await waitJob(s, r.body.job.id)
      return performance.now() - t0
    }
    const there = await move('slow')
    const back = await move('default')
    console.log(`tier, ${MIB} MiB in 4 files between two storages: cp -r + sync ${rate(bytes, cpMs)}; POST /projects/tier (copy with hash, batched fsync, read-back, switch, remove) ${rate(bytes, there)} = ${ratio(cpMs, there)}, back ${rate(bytes, back)} = ${ratio(cpMs, back)}; load average ${load()}`)
  }

  if (ONLY.has('s3')) {
    const rgw = await startRgw()
    if (typeof rgw === 'string') console.log(`s3: skipped (${rgw})`)
    else {
      try {
        const client = new S3Client({ endpoint: rgw.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: rgw.accessKeyId, secretAccessKey: rgw.secretAccessKey }, requestChecksumCalculation: 'WHEN_REQUIRED', responseChecksumValidation: 'WHEN_REQUIRED' })
        await client.send(new CreateBucketCommand({ Bucket: 'bench' }))
        const upload = async (round: number) => {
          const t0 = performance.now()
          for (const f of await readdir(path.join(p.root, 'Media')))
            await new Upload({ client, queueSize: 4, partSize: 8 << 20, params: { Bucket: 'bench', Key: `plain${round}/${f}`, Body: createReadStream(path.join(p.root, 'Media', f)) } }).done()
          return performance.now() - t0
        }
        const upBefore = await upload(1)
        const s3 = await strategy('s3', 's3://bench/archives', { endpoint: rgw.endpoint, access_key_id: rgw.accessKeyId, secret_access_key: rgw.secretAccessKey })
        const a = await timeArchive(s, p.id, s3, 'archive')
        const r = await timeArchive(s, p.id, s3, 'unarchive')
        // the same with transmission_check checksum: the metadata checked, no read-back
        const s3checksum = await strategy('s3 checksum', 's3://bench/checksum', { endpoint: rgw.endpoint, access_key_id: rgw.accessKeyId, secret_access_key: rgw.secretAccessKey }, 'checksum')
        const c = await timeArchive(s, p.id, s3checksum, 'archive')
        await timeArchive(s, p.id, s3checksum, 'unarchive')
        const upMs = Math.min(upBefore, await upload(2))
        console.log(`s3 (Ceph RGW, memstore), ${MIB} MiB: lib-storage Upload alone ${rate(bytes, upMs)} (${rate(bytes, upBefore)} before, the faster counts); archive (fingerprint: read back) ${rate(bytes, a)} = ${ratio(upMs, a)}; archive (checksum) ${rate(bytes, c)} = ${ratio(upMs, c)}; restore ${rate(bytes, r)}; load average ${load()}`)
        client.destroy()
      } finally {
        await rgw.stop()
      }
    }
  }

  if (ONLY.has('rss') && LARGE_GIB > 0) {
    // files of 1 GiB (and 256 MiB for a remainder): the archive streams them; nothing should grow with the project
    const total = LARGE_GIB * 1024 ** 3
    const files: Record<string, number> = {}
    for (let at = 0, i = 0; at < total; i++) {
      const size = Math.min(1024 ** 3, total - at)
      files[`Media/take${i}.mov`] = size
      at += size
    }
    const before = process.memoryUsage().rss
    const large = await project(s, 'Large', files)
    const archived = await sampled(() => timeArchive(s, large.id, disk, 'archive'))
    const restored = await sampled(() => timeArchive(s, large.id, disk, 'unarchive'))
    console.log(`rss, ${LARGE_GIB} GiB in ${Object.keys(files).length} files: before ${mb(before)}; archive ${rate(total, archived.value)}, RSS min ${mb(archived.min)} max ${mb(archived.max)} (${archived.samples} samples); restore ${rate(total, restored.value)}, RSS min ${mb(restored.min)} max ${mb(restored.max)}; load average ${load()}`)
    await rm(large.root, { recursive: true, force: true })
  }
} finally {
  await s.close()
  await rm(targets, { recursive: true, force: true })
  await rm(slow, { recursive: true, force: true })
}
