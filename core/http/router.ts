import Router from '@koa/router'

/**
 * Route matching for the plugin routes with @koa/router (ARCHITECTURE.md §1), one router per first
 * path segment: a map lookup picks the few patterns that share a request's first segment, so a
 * request never tests the ~150 regular expressions of the whole table. The routers only match
 * (`router.match` and the layer's `params()`); the caller runs the matched route's own handler,
 * which keeps the request path synchronous where nothing has to be awaited (the routers' middleware
 * dispatch is asynchronous).
 *
 * What the routes rely on: static segments match without regard to case, one trailing slash is
 * allowed, a parameter matches one non-empty segment and is URI-decoded (left as it is when
 * malformed), GET routes answer HEAD too, and where several patterns fit a path, static segments win
 * over parameters segment by segment from the left (`/projects/search` before `/projects/:id`, while
 * `PUT /projects/search` still reaches `PUT /projects/:id`). This table decides that precedence: each
 * router's layers are kept in that order, whatever order the plugins registered them in. A path that
 * fits a pattern but not with the request's method is told apart (`allowed`) for 405 and `Allow`.
 */

/** the methods a route may be registered for (the RouteRegistrar's), plus HEAD and OPTIONS answered for them */
export const ROUTER_METHODS: ReadonlySet<string> = new Set(['HEAD', 'OPTIONS', 'GET', 'PUT', 'PATCH', 'POST', 'DELETE'])

const STATIC_SEGMENT = /^[A-Za-z0-9_.~-]+$/
const PARAM_SEGMENT = /^:([A-Za-z_$][A-Za-z0-9_$]*)$/
const SLASH = 47

/** why `path` is not a route path this table takes (`/literal/:param/…`), or undefined when it is */
export function routePathProblem(path: string): string | undefined {
  if (path === '/') return undefined
  if (!path.startsWith('/')) return 'a path starts with /'
  const names = new Set<string>()
  for (const segment of path.slice(1).split('/')) {
    if (segment === '') return 'a path has no empty segments and no trailing slash'
    const param = PARAM_SEGMENT.exec(segment)
    if (param) {
      if (names.has(param[1])) return `the parameter :${param[1]} appears twice`
      names.add(param[1])
    } else if (!STATIC_SEGMENT.test(segment)) {
      return `"${segment}": a segment is a literal (letters, digits, _ . ~ -) or a :name parameter`
    }
  }
  return undefined
}

/** the shape two paths share when they would answer the same requests: `/Teams/:id` and `/teams/:team_id` alike */
export function routeShape(path: string): string {
  return path.replace(/:[A-Za-z_$][A-Za-z0-9_$]*/g, ':').toLowerCase()
}

/**
 * Precedence key: one character per segment, `0` for a literal and `1` for a parameter. Among patterns
 * that fit one path (they have as many segments as it has), the smallest key is the one whose first
 * literal-or-parameter difference from the others is a literal.
 */
const precedence = (path: string) => (path === '/' ? '' : path.slice(1).split('/').map((s) => (s.startsWith(':') ? '1' : '0')).join(''))

type Layer = Router['stack'][number]

interface Entry<T> {
  value: T
  /** the registered path with the prefix: what the request log shows (never the request's own path) */
  pattern: string
  precedence: string
}

/** the routes that share a first segment: a router of their own, its layers in precedence order */
class Shard<T> {
  readonly router = new Router({ sensitive: false, strict: false })
  readonly entries = new Map<Layer, Entry<T>>()

  add(method: string, path: string, entry: Entry<T>): void {
    const layer = this.router.register(path, [method], noop) as unknown as Layer
    this.entries.set(layer, entry)
    // keep the stack in precedence order (stable: equal keys in registration order); `match` lists the layers in stack order
    const stack = this.router.stack
    stack.pop()
    let at = stack.length
    while (at > 0 && this.entries.get(stack[at - 1])!.precedence > entry.precedence) at--
    stack.splice(at, 0, layer)
  }

  /** the first layer, in precedence order, that fits both the path and the method */
  find(path: string, method: string): RouteMatch<T> | undefined {
    const layers = this.router.match(path, method).pathAndMethod
    if (layers.length === 0) return undefined
    const layer = layers[0]
    const entry = this.entries.get(layer)!
    return { value: entry.value, pattern: entry.pattern, params: layer.params(path, layer.captures(path)) }
  }

  collectMethods(path: string, into: Set<string>): void {
    for (const layer of this.router.match(path, 'GET').path) for (const method of layer.methods) into.add(method)
  }
}

const noop = () => undefined

export interface RouteMatch<T> {
  value: T
  pattern: string
  params: Record<string, string>
}

export class RouteTable<T> {
  /** lower-case first segment → the routes starting with it ('' holds `/`) */
  private readonly shards = new Map<string, Shard<T>>()
  /** routes whose first segment is a parameter: tried after the literal's shard */
  private readonly paramShard = new Shard<T>()
  private readonly shapes = new Map<string, string>()
  private readonly prefixLower: string

  /** `prefix` (`/api/v1`) is matched before the routes' own paths, without regard to case like them */
  constructor(private readonly prefix = '') {
    this.prefixLower = prefix.toLowerCase()
  }

  /** throws when the path is malformed or the method and path shape are taken */
  add(method: string, path: string, value: T): void {
    const problem = routePathProblem(path)
    if (problem) throw new Error(`${method} ${path}: ${problem}`)
    if (!ROUTER_METHODS.has(method) || method === 'HEAD' || method === 'OPTIONS') throw new Error(`${method} ${path}: method not routable`)
    const shape = `${method} ${routeShape(path)}`
    const taken = this.shapes.get(shape)
    if (taken) throw new Error(`${method} ${path}: a route of this shape is registered already (${taken})`)
    const pattern = path === '/' ? this.prefix || '/' : this.prefix + path
    this.shapes.set(shape, pattern)
    const first = firstSegment(path)
    let shard = first.startsWith(':') ? this.paramShard : this.shards.get(first.toLowerCase())
    if (!shard) this.shards.set(first.toLowerCase(), (shard = new Shard<T>()))
    shard.add(method, path, { value, pattern, precedence: precedence(path) })
  }

  /** the route for `method` (HEAD finds GET routes) and the request path `path`, with its decoded parameters */
  find(method: string, path: string): RouteMatch<T> | undefined {
    const rest = this.routePart(path)
    if (rest === undefined) return undefined
    const first = firstSegment(rest)
    const shard = this.shards.get(first) ?? this.shards.get(first.toLowerCase())
    const match = shard?.find(rest, method)
    if (match || first === '') return match
    return this.paramShard.router.stack.length > 0 ? this.paramShard.find(rest, method) : undefined
  }

  /** every method some route takes for this path (HEAD beside GET), in precedence order: the `Allow` list */
  allowed(path: string): string[] {
    const rest = this.routePart(path)
    const methods = new Set<string>()
    if (rest === undefined) return []
    const first = firstSegment(rest)
    this.shards.get(first.toLowerCase())?.collectMethods(rest, methods)
    if (first !== '') this.paramShard.collectMethods(rest, methods)
    return [...methods]
  }

  /** the routes' part of `path` (`/` for the prefix alone); undefined outside the prefix or for `//` */
  private routePart(path: string): string | undefined {
    const p = this.prefix.length
    if (p > 0 && !path.startsWith(this.prefix) && path.slice(0, p).toLowerCase() !== this.prefixLower) return undefined
    if (path.length === p) return '/'
    if (path.charCodeAt(p) !== SLASH) return undefined // `/api/v1x`
    const rest = p > 0 ? path.slice(p) : path
    // `//`: an empty first segment with its trailing slash dropped is no path of any route
    return rest.length > 1 && rest.charCodeAt(1) === SLASH ? undefined : rest
  }
}

/** `/projects/7` → `projects`; `/` → `` */
function firstSegment(path: string): string {
  const end = path.indexOf('/', 1)
  return end === -1 ? path.slice(1) : path.slice(1, end)
}
