import t from 'tap'
import fc from 'fast-check'
import { Hlc, decodeHlc, encodeHlc } from '../../../plugins/federation/hlc.js'
import { canonical, checksumOf, emptyState, falseWins, merge, parseState, priorityWins, resolve, trueWins, write, type RecordState, type Value } from '../../../plugins/federation/kernel.js'

/**
 * Layer 1 (FEDERATION.md §9.1): merge laws on REACHABLE states (random histories on 3 replicas with
 * skewed clocks, syncs, stale re-deliveries), checked against an independent model of the
 * multi-value register ("a write supersedes the writes it had seen"). The laws alone are not enough:
 * a single-entry LWW passes them and fails the model.
 */
const REPLICAS = ['aaaaaa.1', 'bbbbbb.1', 'cccccc.1']
const FIELDS = ['name', 'color', 'members/x']

type Op = { kind: 'write'; at: number; field: string; value: Value | undefined; skew: number } | { kind: 'sync'; from: number; to: number } | { kind: 'stale'; from: number; to: number; back: number }

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ kind: fc.constant('write' as const), at: fc.nat(2), field: fc.constantFrom(...FIELDS), value: fc.option(fc.oneof(fc.string({ maxLength: 4 }), fc.integer({ min: -5, max: 5 }), fc.boolean()), { nil: undefined, freq: 6 }), skew: fc.integer({ min: -86_400_000, max: 86_400_000 }) }),
  fc.record({ kind: fc.constant('sync' as const), from: fc.nat(2), to: fc.nat(2) }),
  fc.record({ kind: fc.constant('stale' as const), from: fc.nat(2), to: fc.nat(2), back: fc.nat(5) }),
)

interface ModelWrite { id: string; field: string; value: Value | undefined; supersedes: Set<string> }

/** runs a history; returns the replicas' states, their history, and the model's writes and knowledge */
function run(ops: Op[]) {
  let time = 1_700_000_000_000
  const states: RecordState[] = REPLICAS.map(() => emptyState())
  const history: RecordState[][] = REPLICAS.map(() => [])
  const clocks = REPLICAS.map(() => ({ skew: 0 }))
  const hlcs = clocks.map((c) => new Hlc({ now: () => time + c.skew }))
  const known: Set<string>[] = REPLICAS.map(() => new Set())
  const writes = new Map<string, ModelWrite>()
  for (const op of ops) {
    time += 7
    if (op.kind === 'write') {
      clocks[op.at].skew = op.skew
      const next = write(states[op.at], REPLICAS[op.at], hlcs[op.at].tick(), { [op.field]: op.value })
      const id = `${REPLICAS[op.at]}:${next.cc[REPLICAS[op.at]]}`
      const supersedes = new Set([...known[op.at]].filter((w) => writes.get(w)!.field === op.field))
      writes.set(id, { id, field: op.field, value: op.value, supersedes })
      known[op.at].add(id)
      states[op.at] = next
      history[op.at].push(next)
    } else if (op.kind === 'sync') {
      states[op.to] = merge(states[op.to], states[op.from])
      for (const w of known[op.from]) known[op.to].add(w)
    } else {
      const old = history[op.from][history[op.from].length - 1 - op.back]
      if (!old) continue
      states[op.to] = merge(states[op.to], old)
      // an old state carries what its writer knew then: every write with a dot it covers
      for (const w of writes.keys()) {
        const [r, n] = [w.slice(0, w.lastIndexOf(':')), Number(w.slice(w.lastIndexOf(':') + 1))]
        if ((old.cc[r] ?? 0) >= n) known[op.to].add(w)
      }
    }
  }
  return { states, writes }
}

const fullMerge = (states: RecordState[]) => states.reduce((a, b) => merge(a, b), emptyState())
const same = (a: RecordState, b: RecordState) => canonical(a) === canonical(b)

t.test('merge laws on reachable states', async (t) => {
  fc.assert(
    fc.property(fc.array(opArb, { maxLength: 40 }), (ops) => {
      const [a, b, c] = run(ops).states
      return same(merge(a, a), a) && same(merge(a, b), merge(b, a)) && same(merge(merge(a, b), c), merge(a, merge(b, c)))
    }),
    { numRuns: 3000 },
  )
  t.pass('idempotent, commutative, associative')
})

t.test('after a full sync each field holds exactly the writes no later write had seen (MV-register model)', async (t) => {
  fc.assert(
    fc.property(fc.array(opArb, { maxLength: 40 }), (ops) => {
      const { states, writes } = run(ops)
      const merged = fullMerge(states)
      for (const field of FIELDS) {
        const superseded = new Set<string>()
        for (const w of writes.values()) for (const s of w.supersedes) superseded.add(s)
        const live = [...writes.values()].filter((w) => w.field === field && w.value !== undefined && !superseded.has(w.id)).map((w) => w.id).sort()
        const have = (merged.f[field] ?? []).map((e) => `${e[1]}:${e[2]}`).sort()
        if (JSON.stringify(live) !== JSON.stringify(have)) return false
      }
      return true
    }),
    { numRuns: 3000 },
  )
  t.pass('model agrees')
})

t.test('causality beats clocks: a write made after seeing another wins with a clock a day behind', async (t) => {
  let now = 1_700_000_000_000
  const ahead = new Hlc({ now: () => now + 86_400_000 })
  const behind = new Hlc({ now: () => now - 86_400_000 })
  const a = write(emptyState(), 'aaaaaa.1', ahead.tick(), { status: 'approved' })
  now += 10
  // b merged a but did NOT advance its clock (no recv): dots still decide
  const b = write(merge(emptyState(), a), 'bbbbbb.1', behind.tick(), { status: 'rejected' })
  const final = merge(a, b)
  t.same(final.f.status.map((e) => e[0]), ['rejected'])
  t.equal(resolve(final, {}).status, 'rejected')
})

t.test('canonical round trip and checksums', async (t) => {
  fc.assert(
    fc.property(fc.array(opArb, { maxLength: 30 }), (ops) => {
      const [a, b] = run(ops).states
      const text = canonical(a)
      const parsed = parseState(text)
      if (!('state' in parsed) || canonical(parsed.state) !== text) return false
      return (checksumOf('user', 'u', canonical(a)) === checksumOf('user', 'u', canonical(b))) === (canonical(a) === canonical(b))
    }),
    { numRuns: 1000 },
  )
  t.pass('round trip')
})

t.test('resolvers: revoke wins, disable wins, left wins, add wins; origin-only fields', async (t) => {
  const base = emptyState()
  const x = write(base, 'aaaaaa.1', encodeHlc(2000, 0), { 'matrix/a': false, disabled: false, status: 'active', 'members/u1': true, login: 'alice' })
  const y = write(base, 'bbbbbb.1', encodeHlc(1000, 0), { 'matrix/a': true, disabled: true, status: 'left', login: 'mallory' })
  const m = merge(x, y)
  const rules = { resolvers: { 'matrix/': falseWins, disabled: trueWins, status: priorityWins(['left']) }, originOnly: ['login'] }
  const r = resolve(m, rules, 'bbbbbb')
  t.equal(r['matrix/a'], false)
  t.equal(r.disabled, true)
  t.equal(r.status, 'left')
  t.equal(r.login, 'mallory', 'only the origin site counts for login')
  t.equal(resolve(m, rules, 'aaaaaa').login, 'alice')
  // add wins: a concurrent remove of the member does not delete the re-add
  const removed = write(x, 'aaaaaa.1', encodeHlc(3000, 0), { 'members/u1': undefined })
  const readded = write(x, 'bbbbbb.1', encodeHlc(2500, 0), { 'members/u1': true })
  t.equal(resolve(merge(removed, readded), rules)['members/u1'], true)
  t.equal(resolve(merge(removed, x), rules)['members/u1'], undefined, 'a remove that saw the add removes it')
})

t.test('an old reader merges unknown fields and keeps them byte for byte', async (t) => {
  const newer = write(emptyState(2), 'aaaaaa.1', encodeHlc(5, 0), { future_field: { a: 1, b: 'x' } })
  const old = write(emptyState(1), 'bbbbbb.1', encodeHlc(6, 0), { name: 'n' })
  const m = merge(old, newer)
  t.equal(m.v, 2)
  t.same(m.f.future_field, newer.f.future_field)
})

t.test('validation refuses what a peer must not send', async (t) => {
  const good = canonical(write(emptyState(), 'aaaaaa.1', encodeHlc(1, 0), { n: 1 }))
  t.ok('state' in parseState(good))
  const cases: [string, unknown][] = [
    ['not json', '{'],
    ['float', '{"cc":{"aaaaaa.1":1},"f":{"n":[[1.5,"aaaaaa.1",1,"0000000000010000"]]},"v":1}'],
    ['dot beyond cc', '{"cc":{"aaaaaa.1":1},"f":{"n":[[1,"aaaaaa.1",2,"0000000000010000"]]},"v":1}'],
    ['bad replica', '{"cc":{"x":1},"f":{},"v":1}'],
    ['extra key', '{"cc":{},"f":{},"v":1,"z":0}'],
    ['non-NFC', JSON.stringify({ v: 1, cc: { 'aaaaaa.1': 1 }, f: { n: [['e\u0301', 'aaaaaa.1', 1, '0000000000010000']] } })],
    ['one dot two values', '{"cc":{"aaaaaa.1":1},"f":{"n":[[1,"aaaaaa.1",1,"0000000000010000"],[2,"aaaaaa.1",1,"0000000000010000"]]},"v":1}'],
    ['not a string', { v: 1 }],
  ]
  for (const [name, text] of cases) t.ok('problem' in parseState(text), name)
})

t.test('HLC: monotonic under backward jumps, counter overflow, recv capped', async (t) => {
  let now = 1_000_000
  const clock = new Hlc({ now: () => now, maxDriftMs: 300_000 })
  const stamps = [clock.tick()]
  now -= 86_400_000 // the physical clock jumps a day back
  for (let i = 0; i < 70_000; i++) stamps.push(clock.tick()) // past the 16-bit counter
  t.ok(stamps.every((s, i) => i === 0 || s > stamps[i - 1]), 'strictly increasing')
  now = 10_000_000
  const before = clock.peek()
  clock.recv(encodeHlc(now + 86_400_000, 5)) // a peer a day ahead
  t.ok(clock.peek() >= before, 'recv never lowers')
  t.equal(decodeHlc(clock.peek()).ms, now + 300_000, 'capped at physical + max drift')
  const fresh = new Hlc({ now: () => 0 })
  fresh.restore(encodeHlc(500, 3))
  t.ok(fresh.tick() > encodeHlc(500, 3), 'restored from the highest own stamp')
})
