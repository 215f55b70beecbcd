/**
 * Route dispatch for the plugin routes: a tree over the path's segments, so a request walks its
 * own few segments (a map lookup per static segment) instead of testing every route's regular
 * expression, and each route's handler is a plain function built once at boot.
 *
 * It keeps what @koa/router did for our route shapes (literal segments and `:name` parameters):
 * static segments are matched without regard to case, one trailing slash is allowed, parameters
 * match one non-empty segment and are URI-decoded (left as they are when malformed), GET routes
 * answer HEAD too, and where several patterns fit a path, static segments win over parameters,
 * segment by segment from the left (`/projects/search` before `/projects/:id`). A path that fits a
 * pattern but not with the request's method is told apart (`allowed`) so the caller can answer 405
 * with an `Allow` list.
 */

/** the methods a route may be registered for (the RouteRegistrar's), plus HEAD and OPTIONS answered for them */
export const ROUTER_METHODS: ReadonlySet<string> = new Set(['HEAD', 'OPTIONS', 'GET', 'PUT', 'PATCH', 'POST', 'DELETE'])

const STATIC_SEGMENT = /^[A-Za-z0-9_.~-]+$/
const PARAM_SEGMENT = /^:([A-Za-z_$][A-Za-z0-9_$]*)$/
const SLASH = 47

/** why `path` is not a route path this router takes (`/literal/:param/…`), or undefined when it is */
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

interface Leaf<T> {
  value: T
  /** the registered path with the prefix: what the request log shows (never the request's own path) */
  pattern: string
  paramNames: string[]
}

interface Node<T> {
  /** lower-case literal segment → node */
  statics: Map<string, Node<T>>
  param?: Node<T>
  /** method → route ending here, in registration order */
  leaves?: Map<string, Leaf<T>>
}

export interface RouteMatch<T> {
  value: T
  pattern: string
  params: Record<string, string>
}

const newNode = <T>(): Node<T> => ({ statics: new Map() })

export class RouteTree<T> {
  private readonly root: Node<T> = newNode()
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
    let node = this.root
    const paramNames: string[] = []
    for (const segment of path === '/' ? [] : path.slice(1).split('/')) {
      if (segment.startsWith(':')) {
        paramNames.push(segment.slice(1))
        node = node.param ??= newNode()
      } else {
        const key = segment.toLowerCase()
        let next = node.statics.get(key)
        if (!next) node.statics.set(key, (next = newNode()))
        node = next
      }
    }
    node.leaves ??= new Map()
    if (node.leaves.has(method)) throw new Error(`${method} ${path}: a route of this shape is registered already (${node.leaves.get(method)!.pattern})`)
    node.leaves.set(method, { value, pattern: path === '/' ? this.prefix || '/' : this.prefix + path, paramNames })
  }

  /** the route for `method` (HEAD finds GET routes) and the request path `path`, with its decoded parameters */
  find(method: string, path: string): RouteMatch<T> | undefined {
    const span = this.span(path)
    if (!span) return undefined
    const values: string[] = []
    const leaf = findLeaf(this.root, path, span[0], span[1], method === 'HEAD' ? 'GET' : method, values)
    if (!leaf) return undefined
    const params: Record<string, string> = {}
    for (let i = 0; i < values.length; i++) params[leaf.paramNames[i]] = decodeSegment(values[i])
    return { value: leaf.value, pattern: leaf.pattern, params }
  }

  /** every method some route takes for this path (HEAD beside GET), in registration order: the `Allow` list */
  allowed(path: string): string[] {
    const span = this.span(path)
    const methods = new Set<string>()
    if (span) collectMethods(this.root, path, span[0], span[1], methods)
    return [...methods]
  }

  /** where the routes' part of `path` starts and ends (one trailing slash dropped); undefined outside the prefix */
  private span(path: string): [number, number] | undefined {
    const p = this.prefix.length
    if (p > 0 && !path.startsWith(this.prefix) && path.slice(0, p).toLowerCase() !== this.prefixLower) return undefined
    if (path.length > p && path.charCodeAt(p) !== SLASH) return undefined // `/api/v1x`
    let end = path.length
    if (end > p && path.charCodeAt(end - 1) === SLASH) end--
    return [p, end]
  }
}

/** the segment after `pos` (which sits on a slash, or on `end`): [text, where the next one starts] */
function segmentAt(path: string, pos: number, end: number): [string, number] {
  let next = path.indexOf('/', pos + 1)
  if (next === -1 || next > end) next = end
  return [path.slice(pos + 1, next), next]
}

function staticChild<T>(node: Node<T>, segment: string): Node<T> | undefined {
  if (node.statics.size === 0) return undefined
  const exact = node.statics.get(segment)
  if (exact) return exact
  const lower = segment.toLowerCase()
  return lower === segment ? undefined : node.statics.get(lower)
}

/** depth first, static before parameter at each segment; `values` collects the parameters on the way */
function findLeaf<T>(node: Node<T>, path: string, pos: number, end: number, method: string, values: string[]): Leaf<T> | undefined {
  if (pos >= end) return node.leaves?.get(method)
  const [segment, next] = segmentAt(path, pos, end)
  const child = staticChild(node, segment)
  if (child) {
    const leaf = findLeaf(child, path, next, end, method, values)
    if (leaf) return leaf
  }
  if (node.param && segment !== '') {
    values.push(segment)
    const leaf = findLeaf(node.param, path, next, end, method, values)
    if (leaf) return leaf
    values.pop()
  }
  return undefined
}

function collectMethods<T>(node: Node<T>, path: string, pos: number, end: number, into: Set<string>): void {
  if (pos >= end) {
    for (const method of node.leaves?.keys() ?? []) {
      if (method === 'GET') into.add('HEAD')
      into.add(method)
    }
    return
  }
  const [segment, next] = segmentAt(path, pos, end)
  const child = staticChild(node, segment)
  if (child) collectMethods(child, path, next, end, into)
  if (node.param && segment !== '') collectMethods(node.param, path, next, end, into)
}

function decodeSegment(raw: string): string {
  if (!raw.includes('%')) return raw
  try {
    return decodeURIComponent(raw)
  } catch {
    return raw
  }
}
