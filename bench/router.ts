/**
 * Route matching alone, in-process: the cost of `RouteTable.find` (core/http/router.ts: @koa/router,
 * one router per first path segment) for a few request paths over every built-in route, beside one
 * @koa/router holding the whole table (what ARCHITECTURE.md §1 says was too slow) in the same run.
 *
 *   npx tsc -p . && node dist/bench/router.js [--iterations 200000]
 */
import { parseArgs } from 'node:util'
import Router from '@koa/router'
import { describePlugins } from '../core/runtime.js'
import { builtinPlugins } from '../plugins/index.js'
import { RouteTable } from '../core/http/router.js'

const { values } = parseArgs({ options: { iterations: { type: 'string', default: '200000' } } })
const iterations = Number(values.iterations)
const PREFIX = '/api/v1'

const { loaded } = await describePlugins({ plugins: builtinPlugins })
const sharded = new RouteTable<string>(PREFIX)
const whole = new Router({ prefix: PREFIX })
for (const r of loaded.routes) {
  sharded.add(r.method, r.path, `${r.method} ${r.path}`)
  whole.register(r.path, [r.method], () => undefined)
}

const paths: Array<[string, string]> = [
  ['GET', '/api/v1/session/user_id'],
  ['GET', '/api/v1/templates'],
  ['GET', '/api/v1/projects/12/assets'],
  ['PUT', '/api/v1/assets/7/prepare_download_highres'],
  ['GET', '/api/v1/no/such/route'],
]

/** ns per call of `fn`, best of 5 runs */
function time(fn: () => unknown): number {
  let best = Infinity
  for (let run = 0; run < 5; run++) {
    const started = process.hrtime.bigint()
    for (let i = 0; i < iterations; i++) fn()
    best = Math.min(best, Number(process.hrtime.bigint() - started) / iterations)
  }
  return best
}

console.log(`${loaded.routes.length} routes, ${iterations} lookups per run, best of 5; node ${process.version}`)
console.log(['request', 'sharded (ns)', 'one router (ns)', 'ratio'].join('\t'))
for (const [method, path] of paths) {
  const found = sharded.find(method, path)
  const shardedNs = time(() => sharded.find(method, path))
  const wholeNs = time(() => {
    const m = whole.match(path, method)
    const layer = m.pathAndMethod[0]
    return layer && layer.params(path, layer.captures(path))
  })
  console.log([`${method} ${path}${found ? '' : ' (no route)'}`, shardedNs.toFixed(0), wholeNs.toFixed(0), `${(wholeNs / shardedNs).toFixed(1)}×`].join('\t'))
}
