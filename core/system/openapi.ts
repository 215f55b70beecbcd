import type { TSchema } from 'typebox'
import type { PluginDefinition, RouteDefinition } from '../plugin/contract.js'
import { ERRORS } from '../errors.js'
import { SERVER_VERSION, API_RELEASE } from '../version.js'

type Json = Record<string, any>

const PROBLEM_STATUSES: Record<number, string> = Object.fromEntries(Object.values(ERRORS).map((e) => [e.status, e.title]))

/**
 * The OpenAPI 3.1 description of the API, generated from the route table: every route with its
 * access (`x-mamkit-access`, security, 401/403), path and query parameters and request bodies from
 * its TypeBox schemas (JSON Schema 2020-12, as OpenAPI 3.1 takes it), the success body where the
 * route declares one (`response`), and the problem responses (RFC 9457) it can answer.
 * Paths are relative to the server URL `/api/v1`.
 */
export function openApiDocument(routes: readonly RouteDefinition[], plugins: readonly PluginDefinition[]): Json {
  const paths: Json = {}
  for (const route of routes) {
    const path = route.path.replace(/:([A-Za-z_$][A-Za-z0-9_$]*)/g, '{$1}')
    paths[path] ??= {}
    paths[path][route.method.toLowerCase()] = operation(route)
  }
  const used = new Set(routes.map((r) => r.plugin))
  return {
    openapi: '3.1.0',
    info: {
      title: 'mamkit API',
      version: SERVER_VERSION,
      description: `Media asset management REST API (release ${API_RELEASE} of the interface). Every JSON answer is an object with one root key; errors are RFC 9457 problem details.`,
    },
    servers: [{ url: '/api/v1' }],
    tags: plugins.filter((p) => used.has(p.name)).map((p) => ({ name: p.name, description: p.description ?? p.title ?? p.name })),
    paths,
    components: {
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'an API key: `Authorization: Bearer <key>`' },
        loginCookie: { type: 'apiKey', in: 'cookie', name: '_auth_token', description: 'the token of POST /session' },
        loginToken: { type: 'apiKey', in: 'query', name: 'auth_token', description: 'the token of POST /session (older clients)' },
      },
      schemas: {
        Problem: {
          type: 'object',
          required: ['type', 'title', 'status', 'detail', 'code', 'request_id'],
          properties: {
            type: { type: 'string' },
            title: { type: 'string' },
            status: { type: 'integer' },
            detail: { type: 'string' },
            code: { type: 'string', enum: Object.keys(ERRORS) },
            request_id: { type: 'string' },
            errors: {
              type: 'array',
              items: { type: 'object', required: ['param', 'message'], properties: { param: { type: 'string', examples: ['template[name]'] }, message: { type: 'string' } } },
            },
          },
        },
      },
    },
  }
}

function operation(route: RouteDefinition): Json {
  const pathNames = [...route.path.matchAll(/:([A-Za-z_$][A-Za-z0-9_$]*)/g)].map((m) => m[1])
  const paramProps: Json = (route.params as Json | undefined)?.properties ?? {}
  const parameters: Json[] = pathNames.map((name) => ({ name, in: 'path', required: true, schema: clean(paramProps[name] ?? { type: 'string' }) }))
  const input = route.input ? withoutProperties(route.input, pathNames) : undefined
  const op: Json = {
    operationId: `${route.method.toLowerCase()}${route.path.replace(/[^A-Za-z0-9]+/g, '_')}`.replace(/_$/, ''),
    tags: [route.plugin],
    summary: route.summary ?? `${route.method} ${route.path}`,
    'x-mamkit-access': route.access,
  }
  const hasBody = route.method !== 'GET' && route.method !== 'DELETE'
  if (input && !hasBody) {
    const props: Json = input.properties ?? {}
    const required = new Set<string>(input.required ?? [])
    for (const [name, schema] of Object.entries(props)) {
      const object = (schema as Json).type === 'object'
      parameters.push({ name, in: 'query', required: required.has(name), schema: clean(schema), ...(object ? { style: 'deepObject', explode: true } : {}) })
    }
  }
  if (parameters.length) op.parameters = parameters
  if (hasBody && (input || route.multipart)) {
    const content: Json = {}
    if (input) {
      content['application/json'] = { schema: clean(input) }
      content['application/x-www-form-urlencoded'] = { schema: clean(input) }
    }
    if (route.multipart) content['multipart/form-data'] = { schema: { type: 'object', properties: { ...(input?.properties ?? {}), file: { type: 'string', contentMediaType: 'application/octet-stream' } } } }
    op.requestBody = { required: Boolean(input?.required?.length) || Boolean(route.multipart), content }
  }
  if (route.access !== 'public') {
    op.security = [{ apiKey: [] }, { loginCookie: [] }, { loginToken: [] }]
    op.description = route.access === 'authenticated' ? 'Any signed-in user.' : route.access === 'admin' ? 'Administrators only.' : `Users whose role grants \`${route.access}\` (and administrators).`
  } else op.description = 'No sign-in needed.'
  const responses: Json = {
    '200': {
      description: 'Success: a JSON object with one root key',
      content: { 'application/json': { schema: route.response ? clean(route.response) : { type: 'object' } } },
    },
  }
  const problems = new Set<number>()
  if (route.access !== 'public') problems.add(401)
  if (route.access !== 'public' && route.access !== 'authenticated') problems.add(403)
  if (pathNames.length) problems.add(404)
  if (route.params || route.input) problems.add(422)
  if (route.multipart) problems.add(413).add(415)
  for (const status of problems) responses[String(status)] = problem(status)
  responses.default = { description: 'A problem (RFC 9457)', content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } } }
  op.responses = responses
  return op
}

function problem(status: number): Json {
  return { description: PROBLEM_STATUSES[status] ?? 'Problem', content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } } }
}

function withoutProperties(schema: TSchema, names: string[]): Json {
  const s = clean(schema)
  if (!names.length || !s.properties) return s
  const properties = Object.fromEntries(Object.entries(s.properties).filter(([k]) => !names.includes(k)))
  const required = (s.required ?? []).filter((k: string) => !names.includes(k))
  return { ...s, properties, ...(required.length ? { required } : { required: undefined }) }
}

/** a plain JSON copy: symbols and functions gone, `undefined` members dropped */
function clean(schema: unknown): Json {
  return JSON.parse(JSON.stringify(schema ?? {}))
}
