import { createReadStream } from 'node:fs'
import { open, rename, rm } from 'node:fs/promises'
import path from 'node:path'
import { Type } from 'typebox'
import sharp from 'sharp'
import { IdParam, MamError, andThen, column, coreServices, forbidden, notFound, preparedRead, type Knex, type PreparedRead, type RegisterApi, type MamContext, type Principal } from '../../core/index.js'
import { UserSettings } from './entities.js'
import { SettingsInput } from './schemas.js'
import { findUser } from './users-routes.js'
import { makeDirs } from '../../core/index.js'

const UserParams = Type.Object({ user_id: IdParam })
const MAX_BACKGROUND_BYTES = 10 * 1024 * 1024
const MAX_BACKGROUND_PIXELS = 50_000_000

/** recognised by their first bytes, never by the name the client gave */
const IMAGE_TYPES: Array<{ ext: string; mime: string; magic: (b: Buffer) => boolean }> = [
  { ext: 'jpg', mime: 'image/jpeg', magic: (b) => b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff },
  { ext: 'png', mime: 'image/png', magic: (b) => b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) },
  { ext: 'webp', mime: 'image/webp', magic: (b) => b.subarray(0, 4).toString('latin1') === 'RIFF' && b.subarray(8, 12).toString('latin1') === 'WEBP' },
]

async function sniff(file: string) {
  const handle = await open(file, 'r')
  try {
    const { buffer, bytesRead } = await handle.read(Buffer.alloc(16), 0, 16, 0)
    return IMAGE_TYPES.find((t) => t.magic(buffer.subarray(0, bytesRead)))
  } finally {
    await handle.close()
  }
}

/** GET/PUT /users/:user_id/settings and PUT /users/:user_id/background (plus GET to fetch it). */
export function registerSettingsRoutes({ routes, config }: RegisterApi) {
  const own = async (ctx: MamContext<{ user_id: number }, any, Principal>) => {
    if (ctx.params.user_id !== ctx.user.userId && !ctx.user.isAdmin) throw forbidden("Only the user and administrators see a user's settings")
    const user = await findUser(ctx, ctx.params.user_id)
    return (await ctx.em.findOne(UserSettings, { user })) ?? ctx.em.create(UserSettings, { user, settings: {} })
  }
  const folder = (userId: number) => path.join(config.dataDir, 'users', String(userId))
  const show = (s: UserSettings) => ({
    user_id: s.user.id,
    ...s.settings,
    background_url: s.backgroundFile ? `/api/v1/users/${s.user.id}/background` : null,
  })

  // a client reads its user's settings at start: one prepared statement, no entities (`own` and
  // `show` on plain values; an EntityManager fork cost ~100 times the query: bench/routes.ts)
  let settingsRow: PreparedRead | undefined
  // synchronous while SQLite's connection is free (PreparedRead.now): no promise, as the other hot reads
  routes.get('/users/:user_id/settings', { access: 'authenticated', params: UserParams, summary: "a user's settings" }, (ctx) => {
    const userId = ctx.params.user_id
    if (userId !== ctx.user.userId && !ctx.user.isAdmin) throw forbidden("Only the user and administrators see a user's settings")
    settingsRow ??= preparedRead(ctx.resolve(coreServices.knex) as Knex, 'select u.id, s.settings, s.background_file from users u left join user_settings s on s.user_id = u.id where u.id = ?')
    return andThen(settingsRow.now([userId]), ([row]) => {
      if (!row) throw notFound('user', userId)
      return {
        settings: {
          user_id: userId,
          ...column.json<Record<string, unknown>>(row.settings, {}),
          background_url: row.background_file ? `/api/v1/users/${userId}/background` : null,
        },
      }
    })
  })

  routes.put('/users/:user_id/settings', { access: 'authenticated', params: UserParams, input: SettingsInput, wrap: 'settings', summary: "change a user's settings (unknown keys are refused)" }, async (ctx) => {
    const s = await own(ctx)
    s.settings = { ...s.settings, ...ctx.input.settings }
    await ctx.em.flush()
    return { settings: show(s) }
  })

  routes.put(
    '/users/:user_id/background',
    { access: 'authenticated', params: UserParams, multipart: { maxFileSize: MAX_BACKGROUND_BYTES }, summary: 'set a custom background image (JPEG, PNG or WebP)' },
    async (ctx) => {
      const s = await own(ctx)
      const upload = ctx.files.find((f) => f.field === 'background') ?? ctx.files[0]
      if (!upload) throw new MamError('invalid_parameters', 'background is required', { errors: [{ param: 'background', message: 'is required (a multipart file)' }] })
      const type = await sniff(upload.tempPath)
      if (!type) throw new MamError('unsupported_media_type', 'The background must be a JPEG, PNG or WebP image')
      const dir = folder(s.user.id)
      await makeDirs(dir)
      const name = `background.${type.ext}`
      // decoded whole (every pixel read): a file that only starts like an image is refused
      try {
        await sharp(upload.tempPath, { limitInputPixels: MAX_BACKGROUND_PIXELS, failOn: 'error' }).stats()
      } catch (err) {
        if (/pixel limit/i.test((err as Error).message)) throw new MamError('payload_too_large', `The background has more than ${MAX_BACKGROUND_PIXELS} pixels`)
        throw new MamError('unsupported_media_type', 'The background is not a readable JPEG, PNG or WebP image')
      }
      await rename(upload.tempPath, path.join(dir, name))
      if (s.backgroundFile && s.backgroundFile !== name) await rm(path.join(dir, s.backgroundFile), { force: true })
      s.backgroundFile = name
      await ctx.em.flush()
      return { settings: show(s) }
    },
  )

  routes.get('/users/:user_id/background', { access: 'authenticated', params: UserParams, summary: "a user's background image" }, async (ctx) => {
    const s = await own(ctx)
    if (!s.backgroundFile) throw notFound('background of user', s.user.id)
    ctx.type = IMAGE_TYPES.find((t) => s.backgroundFile!.endsWith(t.ext))!.mime
    ctx.body = createReadStream(path.join(folder(s.user.id), s.backgroundFile))
  })
}
