import t from 'tap'
import { assertProblem, onEachDatabase } from '../../../core/testing/index.js'
import type { EditService } from '../../../plugins/edits/index.js'
import { createEdit } from './fixtures.js'

const editRow = (s: any, id: number) => s.runtime.db.knex('edits').where({ id }).first()

onEachDatabase(t, 'register, list, show, update and delete edits', async (t, s) => {
  const admin = s.admin.token

  // create: JSON nested under edit
  const created = await s.request('POST', '/edits', { token: admin, json: { edit: { name: 'EDIT-01', password: 'S3cret smb pass', comment: 'Suite 1' } } })
  t.equal(created.status, 201)
  t.match(created.body, { edit: { id: Number, name: 'EDIT-01', comment: 'Suite 1', created_at: /Z$/, updated_at: /Z$/ } })
  t.same(Object.keys(created.body.edit).sort(), ['comment', 'created_at', 'id', 'name', 'updated_at'], 'no password in the answer')
  const id = created.body.edit.id

  // the password is sealed at rest and opens only with the server key, for this edit
  const stored = await editRow(s, id)
  t.notOk(JSON.stringify(stored).includes('S3cret smb pass'), 'the clear password is nowhere in the row')
  t.match(stored.password_sealed, /^v1:[A-Za-z0-9+/=]+$/)
  const edits = s.runtime.container.resolve<EditService>('edits')
  const entity = await s.em().findOneOrFail('Edit', id)
  t.equal(edits.smbPassword(entity as any), 'S3cret smb pass', 'the server can read it back')
  t.throws(() => edits.smbPassword({ ...(entity as any), name: 'EDIT-02' }), 'a sealed password copied to another edit does not open')

  // create: form with bracket names; same password, different ciphertext (random IV)
  const viaForm = await s.request('POST', '/edits', { token: admin, form: { 'edit[name]': 'EDIT-02', 'edit[password]': 'S3cret smb pass' } })
  t.equal(viaForm.status, 201)
  t.match(viaForm.body.edit, { name: 'EDIT-02', comment: null })
  t.not((await editRow(s, viaForm.body.edit.id)).password_sealed, stored.password_sealed)

  // list and show: any signed-in user
  const list = await s.request('GET', '/edits', { token: s.user.token })
  t.equal(list.status, 200)
  t.same(list.body.edits.map((e: any) => e.name), ['EDIT-01', 'EDIT-02'])
  t.equal(list.headers.get('x-total-count'), '2')
  t.notOk(JSON.stringify(list.body).includes('password'), 'no password field in the list')
  const page = await s.request('GET', '/edits', { token: s.user.token, query: { page: '2', per_page: '1' } })
  t.same(page.body.edits.map((e: any) => e.name), ['EDIT-02'])
  t.match((await s.request('GET', `/edits/${id}.json`, { token: s.user.token })).body, { edit: { id, name: 'EDIT-01' } })

  // update: comment only; the same name may be sent back
  const updated = await s.request('PUT', `/edits/${id}`, { token: admin, json: { edit: { name: 'EDIT-01', comment: 'Suite 1, grading' } } })
  t.equal(updated.status, 200)
  t.equal(updated.body.edit.comment, 'Suite 1, grading')
  t.equal((await editRow(s, id)).comment, 'Suite 1, grading')
  t.equal((await s.request('PUT', `/edits/${id}`, { token: admin, form: { 'edit[comment]': '' } })).body.edit.comment, null, 'an empty form value clears the comment')

  // name and password cannot change: 422, nothing changed
  const before = await editRow(s, id)
  assertProblem(t, await s.request('PUT', `/edits/${id}`, { token: admin, json: { edit: { name: 'EDIT-99' } } }), 422, ['edit[name]'])
  assertProblem(t, await s.request('PUT', `/edits/${id}`, { token: admin, form: { 'edit[password]': 'new', 'edit[comment]': 'x' } }), 422, ['edit[password]'])
  assertProblem(t, await s.request('PUT', `/edits/${id}`, { token: admin, json: { name: 'EDIT-99', password: 'new' } }), 422, ['name', 'password'])
  t.same(await editRow(s, id), before, 'row unchanged')

  // bad input on create
  assertProblem(t, await s.request('POST', '/edits', { token: admin, json: { edit: { comment: 'x' } } }), 422, ['edit[name]', 'edit[password]'])
  assertProblem(t, await s.request('POST', '/edits', { token: admin, json: { edit: { name: '../etc', password: 'x' } } }), 422, ['edit[name]'])
  assertProblem(t, await s.request('POST', '/edits', { token: admin, json: { edit: { name: 'OK', password: 'x', admin: true } } }), 422, ['edit[admin]'])
  assertProblem(t, await s.request('POST', '/edits', { token: admin, json: { edit: { name: 'EDIT-01', password: 'x' } } }), 409)
  t.equal((await s.request('GET', '/edits', { token: admin })).body.edits.length, 2, 'nothing created by refused requests')

  // 401, 403, 404
  assertProblem(t, await s.request('GET', '/edits'), 401)
  assertProblem(t, await s.request('GET', `/edits/${id}`), 401)
  assertProblem(t, await s.request('POST', '/edits', { json: { edit: { name: 'X', password: 'x' } } }), 401)
  assertProblem(t, await s.request('POST', '/edits', { token: s.user.token, json: { edit: { name: 'X', password: 'x' } } }), 403)
  assertProblem(t, await s.request('PUT', `/edits/${id}`, { token: s.user.token, json: { edit: { comment: 'x' } } }), 403)
  assertProblem(t, await s.request('DELETE', `/edits/${id}`, { token: s.user.token }), 403)
  assertProblem(t, await s.request('PUT', `/edits/${id}/unlock`, { token: s.user.token }), 403)
  assertProblem(t, await s.request('GET', '/edits/9999', { token: admin }), 404)
  assertProblem(t, await s.request('PUT', '/edits/9999', { token: admin, json: { edit: { comment: 'x' } } }), 404)
  assertProblem(t, await s.request('DELETE', '/edits/9999', { token: admin }), 404)
  assertProblem(t, await s.request('PUT', '/edits/9999/unlock', { token: admin }), 404)

  // delete
  const deleted = await s.request('DELETE', `/edits/${viaForm.body.edit.id}`, { token: admin })
  t.equal(deleted.status, 200)
  t.equal(deleted.body.edit.name, 'EDIT-02')
  t.notOk(await editRow(s, viaForm.body.edit.id), 'row gone')
  assertProblem(t, await s.request('GET', `/edits/${viaForm.body.edit.id}`, { token: admin }), 404)
})

onEachDatabase(t, 'edit status and clear need an edit', async (t, s) => {
  const edit = await createEdit(s, 'EDIT-01')

  const status = await s.request('GET', '/edit/status', { token: s.user.token, headers: { 'X-APP-EDIT': 'EDIT-01' } })
  t.equal(status.status, 200)
  t.same(status.body, { hash: { edit: { ...status.body.hash.edit, id: edit.id, name: 'EDIT-01' }, projects_open: [], projects_mounted: [], jobs: [] } })
  t.equal((await s.request('GET', '/edit/status', { token: s.user.token, query: { edit: String(edit.id) } })).body.hash.edit.name, 'EDIT-01', 'the edit parameter takes an id')

  const neither = await s.request('GET', '/edit/status', { token: s.user.token })
  assertProblem(t, neither, 400, ['X-APP-EDIT', 'edit'])
  assertProblem(t, await s.request('PUT', '/edit/clear', { token: s.user.token }), 400, ['X-APP-EDIT', 'edit'])
  assertProblem(t, await s.request('GET', '/edit/status', { token: s.user.token, headers: { 'X-APP-EDIT': 'NOPE' } }), 422, ['X-APP-EDIT'])
  // a long header is named, not echoed back whole
  const long = await s.request('GET', '/edit/status', { token: s.user.token, headers: { 'X-APP-EDIT': 'E'.repeat(5000) } })
  assertProblem(t, long, 422, ['X-APP-EDIT'])
  t.ok(long.text.length < 1500, `a short problem body (${long.text.length} bytes)`)
  t.match(long.body.errors[0].message, /^"E{100}…" \(5000 characters\) is not a registered edit$/)
  assertProblem(t, await s.request('PUT', '/edit/clear', { token: s.user.token, json: { edit: 'NOPE' } }), 422, ['edit'])
  assertProblem(t, await s.request('GET', '/edit/status', { headers: { 'X-APP-EDIT': 'EDIT-01' } }), 401)
  assertProblem(t, await s.request('PUT', '/edit/clear', { headers: { 'X-APP-EDIT': 'EDIT-01' } }), 401)
})
