/**
 * A partner plugin: notes on shots, written against mamkit's public API only (in your own package:
 * `import { definePlugin, Type } from 'mamkit'`). It brings a table (through its own migration),
 * a capability that roles can grant, and three routes below /api/v1.
 *
 *   mamkit serve --plugin ./dist/examples/partner-plugin/plugin.js
 */
import { coreServices, createServiceRef, definePlugin, IdParams, Type, iso, notFound, timestamps, type Knex } from '../../core/index.js'

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

/** every query of the plugin: handlers parse and answer, this reads and writes (routes → services → database) */
export class ShotNoteService {
  constructor(private readonly knex: Knex) {}

  list(options: { shot?: string; limit: number }): Promise<NoteRow[]> {
    const query = this.knex(TABLE).orderBy('id', 'desc').limit(options.limit)
    if (options.shot) query.where({ shot: options.shot })
    return query
  }

  async get(id: number): Promise<NoteRow> {
    const row: NoteRow | undefined = await this.knex(TABLE).where({ id }).first()
    if (!row) throw notFound('shot note', id)
    return row
  }

  async create(userId: number, note: { shot: string; text: string }): Promise<NoteRow> {
    const now = new Date()
    const [inserted] = await this.knex(TABLE).insert({ shot: note.shot, text: note.text, user_id: userId, created_at: now, updated_at: now }).returning('id')
    return this.get(Number(typeof inserted === 'object' ? inserted.id : inserted))
  }
}

/** the service's ref, named `<plugin>.<name>`: other plugins that depend on shot-notes resolve it */
export const shotNoteServices = { service: createServiceRef<ShotNoteService>('shot-notes.service') }

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
  register(api) {
    const { routes } = api
    api.provide(shotNoteServices.service, (resolve) => new ShotNoteService(resolve(coreServices.knex)))
    const notes = api.use(shotNoteServices.service)

    routes.get('/shot_notes', { access: 'authenticated', input: ListInput, summary: 'notes, newest first' }, async (ctx) => {
      const rows = await notes().list({ shot: ctx.input.shot, limit: ctx.input.per_page ?? 100 })
      return { shot_notes: rows.map(serialize) }
    })

    routes.get('/shot_notes/:id', { access: 'authenticated', params: IdParams, summary: 'one note' }, async (ctx) => {
      return { shot_note: serialize(await notes().get(ctx.params.id)) }
    })

    routes.post('/shot_notes', { access: WRITE, input: NoteInput, summary: 'write a note' }, async (ctx) => {
      ctx.status = 201
      return { shot_note: serialize(await notes().create(ctx.user.userId, ctx.input.note)) }
    })
  },
})
