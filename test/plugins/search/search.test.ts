import t from 'tap'
import { randomUUID } from 'node:crypto'
import { assertProblem, onEachDatabase, waitFor, waitForJobs, type TestServer } from '../../helpers/index.js'
import { createProject, grant, readerAndStranger } from '../projects/fixtures.js'
import { insertAssets, makeField, makeSet } from '../custom-metadata/fixtures.js'

async function asset(s: TestServer, projectId: number, path: string, metadata: Record<string, unknown> = {}, type = 'video'): Promise<number> {
  const now = new Date()
  const name = path.split('/').pop()!
  const [row] = await s.runtime.db
    .knex('assets')
    .insert({ uuid: randomUUID(), project_id: projectId, path, folder: path.includes('/') ? path.slice(0, path.lastIndexOf('/')) : '', name, type, analysis_state: 'done', proxy_state: 'none', metadata: JSON.stringify(metadata), proxies: '[]', created_at: now, updated_at: now })
    .returning('id')
  return Number((row as any)?.id ?? row)
}

const names = (r: { body: any }, key = 'assets') => (r.body[key] ?? []).map((x: any) => x.name).sort()

onEachDatabase(t, 'search: results by relevance (name over custom value over property over description), ties newest first, keyset over equal ranks', async (t, s) => {
  const set = await makeSet(s, { name: 'Production', applies_to: 'both' })
  await makeField(s, { name: 'client', type: 'text', custom_metadata_set_id: set.id })
  const project = await createProject(s, s.user, { name: 'Ranking' })
  // made in the opposite order of their relevance, so newest-first alone would get it backwards
  const inProperty = await asset(s, project.id, 'a/one.mov', { reel_name: 'zephyr' })
  const inValue = await asset(s, project.id, 'a/two.mov')
  t.equal((await s.request('PUT', `/assets/${inValue}/update_metadata`, { token: s.user.token, json: { custom_metadata: { client: 'Zephyr Films' } } })).status, 200)
  const inName = await asset(s, project.id, 'a/zephyr.mov')
  const find = (query: Record<string, string>) => s.request('GET', '/search', { token: s.user.token, query })
  const ranked = await find({ term: 'zephyr' })
  t.equal(ranked.status, 200, ranked.text)
  t.same(
    ranked.body.assets.map((a: any) => a.id),
    [inName, inValue, inProperty],
    'name, then custom value, then technical property',
  )
  t.ok(ranked.body.assets[0].rank >= ranked.body.assets[1].rank && ranked.body.assets[1].rank >= ranked.body.assets[2].rank && ranked.body.assets[2].rank > 0, 'ranks shown')

  // twelve documents of the same words' counts: one rank, so the keyset runs on the id within it
  const same: number[] = []
  for (let i = 0; i < 12; i++) same.push(await asset(s, project.id, `b${i}/quokka.mov`))
  const all = (await find({ term: 'quokka', per_page: '50' })).body.assets
  t.equal(all.length, 12)
  const walked: number[] = []
  let after: string | undefined
  for (let i = 0; i < 20; i++) {
    const page = await find({ term: 'quokka', per_page: '5', ...(after ? { after } : {}) })
    t.equal(page.status, 200, page.text)
    walked.push(...page.body.assets.map((a: any) => a.id))
    after = page.headers.get('x-next-after') ?? undefined
    if (!after) break
  }
  t.same(walked, all.map((a: any) => a.id), 'pages of five walk the twelve once, in the one-page order')
  t.same([...walked].sort((a, b) => a - b), same)
})

onEachDatabase(t, 'search: prefixes, phrases, exclusions, field:value, filters, access in SQL, keyset paging, an index that follows changes', async (t, s) => {
  const set = await makeSet(s, { name: 'Production', applies_to: 'both' })
  await makeField(s, { name: 'client', type: 'text', custom_metadata_set_id: set.id })
  const alpha = await createProject(s, s.user, { name: 'Alpha Documentary', description: 'Wildlife on the savanna' })
  const beta = await createProject(s, s.admin, { name: 'Beta Commercial' })
  const { reader, stranger } = await readerAndStranger(s, alpha.id)
  const interview = await asset(s, alpha.id, 'day1/cam a/interview_01.mov', { video_codec: 'prores', reel_name: 'A001', pixel_format: 'yuv422p10le' })
  const chase = await asset(s, alpha.id, 'day1/red car chase.mov', { video_codec: 'h264' })
  await asset(s, alpha.id, 'day2/car red.mov')
  const draft = await asset(s, alpha.id, 'day2/interview draft.wav', {}, 'audio')
  const secret = await asset(s, beta.id, 'interview_secret.mov', { reel_name: 'A002' })
  t.equal((await s.request('PUT', `/assets/${chase}/update_metadata`, { token: s.user.token, json: { custom_metadata: { client: 'ACME Corp' } } })).status, 200)
  t.equal((await s.request('PUT', `/projects/${alpha.id}/update_metadata`, { token: s.user.token, json: { custom_metadata: { client: 'Globex' } } })).status, 200)

  const find = (term: string, token = s.admin.token, query: Record<string, string> = {}) => s.request('GET', '/search', { token, query: { term, ...query } })

  const prefix = await find('inter')
  t.equal(prefix.status, 200, prefix.text)
  t.same(Object.keys(prefix.body).sort(), ['assets', 'projects'])
  t.same(names(prefix), ['interview draft.wav', 'interview_01.mov', 'interview_secret.mov'], 'prefix matching over names')
  t.match(prefix.body.assets.find((a: any) => a.id === interview), { project_id: alpha.id, project_name: 'Alpha Documentary', folder: 'day1/cam a', matched: [{ field: 'name', snippet: 'interview_01.mov' }] })
  t.same(names(await find('"red car"')), ['red car chase.mov'], 'a phrase keeps its word order')
  t.same(names(await find('car')), ['car red.mov', 'red car chase.mov'])
  t.same(names(await find('interview -draft')), ['interview_01.mov', 'interview_secret.mov'], 'exclusion')
  t.same(names(await find('cam')), ['interview_01.mov'], 'folder names are words of the path')
  t.same(names(await find('prores')), ['interview_01.mov'], 'whitelisted technical properties')
  t.same(names(await find('yuv422p10le')), [], 'other properties are not indexed')
  const byClient = await find('client:acme')
  t.same(names(byClient), ['red car chase.mov'])
  t.match(byClient.body.assets[0].matched, [{ field: 'custom:client', snippet: 'ACME Corp' }])
  t.same(names(byClient, 'projects'), [], 'field filters apply to projects too (Globex is no match)')
  t.same(names(await find('client:globex'), 'projects'), ['Alpha Documentary'])
  t.same(names(await find('reel_name:a00')), ['interview_01.mov', 'interview_secret.mov'], 'a whitelisted property as field:value')
  t.same(names(await find('savanna'), 'projects'), ['Alpha Documentary'], 'project descriptions')
  t.same(names(await find('acme')), ['red car chase.mov'], 'custom values are words too')

  // filters
  t.same(names(await find('interview', s.admin.token, { type: 'audio' })), ['interview draft.wav'])
  t.same(names(await find('interview', s.admin.token, { project_id: String(beta.id) })), ['interview_secret.mov'])
  t.same(names(await find('car', s.admin.token, { folder: 'day1' })), ['red car chase.mov'])
  t.same(names(await find('inter', s.admin.token, { created_after: '2000-01-01', created_before: '2000-01-02' })), [])

  // access: the filter is in the statement, so a page of one still finds the readable row below unreadable ones
  t.same(names(await find('inter', reader.token)), ['interview draft.wav', 'interview_01.mov'])
  const newer = await asset(s, beta.id, 'interview_newest.mov')
  const one = await find('interview', reader.token, { per_page: '1' })
  t.same(names(one), ['interview draft.wav'], 'the newest readable row, not an empty page')
  t.same(names(await find('inter', stranger.token)), [])
  t.same(names(await find('alpha', stranger.token), 'projects'), [])
  assertProblem(t, await s.request('GET', '/search', { query: { term: 'x' } }), 401)

  // keyset paging walks every match once, in the order of one long page: rank, then newest first
  const whole = (await find('inter', s.admin.token, { per_page: '50' })).body.assets
  t.same(whole.map((a: any) => a.id).sort(), [interview, draft, secret, newer].sort())
  for (let i = 1; i < whole.length; i++) t.ok(whole[i - 1].rank >= whole[i].rank, 'by rank (shown to four significant digits)')
  const seen: number[] = []
  let after: string | undefined
  for (let i = 0; i < 10; i++) {
    const page = await find('inter', s.admin.token, { per_page: '1', ...(after ? { after } : {}) })
    seen.push(...page.body.assets.map((a: any) => a.id))
    after = page.headers.get('x-next-after') ?? undefined
    if (!after) break
  }
  t.same(seen, whole.map((a: any) => a.id), 'each once, as one long page orders them')
  const second = await find('inter', s.admin.token, { per_page: '2', page: '2' })
  t.same(second.body.assets.map((a: any) => a.id), whole.slice(2).map((a: any) => a.id), 'offset pages agree')
  const stale = Buffer.from(JSON.stringify({ a: 5 })).toString('base64url')
  assertProblem(t, await find('inter', s.admin.token, { after: stale }), 422, ['after'])

  // bad input: 422, never 500
  for (const [query, params] of [
    [{ term: 'x'.repeat(501) }, ['term']],
    [{ term: '"unbalanced' }, ['term']],
    [{ term: 'nosuchfield:x' }, ['term']],
    [{ term: 'pixel_format:yuv' }, ['term']],
    [{ term: '-only' }, ['term']],
    [{ term: 'a', type: 'hologram' }, ['type']],
    [{ term: 'a', created_after: 'last week' }, ['created_after']],
    [{ term: 'a', after: 'garbage' }, ['after']],
    [{ term: 'a', project_id: 'x' }, ['project_id']],
    [{}, ['term']],
  ] as Array<[Record<string, string>, string[]]>)
    assertProblem(t, await s.request('GET', '/search', { token: s.user.token, query }), 422, params)
  t.equal((await find('"' + 'x'.repeat(10) + '" a* (b) ^c OR NOT d:* \'e\' f&g|h!')).status, 422, 'operator characters are words, never syntax (d: is a field)')
  t.equal((await find('a* (b) ^c OR NOT \'e\' f&g|h! <-> "NEAR"')).status, 200, 'FTS and tsquery operators are taken as words')

  // the index follows changes in the same transaction
  await s.runtime.db.knex('assets').where({ id: chase }).update({ name: 'pursuit.mov', path: 'day1/pursuit.mov' })
  t.same(names(await find('pursuit')), ['pursuit.mov'])
  t.same(names(await find('chase')), [])
  await s.request('PUT', `/assets/${chase}/update_metadata`, { token: s.user.token, json: { custom_metadata: { client: 'Initech' } } })
  t.same(names(await find('client:acme')), [])
  t.same(names(await find('initech')), ['pursuit.mov'])
  const fieldId = (await s.runtime.db.knex('custom_metadata_fields').where({ name: 'client' }).first('id')).id
  t.equal((await s.request('PUT', `/custom_metadata_fields/${fieldId}`, { token: s.admin.token, json: { name: 'customer' } })).status, 200)
  t.same(names(await find('customer:init')), ['pursuit.mov'], 'a renamed field is found by its new name')
  assertProblem(t, await find('client:initech'), 422, ['term'])
  await s.runtime.db.knex('projects').where({ id: beta.id }).update({ name: 'Gamma Spot' })
  t.same(names(await find('gamma'), 'projects'), ['Gamma Spot'])
  await s.runtime.db.knex('assets').where({ id: secret }).delete()
  t.same(names(await find('secret')), [])
  // a project in the trash drops out
  t.equal((await s.request('DELETE', `/projects/${beta.id}`, { token: s.admin.token })).status, 200)
  t.same(names(await find('interview')), ['interview draft.wav', 'interview_01.mov'])
})

onEachDatabase(
  t,
  'search: GET /settings/metadata_properties flags the whitelisted properties searchable; PUT /settings changes the list and the index follows',
  async (t, s) => {
    const project = await createProject(s, s.user, { name: 'Whitelist' })
    await asset(s, project.id, 'a/grade.mov', { pixel_format: 'yuv422p10le', video_codec: 'prores' })
    const flags = async () => {
      const r = await s.request('GET', '/settings/metadata_properties', { token: s.user.token })
      t.equal(r.status, 200, r.text)
      return Object.fromEntries(r.body.metadata_properties.map((p: any) => [p.name, p.searchable]))
    }
    const before = await flags()
    t.equal(before.video_codec, true, 'a default property is searchable')
    t.equal(before.pixel_format, false, 'another is not')
    t.equal(Object.values(before).filter((v) => v === true).length, 9, 'the nine defaults, each property flagged')
    assertProblem(t, await s.request('GET', '/search', { token: s.user.token, query: { term: 'pixel_format:yuv' } }), 422, ['term'])

    assertProblem(t, await s.request('PUT', '/settings', { token: s.user.token, json: { settings: { search: { properties: ['pixel_format'] } } } }), 403)
    const put = await s.request('PUT', '/settings', { token: s.admin.token, json: { settings: { search: { properties: ['pixel_format', 'reel_name'] } } } })
    t.equal(put.status, 200, put.text)
    const after = await flags()
    t.same(
      Object.keys(after).filter((k) => after[k]),
      ['pixel_format', 'reel_name'],
      'the route shows the list in force',
    )
    // the change queues search.reindex (after the setting is in force): wait until it found the document
    const byPixels = () => s.request('GET', '/search', { token: s.user.token, query: { term: 'pixel_format:yuv422' } })
    await waitFor('the reindex', async () => names(await byPixels()).length > 0)
    await waitForJobs(s, { types: ['search.reindex'] })
    t.same(names(await byPixels()), ['grade.mov'], 'the reindex put the newly whitelisted property in the documents')
    t.same(names(await s.request('GET', '/search', { token: s.user.token, query: { term: 'prores' } })), [], 'a property taken off the list is no longer a word of the document')
  },
  { runJobs: true },
)

onEachDatabase(
  t,
  'search: more matches than rankWindow are ranked window by window, newest first; the keyset walks them once across windows, inserts and deletes',
  async (t, s) => {
    const project = await createProject(s, s.user, { name: 'Windows' })
    // eight matches, oldest first: names (the highest rank) on the odd ones, a technical property on the even ones
    const ids: number[] = []
    for (let i = 1; i <= 8; i++) ids.push(await asset(s, project.id, i % 2 ? `w/okapi-${i}.mov` : `w/clip-${i}.mov`, i % 2 ? {} : { reel_name: `okapi ${i}` }))
    const find = (query: Record<string, string>) => s.request('GET', '/search', { token: s.user.token, query: { term: 'okapi', ...query } })
    const one = await find({ per_page: '50' })
    t.equal(one.status, 200, one.text)
    const order: number[] = one.body.assets.map((a: any) => a.id)
    // windows of three, newest first: [8 7 6] [5 4 3] [2 1], each by rank (names before properties), ties newest first
    const [a1, a2, a3, a4, a5, a6, a7, a8] = ids
    const pg = s.runtime.db.dialect === 'postgresql'
    if (pg) t.same(order, [a7, a8, a6, a5, a3, a4, a1, a2], 'ranked within windows of the three newest matches')
    else t.same(order, [a7, a5, a3, a1, a8, a6, a4, a2], 'SQLite: one window, every match by rank')
    const offsets = await find({ per_page: '3', page: '2' })
    t.same(offsets.body.assets.map((a: any) => a.id), order.slice(3, 6), 'offset pages agree with the one page')

    // pages of two: each window's rest and the next window's start fill one page
    const walk = async (between?: (page: number) => Promise<void>) => {
      const seen: number[] = []
      let after: string | undefined
      for (let page = 0; page < 20; page++) {
        const r = await find({ per_page: '2', ...(after ? { after } : {}) })
        t.equal(r.status, 200, r.text)
        seen.push(...r.body.assets.map((a: any) => a.id))
        after = r.headers.get('x-next-after') ?? undefined
        if (!after) break
        await between?.(page)
      }
      return seen
    }
    t.same(await walk(), order, 'the cursor walks every window once, in the one-page order')
    for (const after of [
      Buffer.from(JSON.stringify({ a: [1, 5] })).toString('base64url'),
      Buffer.from(JSON.stringify({ a: [1, 5, 3, 4] })).toString('base64url'),
      Buffer.from(JSON.stringify({ a: [1, 5, null, -1] })).toString('base64url'),
    ])
      assertProblem(t, await find({ after }), 422, ['after'])
    // rows added or removed while paging move no window: no row twice, none skipped of those that stay.
    // PostgreSQL only: SQLite's bm25 weighs a word by the whole index, so any insert changes every rank
    if (!pg) return
    let added = 0
    const walked = await walk(async (page) => {
      if (page === 0) added = await asset(s, project.id, 'w/okapi-new.mov')
      if (page === 1) await s.runtime.db.knex('assets').where({ id: a3 }).delete()
    })
    t.equal(new Set(walked).size, walked.length, 'no row twice')
    t.same(walked.filter((id) => id !== added), order.filter((id) => id !== a3), 'every remaining row once, in order')
  },
  { config: { plugins: { search: { rankWindow: 3 } } } },
)

onEachDatabase(
  t,
  'search: a bulk update above 1,000 assets marks their documents dirty in its transaction (PostgreSQL); the sweeper rebuilds them after commit',
  async (t, s) => {
    const set = await makeSet(s, { name: 'Shots', applies_to: 'asset' })
    await makeField(s, { name: 'reel', type: 'text', custom_metadata_set_id: set.id })
    const project = await createProject(s, s.user, { name: 'Bulk search' })
    const ids = await insertAssets(s, project.id, 1200)
    const knex = s.runtime.db.knex
    const find = async (term: string) => {
      const r = await s.request('GET', '/search', { token: s.user.token, query: { term, per_page: '200', project_id: String(project.id) } })
      if (r.status !== 200) t.fail(r.text)
      return r.body.assets.length
    }
    const metadata = s.runtime.container.resolve<any>('custom-metadata.service')
    const bulk = async (value: string) => knex.transaction(async (trx) => metadata.bulkApply(trx, s.user.id, ids, await metadata.resolve(trx, { type: 'asset', id: 0 }, { reel: value })))
    const pg = s.runtime.db.dialect === 'postgresql'
    if (pg) {
      // the sweeper stopped: what a crash right after a commit would leave is visible
      const sweeper = s.runtime.container.resolve<any>('search.sweeper')
      await sweeper.stop()
      await bulk('Alpha')
      t.equal(Number((await knex('search_dirty').count({ n: '*' }))[0].n), 1200, 'the 1,200 documents are marked in the transaction of the values')
      t.equal(await find('reel:alpha'), 0, 'not yet in the index')
      await sweeper.sweepNow()
      t.equal(await find('reel:alpha'), 200, 'swept')
      await bulk('Bravo')
      t.equal(await find('reel:alpha'), 200, 'meanwhile search answers from the documents as they were')
      t.equal(await find('reel:bravo'), 0)
      await sweeper.sweepNow()
      t.equal(Number((await knex('search_dirty').count({ n: '*' }))[0].n), 0, 'swept')
      // a small bulk update (at most 1,000 assets) is in the index when it commits
      await knex.transaction(async (trx) => metadata.bulkApply(trx, s.user.id, ids.slice(0, 3), await metadata.resolve(trx, { type: 'asset', id: 0 }, { reel: 'Charlie' })))
      t.equal(Number((await knex('search_dirty').count({ n: '*' }))[0].n), 0, 'no marks for 3 assets')
      t.equal(await find('reel:charlie'), 3)
      t.equal(await find('reel:bravo'), 200)
      t.equal(await find('reel:alpha'), 0)
    } else {
      // SQLite keeps refreshing each document in the statement
      await bulk('Alpha')
      t.equal(await find('reel:alpha'), 200)
    }
  },
)

onEachDatabase(t, 'search: field:value is the start of the field\'s value on both databases (PostgreSQL: one lexeme per value in `fields`; SQLite: the field texts), kept with the value and the field name', async (t, s) => {
  const set = await makeSet(s, { name: 'Production', applies_to: 'both' })
  await makeField(s, { name: 'client', type: 'text', custom_metadata_set_id: set.id })
  const project = await createProject(s, s.user, { name: 'Lexemes' })
  const acme = await asset(s, project.id, 'x/chase.mov', { reel_name: 'B017', clip_name: 'take two' })
  await asset(s, project.id, 'x/other.mov', { reel_name: 'B170' })
  t.equal((await s.request('PUT', `/assets/${acme}/update_metadata`, { token: s.user.token, json: { custom_metadata: { client: 'ACME Corp.' } } })).status, 200)
  const find = (term: string) => s.request('GET', '/search', { token: s.user.token, query: { term } })
  t.same(names(await find('client:"acme co"')), ['chase.mov'], 'words of the value in order, the last a prefix')
  t.same(names(await find('client:corp')), [], 'not a word inside the value')
  t.same(names(await find('client:"acme corp" chase')), ['chase.mov'], 'with a word')
  t.same(names(await find('reel_name:b01')), ['chase.mov'])
  t.same(names(await find('reel_name:b1')), ['other.mov'])
  t.same(names(await find('clip_name:"take tw" reel_name:b0')), ['chase.mov'], 'two filters')
  t.same(names(await find(`client:${'a'.repeat(100)} reel_name:${'b'.repeat(100)}`)), [], 'long filters')

  // the start of the value, nothing else, on both databases and both PostgreSQL paths (a narrow filter on its
  // lexeme's index; a broad one found by the phrase and rechecked on the lexeme: fieldLexemeRows 0 forces it)
  await makeField(s, { name: 'notes', type: 'text', custom_metadata_set_id: set.id })
  await makeField(s, { name: 'client acme', type: 'text', custom_metadata_set_id: set.id })
  const inside = await asset(s, project.id, 'y/inside.mov')
  const inNotes = await asset(s, project.id, 'y/notes.mov')
  const longer = await asset(s, project.id, 'y/longer.mov')
  const across = await asset(s, project.id, 'y/across.mov')
  const signs = await asset(s, project.id, 'y/signs.mov', { clip_name: 'Take=2 (alt)' })
  const set1 = async (id: number, custom_metadata: Record<string, string>) =>
    t.equal((await s.request('PUT', `/assets/${id}/update_metadata`, { token: s.user.token, json: { custom_metadata } })).status, 200)
  await set1(inside, { client: 'Big Client Acme' })
  await set1(inNotes, { notes: 'client acme called' })
  await set1(longer, { 'client acme': 'Corp' })
  await set1(across, { client: 'Zed', notes: 'acme' })
  await set1(signs, { client: '  «Acme»—Holdings = Ltd' })
  // a field whose name has no word: a broad filter on it keeps the phrase for its candidates
  await makeField(s, { name: '_', type: 'text', custom_metadata_set_id: set.id })
  await set1(across, { _: 'Acme' })
  const service = s.runtime.container.resolve<any>('search.service')
  // the broad path's candidates: the field's words as exact lexemes (tsqueryFieldCandidates), seen in the statements' bindings
  const bindings: unknown[] = []
  const spy = (q: { sql: string; bindings?: unknown[] }) => void (/search_documents/.test(q.sql) && bindings.push(...(q.bindings ?? [])))
  s.runtime.db.knex.on('query', spy)
  // PostgreSQL: each filter path with the word index and with each document tested (fewDocuments: this
  // database's kinds are all small, so 0 is the word index)
  for (const [broad, few] of [[false, 0], [false, 1000], [true, 0], [true, 1000]] as const) {
    if ((broad || few) && s.db !== 'postgresql') break
    if (s.db === 'postgresql') [service.fieldLexemeRows, service.fewDocuments] = [broad ? 0 : 50_000, few]
    const path = `${broad ? ' (broad path)' : ''}${few ? ' (each document tested)' : ''}`
    bindings.length = 0
    t.same(names(await find('client:"acme holdings lt" signs')), ['signs.mov'], `with a word${path}`)
    // the word `signs` as its one lexeme for the word index (prefixLexemes), as a prefix where each document is tested
    const candidates = `${few ? "'signs':*" : "('signs')"} & 'client' & 'acme' & 'holdings'`
    if (s.db === 'postgresql') t.equal(bindings.includes(candidates), broad, `the field's words but the last as candidates${path}`)
    t.same(names(await find('_:acme')), ['across.mov'], `a field without words${path}`)
    t.same(names(await find('client:acme')), ['chase.mov', 'signs.mov'], `not inside a value, another field's value, a longer field's name or across values${path}`)
    t.same(names(await find('client:"acme holdings lt"')), ['signs.mov'], `signs between the words${path}`)
    t.same(names(await find('client:big')), ['inside.mov'], path)
    t.same(names(await find('client:"big client acme"')), ['inside.mov'], path)
    t.same(names(await find('"client acme"')), ['chase.mov', 'inside.mov', 'longer.mov', 'notes.mov', 'signs.mov'], `a phrase is still anywhere${path}`)
    t.same(names(await find('clip_name:"take 2 al"')), ['signs.mov'], path)
    t.same(names(await find('clip_name:take')), ['chase.mov', 'signs.mov'], path)
    t.same(names(await find('clip_name:take inside')), [], `with a word${path}`)
    t.same(names(await find('notes:acme')), ['across.mov'], path)
  }
  s.runtime.db.knex.off('query', spy)
  if (s.db === 'postgresql') [service.fieldLexemeRows, service.fewDocuments] = [50_000, 1000]
  if (s.db !== 'postgresql') return
  const fields = async (id: number) => String((await s.runtime.db.knex('search_documents').where({ kind: 'asset', object_id: id }).first('fields')).fields)
  t.equal(await fields(acme), "'B:client=acme corp' 'C:clip name=take two' 'C:reel name=b017'", 'a custom value and the indexed properties, as words')
  const fieldId = (await s.runtime.db.knex('custom_metadata_fields').where({ name: 'client' }).first('id')).id
  t.equal((await s.request('PUT', `/custom_metadata_fields/${fieldId}`, { token: s.admin.token, json: { name: 'Customer_Name' } })).status, 200)
  t.equal(await fields(acme), "'B:customer name=acme corp' 'C:clip name=take two' 'C:reel name=b017'", 'a renamed field')
  t.same(names(await find('customer_name:acme')), ['chase.mov', 'signs.mov'])
  t.equal((await s.request('PUT', `/assets/${acme}/update_metadata`, { token: s.user.token, json: { custom_metadata: { Customer_Name: '' } } })).status, 200)
  t.notMatch(await fields(acme), /B:/, 'a cleared value leaves')
})

onEachDatabase(t, 'search: a word prefix finds every word it starts (PostgreSQL: as the lexicon\'s exact lexemes), a word written a moment ago too, and a renamed one no more', async (t, s) => {
  const project = await createProject(s, s.user, { name: 'Lexicon' })
  // PostgreSQL: through the word index (fewDocuments 0: this database's kinds are small, each document would be
  // tested), whatever the planner guesses of a table never analyzed (frequentShare: no word is frequent)
  const service = s.runtime.container.resolve<any>('search.service')
  if (s.db === 'postgresql') [service.fewDocuments, service.frequentShare] = [0, Infinity]
  const bindings: unknown[] = []
  const spy = (q: { sql: string; bindings?: unknown[] }) => void (/search_documents/.test(q.sql) && bindings.push(...(q.bindings ?? [])))
  s.runtime.db.knex.on('query', spy)
  const find = async (term: string, lexemes?: string) => {
    bindings.length = 0
    const r = await s.request('GET', '/search', { token: s.user.token, query: { term, per_page: '200' } })
    t.equal(r.status, 200, r.text)
    if (lexemes && s.db === 'postgresql') t.ok(bindings.includes(lexemes), `${term}: searched as ${lexemes}`)
    return names(r)
  }
  await asset(s, project.id, 'z/zebra_1.mov')
  const fish = await asset(s, project.id, 'z/zebrafish.mov')
  t.same(await find('zebr', "('zebra' | 'zebrafish')"), ['zebra_1.mov', 'zebrafish.mov'], 'both words the prefix starts')
  await asset(s, project.id, 'z/zebroid.mov')
  t.same(await find('zebr', "('zebra' | 'zebrafish' | 'zebroid')"), ['zebra_1.mov', 'zebrafish.mov', 'zebroid.mov'], 'a word written a moment ago')
  await s.runtime.db.knex('assets').where('id', fish).update({ name: 'horse.mov', path: 'z/horse.mov' })
  t.same(await find('zebr'), ['zebra_1.mov', 'zebroid.mov'], 'a renamed document no more (its word stays in the lexicon, matching nothing)')
  t.same(await find('zebr 1'), ['zebra_1.mov'], 'beside another word')
  t.same(await find('"zebra 1" zebr'), ['zebra_1.mov'], 'beside a phrase')
  t.same(await find('zebr -zebroid'), ['zebra_1.mov'], 'with an exclusion')
  if (s.db === 'postgresql') {
    // a word two transactions added at once is in the lexicon twice: searched once
    await s.runtime.db.knex('search_lexemes').insert({ lexeme: 'zebra' })
    t.same(await find('zebr', "('zebra' | 'zebrafish' | 'zebroid')"), ['zebra_1.mov', 'zebroid.mov'], 'a lexeme there twice')
  }
  // more lexemes than PREFIX_LEXEMES (64): the prefix itself
  for (let i = 0; i < 65; i++) await asset(s, project.id, `y/yak${i}x.mov`)
  t.equal((await find('yak')).length, 65, 'a prefix of many words')
  t.notOk(bindings.some((b) => String(b).includes("'yak0x'")), 'stays a prefix')
  t.same(await find('quagga'), [], 'a prefix of no word')
  s.runtime.db.knex.off('query', spy)
  if (s.db === 'postgresql') [service.fewDocuments, service.frequentShare] = [1000, 0.05]
})

onEachDatabase(
  t,
  'search: a reader\'s frequent word walks the readable documents first (PostgreSQL readableWalk): the same rows and order as the one statement, window by window',
  async (t, s) => {
    const [a, b, c] = [await createProject(s, s.user, { name: 'Walk A' }), await createProject(s, s.admin, { name: 'Walk B' }), await createProject(s, s.admin, { name: 'Walk C' })]
    const { reader } = await readerAndStranger(s, c.id)
    await grant(s, a.id, reader, { read: true })
    // interleaved over the three projects, oldest first: the word in names, in properties, or missing, some excluded
    for (let i = 1; i <= 24; i++) {
      const project = [a, b, c][i % 3]
      const name = i % 4 === 0 ? `w/plain-${i}.mov` : i % 5 === 0 ? `w/okapi-draft-${i}.mov` : `w/okapi-${i}.mov`
      await asset(s, project.id, name, i % 2 ? { reel_name: `okapi ${i}` } : {}, i % 3 ? 'video' : 'audio')
    }
    const service = s.runtime.container.resolve<any>('search.service')
    const walkAll = async (query: Record<string, string>) => {
      const seen: number[] = []
      let after: string | undefined
      for (let page = 0; page < 30; page++) {
        const r = await s.request('GET', '/search', { token: reader.token, query: { per_page: '2', ...query, ...(after ? { after } : {}) } })
        if (r.status !== 200) t.fail(r.text)
        seen.push(...r.body.assets.map((x: any) => x.id))
        after = r.headers.get('x-next-after') ?? undefined
        if (!after) break
      }
      return seen
    }
    const readable = new Set((await s.runtime.db.knex('assets').whereIn('project_id', [a.id, c.id]).select('id')).map((r: any) => Number(r.id)))
    // the walks' statements, counted (PostgreSQL takes them when forced; SQLite has one plan)
    let lateral = 0
    let merged = 0
    const spy = (q: { sql: string }) => void (/CROSS JOIN LATERAL/.test(q.sql) ? lateral++ : /search_documents.* UNION ALL /s.test(q.sql) && merged++)
    s.runtime.db.knex.on('query', spy)
    const queries: Array<Record<string, string>> = [{ term: 'okapi' }, { term: 'okapi -draft' }, { term: 'oka', type: 'video' }]
    for (const query of queries) {
      service.frequentShare = Infinity
      const plain = await walkAll(query)
      t.equal(lateral + merged, 0, 'the one statement')
      // PostgreSQL: the window opened through the word index, not by testing each document of this small database (fewDocuments)
      service.fewDocuments = 0
      t.same(await walkAll(query), plain, `${query.term}: the same rows in the same order through the word index`)
      service.fewDocuments = 1000
      service.frequentShare = 0
      service.readableShare = 1
      service.walkDocuments = 0
      // two readable projects: each walked and merged (mergedProjects), then the one walk of their documents
      const walked = await walkAll(query)
      t.equal(merged > 0 && lateral === 0, s.db === 'postgresql', 'the projects walked one by one, merged (PostgreSQL)')
      service.mergedProjects = 0
      const probed = await walkAll(query)
      service.mergedProjects = 32
      t.equal(lateral > 0, s.db === 'postgresql', 'the readable walk (PostgreSQL)')
      lateral = merged = 0
      t.same(probed, plain, `${query.term}: the same rows in the same order through the walk of every readable document`)
      service.frequentShare = 0.05
      service.readableShare = 0.15
      service.walkDocuments = 100_000
      t.ok(plain.length > 3, `${query.term}: more than a window`)
      t.same(walked, plain, `${query.term}: the same rows in the same order`)
      t.ok(plain.every((id) => readable.has(id)), `${query.term}: readable rows only`)
    }
    s.runtime.db.knex.off('query', spy)
  },
  { config: { plugins: { search: { rankWindow: 3 } } } },
)

onEachDatabase(
  t,
  'search: the newest id buckets first (PostgreSQL firstTier, tags of migration 0009): the same rows and order as the one statement, window by window, and the ids below when the buckets held too few',
  async (t, s) => {
    const [a, b] = [await createProject(s, s.user, { name: 'Buckets A' }), await createProject(s, s.admin, { name: 'Buckets B' })]
    const { reader } = await readerAndStranger(s, b.id)
    // explicit ids in buckets of 65,536 (0, 2, 4 and 5): two matches in the newest bucket, fewer than a window (3)
    const at = async (id: number, project: number, name: string) => {
      const now = new Date()
      await s.runtime.db.knex('assets').insert({ id, uuid: randomUUID(), project_id: project, path: `t/${name}`, folder: 't', name, type: 'video', analysis_state: 'done', proxy_state: 'none', metadata: '{}', proxies: '[]', created_at: now, updated_at: now })
      return id
    }
    const bucket = (n: number, i: number) => n * 65_536 + 10 + i
    const made: number[] = []
    for (const [n, count] of [[0, 3], [2, 3], [4, 2], [5, 2]] as const)
      for (let i = 0; i < count; i++) made.push(await at(bucket(n, i), i % 2 ? b.id : a.id, `okapi-${n}-${i}.mov`), await at(bucket(n, i + 100), a.id, `plain-${n}-${i}.mov`))
    const service = s.runtime.container.resolve<any>('search.service')
    // PostgreSQL: the word index (fewDocuments 0), no term frequent in this small database
    if (s.db === 'postgresql') [service.fewDocuments, service.frequentShare] = [0, Infinity]
    let tiered = 0
    const spy = (q: { sql: string }) => void (/with "newest"/.test(q.sql) && tiered++)
    s.runtime.db.knex.on('query', spy)
    const walkAll = async (token: string, term: string) => {
      const seen: number[] = []
      let after: string | undefined
      for (let page = 0; page < 30; page++) {
        const r = await s.request('GET', '/search', { token, query: { term, per_page: '2', ...(after ? { after } : {}) } })
        if (r.status !== 200) t.fail(r.text)
        seen.push(...r.body.assets.map((x: any) => x.id))
        after = r.headers.get('x-next-after') ?? undefined
        if (!after) break
      }
      return seen
    }
    for (const [who, token] of [['administrator', s.admin.token], ['reader', reader.token]] as const) {
      service.tierWindows = 0
      const plain = await walkAll(token, 'okapi')
      t.equal(tiered, 0, `${who}: the one statement`)
      // the smallest share: the first tier is the newest bucket alone, so each window needs the ids below it too
      service.tierWindows = 1e-9
      t.same(await walkAll(token, 'okapi'), plain, `${who}: the same rows in the same order, the newest bucket first`)
      t.equal(tiered > 0, s.db === 'postgresql', `${who}: the buckets' statement (PostgreSQL)`)
      service.tierWindows = 2
      tiered = 0
      const expected = (await s.runtime.db.knex('assets').where('name', 'like', 'okapi%').whereIn('project_id', who === 'reader' ? [b.id] : [a.id, b.id]).select('id')).map((r: any) => Number(r.id))
      t.same([...plain].sort((x, y) => x - y), expected.sort((x, y) => x - y), `${who}: every match once (readable ones for the reader)`)
    }
    s.runtime.db.knex.off('query', spy)
    if (s.db !== 'postgresql') return
    service.fewDocuments = 1000
    service.frequentShare = 0.05
    // the tags: the id's bucket and the project, which follows the asset when it moves
    const tags = async (id: number) => String((await s.runtime.db.knex('search_documents').where({ kind: 'asset', object_id: id }).first('tsv')).tsv).match(/'~[bp]\d+'/g)
    const moved = made[made.length - 1]
    t.same(await tags(moved), ["'~b5'", `'~p${a.id}'`].sort(), 'an asset: its bucket and project')
    await s.runtime.db.knex('assets').where('id', moved).update({ project_id: b.id })
    t.same(await tags(moved), ["'~b5'", `'~p${b.id}'`].sort(), 'moved: the new project')
    t.same(String((await s.runtime.db.knex('search_documents').where({ kind: 'project', object_id: b.id }).first('tsv')).tsv).match(/'~[bp]\d+'/g), ["'~b0'", `'~p${b.id}'`].sort(), 'a project: its own')
  },
  { config: { plugins: { search: { rankWindow: 3 } } } },
)
