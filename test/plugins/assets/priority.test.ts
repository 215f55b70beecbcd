import t from 'tap'
import { onEachDatabase, waitForJobs } from '../../../core/testing/index.js'
import { projectWithFiles } from './fixtures.js'

/**
 * encoding_priority: asset jobs are queued with their project's priority, queued work follows a
 * change of it (single and bulk), and the runner takes higher priorities first. The job runner
 * starts only after the priorities are set, so the order is the queue's, not a race.
 */

const files = (prefix: string) => Object.fromEntries(Array.from({ length: 6 }, (_, i) => [`${prefix}-${i}.txt`, `${prefix} ${i}`]))

onEachDatabase(
  t,
  'encoding_priority: queued analysis follows the project, higher priorities run first',
  async (t, s) => {
    const knex = s.runtime.db.knex
    const early = await projectWithFiles(s, 'Early, normal', files('early'))
    const late = await projectWithFiles(s, 'Late, urgent', files('late'))
    const priorities = async (projectId: number) => (await knex('jobs').where({ project_id: projectId, type: 'assets.analyse' }).select('priority')).map((r) => Number(r.priority))
    t.same(await priorities(late.p.id), [0, 0, 0, 0, 0, 0], 'queued with the project priority (0)')

    const bulk = await s.request('POST', '/projects/encoding_priority', { token: s.user.token, json: { project_ids: [late.p.id], encoding_priority: 9 } })
    t.equal(bulk.status, 200)
    t.same(await priorities(late.p.id), [9, 9, 9, 9, 9, 9], 'bulk change: the queued jobs follow')
    t.same(await priorities(early.p.id), [0, 0, 0, 0, 0, 0], 'other projects keep theirs')
    const single = await s.request('PUT', `/projects/${early.p.id}`, { token: s.user.token, json: { encoding_priority: -3 } })
    t.equal(single.status, 200)
    t.same(await priorities(early.p.id), [-3, -3, -3, -3, -3, -3], 'PUT /projects/:id: the queued jobs follow')
    const refused = await s.request('PUT', `/projects/${early.p.id}`, { token: s.user.token, json: { encoding_priority: 500 } })
    t.equal(refused.status, 422)
    t.same(await priorities(early.p.id), [-3, -3, -3, -3, -3, -3], 'bad input changes nothing')

    s.runtime.runner.start()
    await waitForJobs(s, { types: ['assets.analyse'] })
    const started = async (projectId: number) => (await knex('jobs').where({ project_id: projectId, type: 'assets.analyse' }).select('started_at', 'state')).map((r) => ({ state: r.state, at: new Date(r.started_at).getTime() }))
    const urgent = await started(late.p.id)
    const normal = await started(early.p.id)
    t.ok([...urgent, ...normal].every((j) => j.state === 'finished'), 'all finished')
    t.ok(Math.max(...urgent.map((j) => j.at)) <= Math.min(...normal.map((j) => j.at)), 'every urgent job started before any normal one')
    const project = await s.request('GET', `/projects/${late.p.id}/assets`, { token: s.user.token })
    t.ok(project.body.assets.every((a: any) => a.analysis_state === 'ready'), 'and did its work')
  },
  { runJobs: false },
)
