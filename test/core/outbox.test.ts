import t from 'tap'
import { Type } from 'typebox'
import { onEachDatabase } from '../../core/testing/index.js'
import { defineEvent } from '../../core/events.js'
import { definePlugin } from '../../core/plugin/contract.js'
import { coreServices } from '../../core/plugin/services.js'
import type { PublishedEvent } from '../../core/events.js'
import { builtinPlugins } from '../../plugins/index.js'
import { corePlugin } from '../../core/system/plugin.js'

const declared = defineEvent('outbox-fixture.happened', { subject: 'project', description: 'a test event', payload: Type.Object({ n: Type.Integer() }) })
const undeclared = defineEvent('outbox-fixture.undeclared', { subject: 'project', description: 'never declared', payload: Type.Object({}) })
const heard: PublishedEvent[][] = []
const fixture = definePlugin({
  name: 'outbox-fixture',
  version: '1.0.0',
  events: [declared],
  start({ resolve }) {
    resolve(coreServices.outbox).consume({ plugin: 'outbox-fixture', deliver: async (events) => void heard.push(events) })
  },
})

t.test('every built-in event is declared once, named <area>.<what-happened>, with a description and a subject', async (t) => {
  const events = [corePlugin, ...builtinPlugins].flatMap((p) => p.events ?? [])
  t.ok(events.length >= 5)
  t.equal(new Set(events.map((e) => e.name)).size, events.length)
  for (const e of events) {
    t.match(e.name, /^[a-z][a-z0-9-]*\.[a-z][a-z0-9-]*$/)
    t.ok(e.description.length > 5, `${e.name} has a description`)
    t.ok(e.subject, `${e.name} names its subject`)
  }
})

onEachDatabase(
  t,
  'the outbox: written with the change or not at all; undeclared events and bad payloads throw; fanned out once',
  async (t, s) => {
    const outbox = s.runtime.container.resolve(coreServices.outbox.id) as any
    const knex = s.runtime.db.knex
    const pending = async () => Number((await knex('event_outbox').count({ n: '*' }))[0].n)
    const before = await pending()
    await t.rejects(outbox.publish(knex, undeclared, {}, { subjectId: 1 }), /not declared/)
    await t.rejects(outbox.publish(knex, declared, { n: 'one' }, { subjectId: 1 }), /payload/)
    // a transaction that rolls back takes its events with it
    await t.rejects(
      knex.transaction(async (trx) => {
        await outbox.publish(trx, declared, { n: 1 }, { subjectId: 7 })
        throw new Error('the change failed')
      }),
      /the change failed/,
    )
    t.equal(await pending(), before, 'nothing written')
    heard.length = 0
    const published: PublishedEvent = await knex.transaction((trx) => outbox.publish(trx, declared, { n: 2 }, { subjectId: 7, actorId: s.user.id }))
    const deadline = Date.now() + 10_000
    while (!heard.flat().some((e) => e.id === published.id) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
    const mine = heard.flat().filter((e) => e.id === published.id)
    t.equal(mine.length, 1, 'handed to the consumer once')
    t.match(mine[0], { name: 'outbox-fixture.happened', subject: { type: 'project', id: 7 }, actor_id: s.user.id, payload: { n: 2 } })
    // the consumer hears the batch before the fan-out marks it dispatched
    let row = await knex('event_outbox').where({ event_id: published.id }).first()
    while (!row.dispatched_at && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20))
      row = await knex('event_outbox').where({ event_id: published.id }).first()
    }
    t.ok(row.dispatched_at, 'marked dispatched')
  },
  { extraPlugins: [fixture] },
)
