/**
 * A partner plugin: notes on shots, written against mamkit's public API only (in your own package:
 * `import { definePlugin, Type } from 'mamkit'`). It brings a table (through its own migration),
 * a capability that roles can grant, and three routes below /api/v1.
 *
 *   mamkit serve --plugin ./dist/examples/partner-plugin/plugin.js
 */
import { definePlugin, IdParams, Type, iso, notFound, timestamps, type MamContext } from '../../core/index.js'

/** the table this plugin owns; named after the plugin, as every plugin's tables are */
export const TABLE = 'shot_notes'
export const WRITE = 'shot_notes.write'

const NoteInput = Type.Object(
  {
    note: Type.Object(
      {
        shot: Type.String({ minLength: 1, maxLength: 200 }),
        text: Type.String({ minLength: 1, maxLength: 10_000 }),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
)

const ListInput = Type.Object(
  {
    shot: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    per_page: Type.Optional(Type.Integer({ minimum: 1, maximum: 500 })),
  },
  { additionalProperties: false },
)

interface NoteRow {
  id: number
  shot: string
  text: string
  user_id: number
  created_at: Date | string
  updated_at: Date | string
}

const serialize = (row: NoteRow) => ({
  id: Number(row.id),
  shot: row.shot,
  text: row.text,
  user_id: Number(row.user_id),
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
})

// the request's EntityManager also offers the query builder; enough for a table this simple
const notes = (ctx: MamContext) => ctx.em.getKnex()(TABLE)

export default definePlugin({
  name: 'shot-notes',
  title: 'Shot notes',
  version: '1.0.0',
  description: 'Example partner plugin: free-text notes on shots',
  capabilities: { [WRITE]: 'Write notes on shots' },
  migrations: [
    {
      name: '0001-shot-notes',
      async up(knex) {
        await knex.schema.createTable(TABLE, (t) => {
          t.increments('id')
          t.string('shot', 200).notNullable().index()
          t.text('text').notNullable()
          t.integer('user_id').notNullable().references('id').inTable('users').onDelete('CASCADE')
          timestamps(t)
        })
      },
    },
  ],
  register({ routes }) {
    routes.get('/shot_notes', { access: 'authenticated', input: ListInput, summary: 'notes, newest first' }, async (ctx) => {
      const { shot, per_page = 100 } = ctx.input
      const query = notes(ctx).orderBy('id', 'desc').limit(per_page)
      if (shot) query.where({ shot })
      const rows: NoteRow[] = await query
      return { shot_notes: rows.map(serialize) }
    })

    routes.get('/shot_notes/:id', { access: 'authenticated', params: IdParams, summary: 'one note' }, async (ctx) => {
      const row: NoteRow | undefined = await notes(ctx).where({ id: ctx.params.id }).first()
      if (!row) throw notFound('shot note', ctx.params.id)
      return { shot_note: serialize(row) }
    })

    routes.post('/shot_notes', { access: WRITE, input: NoteInput, summary: 'write a note' }, async (ctx) => {
      const now = new Date()
      const [inserted] = await notes(ctx)
        .insert({ shot: ctx.input.note.shot, text: ctx.input.note.text, user_id: ctx.user!.userId, created_at: now, updated_at: now })
        .returning('id')
      const id = typeof inserted === 'object' ? inserted.id : inserted
      ctx.status = 201
      return { shot_note: serialize(await notes(ctx).where({ id }).first()) }
    })
  },
})
