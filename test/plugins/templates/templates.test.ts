import t from 'tap'
import qs from 'qs'
import path from 'node:path'
import { mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { assertProblem, onEachDatabase, type Reply, type TestServer } from '../../../core/testing/index.js'
import { createApiKey, createUser } from '../../../core/auth/accounts.js'
import { TEMPLATE_TYPES } from '../../../plugins/templates/types.js'

type Tap = typeof t
type Flat = Record<string, string | string[]>
type Shape = 'form' | 'query' | 'json'

/** every request with parameters is sent three ways: form body, query string, JSON body with the same nesting */
const SHAPES: Shape[] = ['form', 'query', 'json']
const FIELDS = ['created_at', 'directory', 'id', 'name', 'position', 'substitution_patterns', 'template_type', 'updated_at']
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{3})?Z$/

const encode = (flat: Flat) => {
  const params = new URLSearchParams()
  for (const [k, v] of Object.entries(flat)) for (const item of Array.isArray(v) ? v : [v]) params.append(k, item)
  return params.toString()
}

/** the same bracket-named parameters as a form body, as a query string, or nested as a JSON body */
function send(s: TestServer, shape: Shape, method: string, pathname: string, flat: Flat, as: string | null = s.admin.token): Promise<Reply> {
  const token = as ?? undefined
  const q = encode(flat)
  // fetch sends no body with GET: GET parameters always go in the query string
  if (shape === 'query' || method === 'GET') return s.request(method, q ? `${pathname}?${q}` : pathname, { token })
  if (shape === 'form') return s.request(method, pathname, { token, form: flat })
  return s.request(method, pathname, { token, json: qs.parse(q) })
}

/** a subtest typed like the top-level `t` the helpers take */
const sub = (t: Tap, name: string, fn: (t: Tap) => Promise<unknown>) => t.test(name, (st) => fn(st as unknown as Tap))

const templatesRoot = (s: TestServer) => path.join(s.dataDir, 'templates')
const exists = (p: string) => stat(p).then(() => true, () => false)

/** a folder tree as `{"sub/": "", "sub/file.txt": "content"}`; {} when the folder is missing */
async function tree(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {}
  const walk = async (d: string, rel: string) => {
    const entries = await readdir(d, { withFileTypes: true }).catch(() => [])
    for (const e of entries) {
      const r = rel ? `${rel}/${e.name}` : e.name
      if (e.isDirectory()) {
        out[`${r}/`] = ''
        await walk(path.join(d, e.name), r)
      } else out[r] = await readFile(path.join(d, e.name), 'utf8')
    }
  }
  await walk(dir, '')
  return out
}

/** fills a template folder with files and subfolders */
async function populate(dir: string, marker: string) {
  await mkdir(path.join(dir, 'Media', 'Audio'), { recursive: true })
  await mkdir(path.join(dir, 'Empty'), { recursive: true })
  await writeFile(path.join(dir, 'PROJECT.prproj'), `project file ${marker}`)
  await writeFile(path.join(dir, 'Media', 'readme.txt'), `media ${marker}`)
  await writeFile(path.join(dir, 'Media', 'Audio', 'PROJECT_mix.wav'), `audio ${marker}`)
}

/** what bad input must leave alone: the templates as the API lists them, and every folder and file below the templates root */
async function snapshot(s: TestServer) {
  const list = await s.request('GET', '/templates', { token: s.admin.token })
  return { templates: list.body.templates, disk: await tree(templatesRoot(s)) }
}

async function create(t: Tap, s: TestServer, name: string, extra: Record<string, unknown> = {}) {
  const reply = await s.request('POST', '/templates', { token: s.admin.token, json: { template: { name, template_type: 'generic' }, ...extra } })
  t.equal(reply.status, 201, `created "${name}"`)
  return reply.body.template
}

/** the full shape of a template in a response */
function assertTemplate(t: Tap, s: TestServer, tpl: any, expected: { name: string; template_type: string; substitution_patterns: Array<{ token: string; pattern: string }> }) {
  t.same(Object.keys(tpl ?? {}).sort(), FIELDS, 'template fields')
  t.ok(Number.isInteger(tpl.id) && tpl.id > 0, 'integer id')
  t.equal(tpl.name, expected.name, 'name')
  t.equal(tpl.template_type, expected.template_type, 'template_type')
  t.same(tpl.substitution_patterns, expected.substitution_patterns, 'substitution_patterns')
  t.ok(Number.isInteger(tpl.position) && tpl.position >= 0, 'integer position')
  t.match(tpl.created_at, ISO, 'created_at in ISO 8601 UTC')
  t.match(tpl.updated_at, ISO, 'updated_at in ISO 8601 UTC')
  t.ok(Date.parse(tpl.updated_at) >= Date.parse(tpl.created_at), 'updated_at not before created_at')
  t.equal(path.dirname(tpl.directory), templatesRoot(s), 'directory lies directly below <dataDir>/templates')
}

const single = (t: Tap, reply: Reply, key: string) => t.same(Object.keys(reply.body ?? {}), [key], `one root key "${key}"`)

const list = (reply: Reply) => reply.body.templates as any[]

/** bad create input: [what, parameters, offending parameters] */
const BASE: Flat = { 'template[name]': 'Valid name', 'template[template_type]': 'generic' }
const SP = 'substitution_patterns[substitution_pattern]'
const CREATE_ERRORS: Array<[string, Flat, string[]]> = [
  ['no parameters', {}, ['template[name]', 'template[template_type]']],
  ['no template[template_type]', { 'template[name]': 'X' }, ['template[template_type]']],
  ['no template[name]', { 'template[template_type]': 'generic' }, ['template[name]']],
  ['template[template_type] not a known type', { ...BASE, 'template[template_type]': 'avid' }, ['template[template_type]']],
  ['template[template_type] empty', { ...BASE, 'template[template_type]': '' }, ['template[template_type]']],
  ['template[name] empty', { ...BASE, 'template[name]': '' }, ['template[name]']],
  ['template[name] over 200 characters', { ...BASE, 'template[name]': 'n'.repeat(201) }, ['template[name]']],
  ['template[name] with a control character', { ...BASE, 'template[name]': 'a\tb' }, ['template[name]']],
  ['template not a hash', { template: 'x' }, ['template']],
  ['element without token', { ...BASE, [`${SP}[pattern]`]: '%n' }, [`${SP}[token]`]],
  ['element without pattern', { ...BASE, [`${SP}[token]`]: 'A' }, [`${SP}[pattern]`]],
  ['element with neither', { ...BASE, [`${SP}[colour]`]: 'red' }, [`${SP}[token]`, `${SP}[pattern]`, `${SP}[colour]`]],
  ['element with an empty token', { ...BASE, [`${SP}[token]`]: '', [`${SP}[pattern]`]: 'x' }, [`${SP}[token]`]],
  ['element not a hash', { ...BASE, [SP]: 'x' }, [SP]],
  ['unknown % sequence', { ...BASE, [`${SP}[token]`]: 'A', [`${SP}[pattern]`]: '%n-%x' }, [`${SP}[pattern]`]],
  ['trailing lone %', { ...BASE, [`${SP}[token]`]: 'A', [`${SP}[pattern]`]: '100%' }, [`${SP}[pattern]`]],
  [
    'indexed element without pattern',
    { ...BASE, 'substitution_patterns[0][token]': 'A', 'substitution_patterns[1][token]': 'B', 'substitution_patterns[1][pattern]': 'b' },
    ['substitution_patterns[0][pattern]'],
  ],
  [
    'indexed elements repeating a token',
    { ...BASE, 'substitution_patterns[0][token]': 'A', 'substitution_patterns[0][pattern]': 'a', 'substitution_patterns[1][token]': 'A', 'substitution_patterns[1][pattern]': 'b' },
    ['substitution_patterns[1][token]'],
  ],
  ['element inside template without pattern', { ...BASE, 'template[substitution_patterns][substitution_pattern][token]': 'A' }, ['template[substitution_patterns][substitution_pattern][pattern]']],
  ['substitution_patterns a string', { ...BASE, substitution_patterns: 'x' }, ['substitution_patterns']],
  ['unknown parameters', { ...BASE, colour: 'red', 'template[owner]': 'me' }, ['colour', 'template[owner]']],
]

const UPDATE_ERRORS: Array<[string, Flat, string[]]> = [
  ['template[template_type] not a known type', { 'template[template_type]': 'resolve' }, ['template[template_type]']],
  ['template[name] empty', { 'template[name]': '' }, ['template[name]']],
  ['template[name] over 200 characters', { 'template[name]': 'n'.repeat(201) }, ['template[name]']],
  ['template not a hash', { template: 'x' }, ['template']],
  ['element without token', { [`${SP}[pattern]`]: '%n' }, [`${SP}[token]`]],
  ['element without pattern', { [`${SP}[token]`]: 'A' }, [`${SP}[pattern]`]],
  ['unknown % sequence', { 'template[name]': 'Renamed', [`${SP}[token]`]: 'A', [`${SP}[pattern]`]: '%Y%k' }, [`${SP}[pattern]`]],
  ['trailing lone %', { [`${SP}[token]`]: 'A', [`${SP}[pattern]`]: '%n%' }, [`${SP}[pattern]`]],
  ['indexed element without token', { 'substitution_patterns[0][pattern]': 'x' }, ['substitution_patterns[0][token]']],
  ['unknown parameters', { 'template[name]': 'Renamed', name: 'x', 'template[folder]': '/etc' }, ['name', 'template[folder]']],
]

// ---------------------------------------------------------------------------------------------

onEachDatabase(t, 'GET /template_types', async (t, s) => {
  for (const [pathname, token] of [
    ['/template_types', s.admin.token],
    ['/template_types.json', s.user.token],
  ]) {
    const reply = await s.request('GET', pathname, { token })
    t.equal(reply.status, 200, pathname)
    single(t, reply, 'template_types')
    t.same(reply.body.template_types, TEMPLATE_TYPES, 'the known types')
  }
  const { body } = await s.request('GET', '/template_types', { token: s.user.token })
  t.same(
    body.template_types.map((x: any) => x.id),
    ['generic', 'avid_media_composer', 'premiere_pro', 'davinci_resolve', 'final_cut_pro'],
  )
  for (const type of body.template_types) {
    t.same(Object.keys(type).sort(), ['description', 'id', 'name', 'sets_up', 'substitute_in', 'text_files'], `fields of ${type.id}`)
    t.ok(type.substitute_in.every((x: string) => ['folder_names', 'file_names', 'text_files'].includes(x)), `substitute_in of ${type.id}`)
  }
  assertProblem(t, await s.request('GET', '/template_types'), 401)
  assertProblem(t, await s.request('GET', '/template_types.json', { token: 'mk_1_' + 'x'.repeat(43) }), 401)
})

onEachDatabase(t, 'authentication and privileges on every endpoint', async (t, s) => {
  const tpl = await create(t, s, 'Guarded', { substitution_patterns: [{ token: 'T', pattern: '%n' }] })
  await populate(tpl.directory, 'guarded')
  const before = await snapshot(s)
  const endpoints: Array<[string, string, Flat]> = [
    ['GET', '/templates', {}],
    ['GET', `/templates/${tpl.id}`, {}],
    ['GET', '/templates/999', {}],
    ['POST', '/templates', { 'template[name]': 'Sneaky', 'template[template_type]': 'generic' }],
    ['POST', `/templates/${tpl.id}/duplicate`, {}],
    ['POST', '/templates/999/duplicate', {}],
    ['PUT', `/templates/${tpl.id}`, { 'template[name]': 'Renamed' }],
    ['PUT', '/templates/999', { 'template[nonsense]': 'x' }],
    ['DELETE', `/templates/${tpl.id}`, { ignore_missing_directory: 'true' }],
    ['DELETE', '/templates/999', {}],
    ['GET', '/template_types', {}],
  ]
  for (const [method, pathname, params] of endpoints) {
    for (const shape of SHAPES) {
      const reply = await send(s, shape, method, pathname, params, null)
      sub(t, `${method} ${pathname} (${shape}) without credentials`, async (t) => assertProblem(t, reply, 401))
      const bad = await send(s, shape, method, pathname, params, 'mk_99_' + 'y'.repeat(43))
      sub(t, `${method} ${pathname} (${shape}) with a bad API key`, async (t) => assertProblem(t, bad, 401))
    }
  }

  // a plain user may read but not change: 403 comes before 404 and before parameter checks
  for (const [method, pathname, params] of endpoints.filter(([m]) => m !== 'GET')) {
    for (const shape of SHAPES) {
      const reply = await send(s, shape, method, pathname, params, s.user.token)
      assertProblem(t, reply, 403)
      t.match(reply.body.detail, 'templates.manage', `${method} ${pathname} (${shape}): the missing capability is named`)
    }
  }
  t.same(await snapshot(s), before, 'nothing changed by refused requests')

  // absolute server paths are for administrators: a plain user sees the folder's name below the templates folder
  const asUser = (x: any) => ({ ...x, directory: path.basename(x.directory) })
  const list = await s.request('GET', '/templates', { token: s.user.token })
  t.equal(list.status, 200, 'a plain user lists templates')
  t.same(list.body.templates, before.templates.map(asUser))
  t.notOk(list.text.includes(s.dataDir), 'no server path in the list')
  const one = await s.request('GET', `/templates/${tpl.id}`, { token: s.user.token })
  t.equal(one.status, 200, 'a plain user shows a template')
  t.same(one.body.template, asUser(tpl))
  t.equal(one.body.template.directory, 'Guarded')
})

onEachDatabase(t, 'the templates.manage capability lets a non-admin role manage templates', async (t, s) => {
  const role = await s.request('POST', '/roles', { token: s.admin.token, json: { role: { name: 'Template editors', role_matrix: { 'templates.manage': true } } } })
  t.equal(role.status, 201, 'role created')
  const em = s.em()
  const user = await createUser(em, { username: 'templater', password: 'a-long-password', roleId: role.body.role.id })
  const { secret } = await createApiKey(em, user, 'test')

  const created = await s.request('POST', '/templates', { token: secret, form: { 'template[name]': 'By capability', 'template[template_type]': 'generic' } })
  t.equal(created.status, 201, 'create')
  t.equal(created.body.template.name, 'By capability')
  const id = created.body.template.id
  const copy = await s.request('POST', `/templates/${id}/duplicate`, { token: secret })
  t.equal(copy.status, 201, 'duplicate')
  t.equal(copy.body.template.name, 'By capability copy')
  const updated = await s.request('PUT', `/templates/${id}`, { token: secret, form: { 'template[template_type]': 'final_cut_pro' } })
  t.equal(updated.status, 200, 'update')
  t.equal(updated.body.template.template_type, 'final_cut_pro')
  t.equal((await s.request('DELETE', `/templates/${id}`, { token: secret })).status, 200, 'delete')
  t.same(
    (await s.request('GET', '/templates', { token: secret })).body.templates.map((x: any) => x.name),
    ['By capability copy'],
  )
  assertProblem(t, await s.request('POST', '/roles', { token: secret, json: { role: { name: 'x', role_matrix: {} } } }), 403)
})

onEachDatabase(t, 'GET /templates and GET /templates/:id', async (t, s) => {
  const empty = await s.request('GET', '/templates', { token: s.admin.token })
  t.equal(empty.status, 200)
  t.same(empty.body, { templates: [] }, 'no templates at first')

  const a = await create(t, s, 'Alpha', { substitution_patterns: [{ token: 'CLIENT', pattern: '%n' }] })
  const b = await create(t, s, 'Beta')
  const c = await create(t, s, 'Gamma')
  t.same([a.position, b.position, c.position], [0, 1, 2], 'new templates go to the end')

  for (const pathname of ['/templates', '/templates.json']) {
    const list = await s.request('GET', pathname, { token: s.admin.token })
    t.equal(list.status, 200, pathname)
    single(t, list, 'templates')
    t.same(list.body.templates, [a, b, c], 'all templates, as created, in position order')
  }
  for (const tpl of list(await s.request('GET', '/templates', { token: s.admin.token }))) {
    assertTemplate(t, s, tpl, { name: tpl.name, template_type: 'generic', substitution_patterns: tpl.name === 'Alpha' ? [{ token: 'CLIENT', pattern: '%n' }] : [] })
  }

  for (const pathname of [`/templates/${b.id}`, `/templates/${b.id}.json`]) {
    const one = await s.request('GET', pathname, { token: s.admin.token })
    t.equal(one.status, 200, pathname)
    single(t, one, 'template')
    t.same(one.body.template, b)
  }

  // position orders the list
  const moved = await s.request('PUT', `/templates/${a.id}`, { token: s.admin.token, json: { template: { position: 5 } } })
  t.equal(moved.body.template.position, 5)
  t.same(list(await s.request('GET', '/templates', { token: s.admin.token })).map((x: any) => x.name), ['Beta', 'Gamma', 'Alpha'], 'ordered by position')

  for (const id of ['999', '2147483647']) {
    const reply = await s.request('GET', `/templates/${id}`, { token: s.admin.token })
    assertProblem(t, reply, 404)
    t.match(reply.body.detail, `template ${id} not found`)
    assertProblem(t, await s.request('GET', `/templates/${id}.json`, { token: s.user.token }), 404)
  }
  for (const id of ['abc', '0', '-1', '1.5', '2147483648']) assertProblem(t, await s.request('GET', `/templates/${id}`, { token: s.admin.token }), 422, ['id'])
})

onEachDatabase(t, 'POST /templates in every parameter shape', async (t, s) => {
  let position = 0
  for (const shape of SHAPES) {
    sub(t, `as ${shape}`, async (t) => {
      const name = `Feature ${shape}`
      const reply = await send(s, shape, 'POST', shape === 'json' ? '/templates.json' : '/templates', {
        'template[name]': name,
        'template[template_type]': 'premiere_pro',
        'substitution_patterns[substitution_pattern][token]': 'PROJECT',
        'substitution_patterns[substitution_pattern][pattern]': '%n_%Y-%m-%d 100%%',
      })
      t.equal(reply.status, 201, 'created')
      single(t, reply, 'template')
      const tpl = reply.body.template
      assertTemplate(t, s, tpl, { name, template_type: 'premiere_pro', substitution_patterns: [{ token: 'PROJECT', pattern: '%n_%Y-%m-%d 100%%' }] })
      t.equal(tpl.position, position++, 'placed after the others')
      t.equal(tpl.directory, path.join(templatesRoot(s), name), 'folder named after the template')
      t.ok((await stat(tpl.directory)).isDirectory(), 'folder exists')
      t.same(await tree(tpl.directory), {}, 'and is empty')
      t.same((await s.request('GET', `/templates/${tpl.id}`, { token: s.admin.token })).body.template, tpl, 'stored as answered')
    })
  }

  sub(t, 'substitution_patterns as a JSON list, also inside template', async (t) => {
    const patterns = [
      { token: 'CLIENT', pattern: '%u' },
      { token: 'DATE', pattern: '%Y%m%d' },
      { token: 'PCT', pattern: '%%' },
    ]
    const top = await s.request('POST', '/templates', { token: s.admin.token, json: { template: { name: 'List top', template_type: 'avid_media_composer' }, substitution_patterns: patterns } })
    t.equal(top.status, 201)
    t.same(top.body.template.substitution_patterns, patterns, 'all elements, in order')
    const nested = await s.request('POST', '/templates', { token: s.admin.token, json: { template: { name: 'List nested', template_type: 'davinci_resolve', substitution_patterns: patterns } } })
    t.equal(nested.status, 201)
    t.same(nested.body.template.substitution_patterns, patterns, 'template[substitution_patterns] works too')
    const wrapped = await s.request('POST', '/templates', {
      token: s.admin.token,
      json: { template: { name: 'List wrapped', template_type: 'generic' }, substitution_patterns: patterns.map((p) => ({ substitution_pattern: p })) },
    })
    t.equal(wrapped.status, 201)
    t.same(wrapped.body.template.substitution_patterns, patterns, 'a list of {substitution_pattern: {...}} elements')
  })

  for (const shape of ['form', 'query'] as const) {
    sub(t, `several substitution patterns as ${shape}`, async (t) => {
      const indexed = await send(s, shape, 'POST', '/templates', {
        'template[name]': `Indexed ${shape}`,
        'template[template_type]': 'generic',
        'substitution_patterns[0][token]': 'A',
        'substitution_patterns[0][pattern]': '%n',
        'substitution_patterns[1][token]': 'B',
        'substitution_patterns[1][pattern]': '%u',
      })
      t.equal(indexed.status, 201, 'indexed elements')
      t.same(indexed.body.template.substitution_patterns, [{ token: 'A', pattern: '%n' }, { token: 'B', pattern: '%u' }])
      // Rails-style clients repeat `[]` names for a list of hashes
      const repeated = await send(s, shape, 'POST', '/templates', {
        'template[name]': `Repeated ${shape}`,
        'template[template_type]': 'generic',
        'substitution_patterns[][substitution_pattern][token]': ['A', 'B', 'C'],
        'substitution_patterns[][substitution_pattern][pattern]': ['%n', '%u', 'x'],
      })
      t.equal(repeated.status, 201, 'repeated [] elements')
      t.same(repeated.body.template.substitution_patterns, [{ token: 'A', pattern: '%n' }, { token: 'B', pattern: '%u' }, { token: 'C', pattern: 'x' }])
      const plain = await send(s, shape, 'POST', '/templates', {
        'template[name]': `Plain list ${shape}`,
        'template[template_type]': 'generic',
        'substitution_patterns[][token]': ['A', 'B'],
        'substitution_patterns[][pattern]': ['a', 'b'],
      })
      t.equal(plain.status, 201, 'repeated [] elements without substitution_pattern')
      t.same(plain.body.template.substitution_patterns, [{ token: 'A', pattern: 'a' }, { token: 'B', pattern: 'b' }])
      const uneven = await send(s, shape, 'POST', '/templates', {
        'template[name]': `Uneven ${shape}`,
        'template[template_type]': 'generic',
        'substitution_patterns[][substitution_pattern][token]': ['A', 'B'],
        'substitution_patterns[][substitution_pattern][pattern]': 'a',
      })
      assertProblem(t, uneven, 422, ['substitution_patterns[1][substitution_pattern][pattern]'])
    })
  }

  sub(t, 'every template type is accepted; patterns default to none', async (t) => {
    for (const type of TEMPLATE_TYPES) {
      const reply = await s.request('POST', '/templates', { token: s.admin.token, form: { 'template[name]': `Type ${type.id}`, 'template[template_type]': type.id } })
      t.equal(reply.status, 201, type.id)
      t.equal(reply.body.template.template_type, type.id)
      t.same(reply.body.template.substitution_patterns, [], 'no patterns')
    }
  })

  sub(t, 'names that are not folder names', async (t) => {
    for (const [name, folder] of [
      ['../escape/attempt', '___escape_attempt'],
      ['..', '__'],
      ['a:b*c?', 'a_b_c_'],
      ['Ünïcødé 🎬', 'Ünïcødé 🎬'],
    ]) {
      const reply = await s.request('POST', '/templates', { token: s.admin.token, json: { template: { name, template_type: 'generic' } } })
      t.equal(reply.status, 201, JSON.stringify(name))
      t.equal(reply.body.template.name, name, 'name kept as given')
      t.equal(reply.body.template.directory, path.join(templatesRoot(s), folder), 'folder stays below the templates root')
      t.ok(await exists(reply.body.template.directory), 'folder exists')
    }
    t.notOk(await exists(path.join(s.dataDir, 'escape')), 'nothing written outside the templates root')
  })

  sub(t, 'a folder left on disk by someone else is not taken over', async (t) => {
    const stray = path.join(templatesRoot(s), 'Stray')
    await mkdir(stray, { recursive: true })
    await writeFile(path.join(stray, 'keep.txt'), 'not ours')
    const reply = await s.request('POST', '/templates', { token: s.admin.token, json: { template: { name: 'Stray', template_type: 'generic' } } })
    t.equal(reply.status, 201)
    t.equal(reply.body.template.directory, path.join(templatesRoot(s), 'Stray (2)'), 'next free folder name')
    t.same(await tree(stray), { 'keep.txt': 'not ours' }, 'the stray folder is untouched')
    t.same(await tree(reply.body.template.directory), {}, 'the new folder is empty')
  })
})

onEachDatabase(t, 'POST /templates rejects bad input and changes nothing', async (t, s) => {
  const existing = await create(t, s, 'Existing', { substitution_patterns: [{ token: 'T', pattern: '%n' }] })
  await populate(existing.directory, 'existing')
  const before = await snapshot(s)
  for (const shape of SHAPES) {
    for (const [what, params, offending] of CREATE_ERRORS) {
      const reply = await send(s, shape, 'POST', '/templates', params)
      sub(t, `${what} (${shape})`, async (t) => {
        assertProblem(t, reply, 422, offending)
        t.equal(reply.body.code, 'invalid_parameters')
        for (const param of offending) t.match(reply.body.detail, param, `detail names ${param}`)
      })
    }
  }
  const unknownSeq = await send(s, 'form', 'POST', '/templates', { ...BASE, [`${SP}[token]`]: 'A', [`${SP}[pattern]`]: '%n-%x' })
  t.match(unknownSeq.body.errors, [{ message: /unknown sequence %x/ }], 'the unknown sequence is named')

  sub(t, 'JSON-only type errors', async (t) => {
    const cases: Array<[unknown, string[]]> = [
      [{ template: null }, ['template[name]', 'template[template_type]']],
      [{ template: [] }, ['template']],
      [{ template: { name: 5, template_type: 'generic' } }, ['template[name]']],
      [{ template: { name: 'X', template_type: true } }, ['template[template_type]']],
      [{ template: { name: null, template_type: 'generic' } }, ['template[name]']],
      [{ template: { name: 'X', template_type: 'generic' }, substitution_patterns: [{ token: 1, pattern: 'x' }] }, ['substitution_patterns[0][token]']],
      [{ template: { name: 'X', template_type: 'generic' }, substitution_patterns: [{ token: 'A', pattern: null }] }, ['substitution_patterns[0][pattern]']],
      [{ template: { name: 'X', template_type: 'generic' }, substitution_patterns: [{ token: 'A' }] }, ['substitution_patterns[0][pattern]']],
      [{ template: { name: 'X', template_type: 'generic' }, substitution_patterns: [{ pattern: '%n' }] }, ['substitution_patterns[0][token]']],
      [{ template: { name: 'X', template_type: 'generic' }, substitution_patterns: [{ token: 'A', pattern: 'a' }, 'B'] }, ['substitution_patterns[1]']],
      [{ template: { name: 'X', template_type: 'generic' }, substitution_patterns: [{ token: 'A', pattern: '%Q' }] }, ['substitution_patterns[0][pattern]']],
      [{ template: { name: 'X', template_type: 'generic' }, substitution_patterns: [{ token: ['A', 'B'], pattern: ['a', 'b'] }] }, ['substitution_patterns[0][token]', 'substitution_patterns[0][pattern]']],
      [{ template: { name: 'X', template_type: 'generic' }, substitution_patterns: 7 }, ['substitution_patterns']],
      [{ template: { name: 'X', template_type: 'generic', position: -1 } }, ['template[position]']],
    ]
    for (const [json, offending] of cases) assertProblem(t, await s.request('POST', '/templates', { token: s.admin.token, json }), 422, offending)
  })

  sub(t, 'a taken name is a conflict', async (t) => {
    for (const shape of SHAPES) {
      const reply = await send(s, shape, 'POST', '/templates', { 'template[name]': 'Existing', 'template[template_type]': 'premiere_pro' })
      assertProblem(t, reply, 409, ['template[name]'])
      t.match(reply.body.detail, '"Existing"')
    }
  })
  t.same(await snapshot(s), before, 'no template and no folder added or changed by rejected requests')
})

onEachDatabase(t, 'PUT /templates/:id in every parameter shape', async (t, s) => {
  for (const shape of SHAPES) {
    sub(t, `as ${shape}`, async (t) => {
      const original = await create(t, s, `Old ${shape}`, { substitution_patterns: [{ token: 'KEEP', pattern: '%u' }] })
      await populate(original.directory, shape)
      const contents = await tree(original.directory)
      const other = await create(t, s, `Bystander ${shape}`)

      // rename, new type and new patterns at once
      const newName = `New ${shape}`
      const renamed = await send(s, shape, 'PUT', shape === 'json' ? `/templates/${original.id}.json` : `/templates/${original.id}`, {
        'template[name]': newName,
        'template[template_type]': 'avid_media_composer',
        [`${SP}[token]`]: 'CLIENT',
        [`${SP}[pattern]`]: '%n %%',
      })
      t.equal(renamed.status, 200)
      single(t, renamed, 'template')
      const tpl = renamed.body.template
      assertTemplate(t, s, tpl, { name: newName, template_type: 'avid_media_composer', substitution_patterns: [{ token: 'CLIENT', pattern: '%n %%' }] })
      t.equal(tpl.id, original.id, 'same id')
      t.equal(tpl.created_at, original.created_at, 'created_at unchanged')
      t.equal(tpl.position, original.position, 'position unchanged')
      t.equal(tpl.directory, path.join(templatesRoot(s), newName), 'folder follows the name')
      t.notOk(await exists(original.directory), 'old folder gone')
      t.same(await tree(tpl.directory), contents, 'files and subfolders moved along')
      t.same((await s.request('GET', `/templates/${tpl.id}`, { token: s.admin.token })).body.template, tpl, 'stored as answered')

      // every field is optional: only the type
      const typed = await send(s, shape, 'PUT', `/templates/${tpl.id}`, { 'template[template_type]': 'final_cut_pro' })
      t.equal(typed.status, 200)
      t.same(typed.body.template, { ...tpl, template_type: 'final_cut_pro', updated_at: typed.body.template.updated_at }, 'only the type changed')
      t.same(await tree(tpl.directory), contents, 'folder untouched')

      // only the patterns
      const patterned = await send(s, shape, 'PUT', `/templates/${tpl.id}`, { 'substitution_patterns[0][token]': 'X', 'substitution_patterns[0][pattern]': '%Y' })
      t.equal(patterned.status, 200)
      t.same(patterned.body.template.substitution_patterns, [{ token: 'X', pattern: '%Y' }], 'patterns replaced')
      t.equal(patterned.body.template.name, newName, 'name kept')
      t.equal(patterned.body.template.template_type, 'final_cut_pro', 'type kept')

      // nothing, or template empty/null: unchanged
      const current = patterned.body.template
      // (JSON sends null instead of an empty string; see below)
      for (const params of (shape === 'json' ? [{}] : [{}, { template: '' }]) as Flat[]) {
        const reply = await send(s, shape, 'PUT', `/templates/${tpl.id}`, params)
        t.equal(reply.status, 200, `PUT with ${JSON.stringify(params)}`)
        t.same(reply.body.template, current, 'unchanged')
      }

      // substitution_patterns empty: cleared
      const cleared = await send(s, shape, 'PUT', `/templates/${tpl.id}`, { substitution_patterns: '' })
      t.equal(cleared.status, 200)
      t.same(cleared.body.template.substitution_patterns, [], 'patterns cleared')

      // same name again: nothing moves
      const same = await send(s, shape, 'PUT', `/templates/${tpl.id}`, { 'template[name]': newName })
      t.equal(same.status, 200)
      t.equal(same.body.template.directory, tpl.directory)
      t.same(await tree(tpl.directory), contents, 'folder untouched')

      t.same((await s.request('GET', `/templates/${other.id}`, { token: s.admin.token })).body.template, other, 'other templates untouched')
    })
  }

  sub(t, 'template may be null in JSON; null patterns clear', async (t) => {
    const tpl = await create(t, s, 'Nullable', { substitution_patterns: [{ token: 'A', pattern: 'a' }] })
    const reply = await s.request('PUT', `/templates/${tpl.id}`, { token: s.admin.token, json: { template: null } })
    t.equal(reply.status, 200)
    t.same(reply.body.template, tpl, 'unchanged')
    const cleared = await s.request('PUT', `/templates/${tpl.id}`, { token: s.admin.token, json: { substitution_patterns: null } })
    t.same(cleared.body.template.substitution_patterns, [])
    const listed = await s.request('PUT', `/templates/${tpl.id}`, { token: s.admin.token, json: { substitution_patterns: [{ token: 'B', pattern: '%d' }, { token: 'C', pattern: '%H%M%S' }] } })
    t.same(listed.body.template.substitution_patterns, [{ token: 'B', pattern: '%d' }, { token: 'C', pattern: '%H%M%S' }])
  })

  sub(t, 'renaming onto a stray folder picks a free folder name', async (t) => {
    const tpl = await create(t, s, 'Mover')
    await writeFile(path.join(tpl.directory, 'f.txt'), 'mine')
    const stray = path.join(templatesRoot(s), 'Target')
    await mkdir(stray)
    await writeFile(path.join(stray, 'keep.txt'), 'not ours')
    const reply = await s.request('PUT', `/templates/${tpl.id}`, { token: s.admin.token, form: { 'template[name]': 'Target' } })
    t.equal(reply.status, 200)
    t.equal(reply.body.template.directory, path.join(templatesRoot(s), 'Target (2)'))
    t.same(await tree(reply.body.template.directory), { 'f.txt': 'mine' }, 'contents moved')
    t.same(await tree(stray), { 'keep.txt': 'not ours' }, 'stray folder untouched')
    t.notOk(await exists(tpl.directory), 'old folder gone')
  })

  sub(t, 'renaming a template whose folder is missing creates the new folder', async (t) => {
    const tpl = await create(t, s, 'Lost')
    await rm(tpl.directory, { recursive: true })
    const reply = await s.request('PUT', `/templates/${tpl.id}`, { token: s.admin.token, json: { template: { name: 'Found' } } })
    t.equal(reply.status, 200)
    t.ok(await exists(reply.body.template.directory), 'new folder exists')
  })
})

onEachDatabase(t, 'PUT /templates/:id rejects bad input and changes nothing', async (t, s) => {
  const tpl = await create(t, s, 'Target', { substitution_patterns: [{ token: 'T', pattern: '%n' }] })
  await populate(tpl.directory, 'target')
  const taken = await create(t, s, 'Taken')
  const before = await snapshot(s)
  for (const shape of SHAPES) {
    for (const [what, params, offending] of UPDATE_ERRORS) {
      const reply = await send(s, shape, 'PUT', `/templates/${tpl.id}`, params)
      sub(t, `${what} (${shape})`, async (t) => assertProblem(t, reply, 422, offending))
    }
    const conflict = await send(s, shape, 'PUT', `/templates/${tpl.id}`, { 'template[name]': 'Taken', 'template[template_type]': 'premiere_pro' })
    assertProblem(t, conflict, 409, ['template[name]'])
    // an unknown id is a 404 even when a substitution pattern is bad (type errors are answered
    // before the handler runs, so `template[template_type]=nope` stays a 422)
    for (const params of [{ 'template[name]': 'Whatever' }, { [`${SP}[token]`]: 'A', [`${SP}[pattern]`]: '%x' }, {}] as Flat[]) {
      const reply = await send(s, shape, 'PUT', '/templates/999', params)
      assertProblem(t, reply, 404)
    }
  }
  t.ok(taken.id, 'the taken template exists')
  t.same(await snapshot(s), before, 'nothing changed in the database or on disk')
})

onEachDatabase(t, 'POST /templates/:id/duplicate', async (t, s) => {
  const source = await create(t, s, 'Promo', { substitution_patterns: [{ token: 'PROJECT', pattern: '%n' }, { token: 'DATE', pattern: '%Y-%m-%d' }] })
  const changed = await s.request('PUT', `/templates/${source.id}`, { token: s.admin.token, json: { template: { template_type: 'premiere_pro' } } })
  const src = changed.body.template
  await populate(src.directory, 'promo')
  const contents = await tree(src.directory)
  t.equal(Object.keys(contents).length, 6, 'the source holds files and (empty) subfolders')

  const first = await s.request('POST', `/templates/${src.id}/duplicate`, { token: s.admin.token })
  t.equal(first.status, 201)
  single(t, first, 'template')
  const copy = first.body.template
  assertTemplate(t, s, copy, { name: 'Promo copy', template_type: 'premiere_pro', substitution_patterns: src.substitution_patterns })
  t.not(copy.id, src.id, 'a new id')
  t.equal(copy.directory, path.join(templatesRoot(s), 'Promo copy'))
  t.same(await tree(copy.directory), contents, 'the folder tree is copied with every file')
  t.same(await tree(src.directory), contents, 'the source folder is unchanged')
  t.same((await s.request('GET', `/templates/${src.id}`, { token: s.admin.token })).body.template, src, 'the source template is unchanged')
  t.same((await s.request('GET', `/templates/${copy.id}`, { token: s.admin.token })).body.template, copy, 'the copy is stored as answered')

  const second = await s.request('POST', `/templates/${src.id}/duplicate.json`, { token: s.admin.token })
  t.equal(second.status, 201, '.json suffix')
  t.equal(second.body.template.name, 'Promo copy 2', 'the second copy gets a number')
  t.same(await tree(second.body.template.directory), contents)
  const third = await s.request('POST', `/templates/${src.id}/duplicate`, { token: s.admin.token })
  t.equal(third.body.template.name, 'Promo copy 3')
  const copyOfCopy = await s.request('POST', `/templates/${copy.id}/duplicate`, { token: s.admin.token })
  t.equal(copyOfCopy.body.template.name, 'Promo copy copy', 'a copy of a copy')

  // copies are independent
  await writeFile(path.join(copy.directory, 'only-in-copy.txt'), 'x')
  await rm(path.join(copy.directory, 'Media'), { recursive: true })
  t.same(await tree(src.directory), contents, 'changing the copy leaves the source alone')

  // a freed name is used again
  t.equal((await s.request('DELETE', `/templates/${copy.id}`, { token: s.admin.token })).status, 200)
  const again = await s.request('POST', `/templates/${src.id}/duplicate`, { token: s.admin.token })
  t.equal(again.body.template.name, 'Promo copy', 'the first free name')
  t.same(await tree(again.body.template.directory), contents, 'a fresh copy of the source, not of the deleted copy')

  t.same(
    list(await s.request('GET', '/templates', { token: s.admin.token })).map((x: any) => x.name).sort(),
    ['Promo', 'Promo copy', 'Promo copy 2', 'Promo copy 3', 'Promo copy copy'],
  )

  sub(t, 'a stray folder with the copy name is not overwritten', async (t) => {
    const base = await create(t, s, 'Base')
    await writeFile(path.join(base.directory, 'base.txt'), 'base')
    const stray = path.join(templatesRoot(s), 'Base copy')
    await mkdir(stray)
    await writeFile(path.join(stray, 'keep.txt'), 'not ours')
    const reply = await s.request('POST', `/templates/${base.id}/duplicate`, { token: s.admin.token })
    t.equal(reply.status, 201)
    t.equal(reply.body.template.name, 'Base copy')
    t.equal(reply.body.template.directory, path.join(templatesRoot(s), 'Base copy (2)'))
    t.same(await tree(reply.body.template.directory), { 'base.txt': 'base' })
    t.same(await tree(stray), { 'keep.txt': 'not ours' }, 'stray folder untouched')
  })

  sub(t, 'a source without a folder gives a copy with an empty folder', async (t) => {
    const bare = await create(t, s, 'Bare')
    await rm(bare.directory, { recursive: true })
    const reply = await s.request('POST', `/templates/${bare.id}/duplicate`, { token: s.admin.token })
    t.equal(reply.status, 201)
    t.same(await tree(reply.body.template.directory), {}, 'empty folder')
    t.ok(await exists(reply.body.template.directory))
  })

  sub(t, 'the copy of a 200-character name still fits the name limit', async (t) => {
    const long = await create(t, s, 'é'.repeat(200))
    const names: string[] = []
    for (let i = 0; i < 2; i++) {
      const reply = await s.request('POST', `/templates/${long.id}/duplicate`, { token: s.admin.token })
      t.equal(reply.status, 201, `copy ${i + 1}`)
      names.push(reply.body.template.name)
    }
    t.same(names, ['é'.repeat(195) + ' copy', 'é'.repeat(193) + ' copy 2'])
    for (const name of names) t.equal([...name].length, 200, 'at most 200 characters')
    t.equal((await s.request('GET', '/templates', { token: s.admin.token })).status, 200)
  })

  sub(t, 'unknown ids', async (t) => {
    const before = await snapshot(s)
    for (const id of ['999', '2147483647']) assertProblem(t, await s.request('POST', `/templates/${id}/duplicate`, { token: s.admin.token }), 404)
    for (const id of ['x', '0']) assertProblem(t, await s.request('POST', `/templates/${id}/duplicate`, { token: s.admin.token }), 422, ['id'])
    t.same(await snapshot(s), before, 'nothing added')
  })
})

onEachDatabase(t, 'DELETE /templates/:id', async (t, s) => {
  for (const shape of SHAPES) {
    sub(t, `as ${shape}`, async (t) => {
      const keep = await create(t, s, `Keep ${shape}`)
      const tpl = await create(t, s, `Doomed ${shape}`)
      await populate(tpl.directory, shape)
      const reply = await send(s, shape, 'DELETE', shape === 'json' ? `/templates/${tpl.id}.json` : `/templates/${tpl.id}`, { ignore_missing_directory: 'false' })
      t.equal(reply.status, 200)
      single(t, reply, 'template')
      t.same(reply.body.template, tpl, 'answers the deleted template')
      t.notOk(await exists(tpl.directory), 'folder removed with its contents')
      assertProblem(t, await s.request('GET', `/templates/${tpl.id}`, { token: s.admin.token }), 404)
      t.notOk(list(await s.request('GET', '/templates', { token: s.admin.token })).some((x: any) => x.id === tpl.id), 'gone from the list')
      t.ok(await exists(keep.directory), 'other folders stay')
      assertProblem(t, await send(s, shape, 'DELETE', `/templates/${tpl.id}`, {}), 404, undefined)
    })
  }

  sub(t, 'without parameters (ignore_missing_directory defaults to false)', async (t) => {
    const tpl = await create(t, s, 'Plain delete')
    const reply = await s.request('DELETE', `/templates/${tpl.id}`, { token: s.admin.token })
    t.equal(reply.status, 200)
    t.notOk(await exists(tpl.directory))
  })

  sub(t, 'a missing folder is a conflict unless ignore_missing_directory=true', async (t) => {
    const tpl = await create(t, s, 'Folderless')
    await rm(tpl.directory, { recursive: true })
    const before = await snapshot(s)
    for (const shape of SHAPES) {
      for (const params of [{}, { ignore_missing_directory: 'false' }] as Flat[]) {
        const reply = await send(s, shape, 'DELETE', `/templates/${tpl.id}`, params)
        assertProblem(t, reply, 409, ['ignore_missing_directory'])
        t.match(reply.body.detail, 'ignore_missing_directory=true', 'the detail says how to proceed')
      }
    }
    const typedFalse = await s.request('DELETE', `/templates/${tpl.id}`, { token: s.admin.token, json: { ignore_missing_directory: false } })
    assertProblem(t, typedFalse, 409, ['ignore_missing_directory'])
    t.same(await snapshot(s), before, 'the template stays')

    // true as a string in every shape and as a JSON boolean
    const ways: Array<[string, (id: number) => Promise<Reply>]> = [
      ...SHAPES.map((shape) => [`"true" (${shape})`, (id: number) => send(s, shape, 'DELETE', `/templates/${id}`, { ignore_missing_directory: 'true' })] as [string, (id: number) => Promise<Reply>]),
      ['JSON true', (id: number) => s.request('DELETE', `/templates/${id}`, { token: s.admin.token, json: { ignore_missing_directory: true } })],
    ]
    for (const [what, del] of ways) {
      const victim = await create(t, s, `Missing ${what}`)
      await rm(victim.directory, { recursive: true })
      const reply = await del(victim.id)
      t.equal(reply.status, 200, what)
      t.equal(reply.body.template.id, victim.id)
      assertProblem(t, await s.request('GET', `/templates/${victim.id}`, { token: s.admin.token }), 404)
    }
    const reply = await send(s, 'form', 'DELETE', `/templates/${tpl.id}`, { ignore_missing_directory: 'true' })
    t.equal(reply.status, 200, 'the folderless template goes too')
    t.same(
      list(await s.request('GET', '/templates', { token: s.admin.token })).map((x: any) => x.name),
      ['Keep form', 'Keep query', 'Keep json'],
      'only the templates never deleted are left',
    )
  })

  sub(t, 'ignore_missing_directory=true with the folder present still removes it', async (t) => {
    const tpl = await create(t, s, 'Present')
    await populate(tpl.directory, 'present')
    const reply = await s.request('DELETE', `/templates/${tpl.id}`, { token: s.admin.token, query: { ignore_missing_directory: 'true' } })
    t.equal(reply.status, 200)
    t.notOk(await exists(tpl.directory))
  })

  sub(t, 'bad parameters and unknown ids change nothing', async (t) => {
    const tpl = await create(t, s, 'Survivor')
    await populate(tpl.directory, 'survivor')
    const before = await snapshot(s)
    for (const shape of SHAPES) {
      for (const value of ['yes', '1', '0', '', 'TRUE', 'null']) {
        assertProblem(t, await send(s, shape, 'DELETE', `/templates/${tpl.id}`, { ignore_missing_directory: value }), 422, ['ignore_missing_directory'])
      }
      assertProblem(t, await send(s, shape, 'DELETE', `/templates/${tpl.id}`, { force: 'true' }), 422, ['force'])
      assertProblem(t, await send(s, shape, 'DELETE', `/templates/${tpl.id}`, { 'template[name]': 'Survivor' }), 422, ['template'])
      assertProblem(t, await send(s, shape, 'DELETE', '/templates/999', {}), 404)
      assertProblem(t, await send(s, shape, 'DELETE', '/templates/999', { ignore_missing_directory: 'true' }), 404)
    }
    for (const json of [{ ignore_missing_directory: 1 }, { ignore_missing_directory: null }, { ignore_missing_directory: 'maybe' }, { ignore_missing_directory: [true] }])
      assertProblem(t, await s.request('DELETE', `/templates/${tpl.id}`, { token: s.admin.token, json }), 422, ['ignore_missing_directory'])
    for (const id of ['abc', '0']) assertProblem(t, await s.request('DELETE', `/templates/${id}`, { token: s.admin.token }), 422, ['id'])
    t.same(await snapshot(s), before, 'the template and its folder stay')
  })
})
