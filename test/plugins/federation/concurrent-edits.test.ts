import t from 'tap'
import { setTimeout as sleep } from 'node:timers/promises'
import { onEachDatabase, startTestServer } from '../../../core/testing/index.js'
import { converge, fedConfig as config, fedOf, joinPair } from './helpers.js'

/**
 * A user's edit of a replicated row while the site merges in the background (the gossip timer runs
 * beside requests). On PostgreSQL such an edit used to commit between the merge's capture and its
 * materialisation: the merge then remembered the edited row as its own, and the edit never reached
 * the other sites (a renamed flag showed its old name everywhere else; the seeded simulation caught
 * it). Now the edit waits for the merge's transaction and is replicated by the next exchange.
 */
onEachDatabase(
  t,
  'federation: an edit made while a merge runs waits for it and then replicates',
  async (t, a) => {
    const b = await startTestServer({ db: a.db, config })
    t.teardown(() => b.close())
    await joinPair(a, b)
    const made = await a.request('POST', '/status_flags', { token: a.admin.token, json: { status_flag: { name: 'Review', color: '#00ff00' } } })
    t.equal(made.status, 201)
    await converge([a, b])
    const flag = made.body.status_flag

    let renamed: { status: number } | undefined
    let finishedInside = false
    await fedOf(a).transaction(async (em, k) => {
      await fedOf(a).capture(em, k)
      void a.request('PUT', `/status_flags/${flag.id}`, { token: a.admin.token, json: { status_flag: { name: 'Approved' } } }).then((r) => (renamed = r))
      await sleep(300)
      finishedInside = renamed !== undefined
    })
    t.notOk(finishedInside, 'the rename did not commit inside the federation transaction')
    for (let i = 0; i < 100 && !renamed; i++) await sleep(20)
    t.equal(renamed?.status, 200, 'the rename went through once the transaction ended')

    await converge([a, b])
    const namesAt = async (s: typeof a) => ((await s.request('GET', '/status_flags', { token: s.admin.token })).body.array as { name: string }[]).map((f) => f.name).sort()
    t.same(await namesAt(a), ['Approved'])
    t.same(await namesAt(b), ['Approved'], 'the other site has the rename')
    const [row] = await a.runtime.db.knex('federation_crdt_state').where({ type: 'status_flag' }).select('state')
    t.match(row.state, /"Approved"/, 'the replicated record holds the new name')
  },
  { config },
)
