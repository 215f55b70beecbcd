import { readFile } from 'node:fs/promises'
import { coreServices, invalidParam, type RegisterApi } from '../../core/index.js'
import { platformServices } from './refs.js'
import { LicenseInput } from './schemas.js'
import { machineIdOf, noLicenseFile } from './license.js'

const MAX_LICENSE_BYTES = 64 * 1024

/** §4.13: GET /machine_id, GET/POST /license. */
export function registerLicenseRoutes(api: RegisterApi) {
  const { routes } = api
  const license = api.use(platformServices.license)
  const machineId = machineIdOf(api.config.secretKey)

  routes.get('/machine_id', { access: 'admin', summary: 'the id of this server that licenses are bound to' }, () => ({ hash: { machine_id: machineId } }))

  routes.get('/license', { access: 'admin', summary: 'the license in force, or that none is (the built-in plugins run without one)' }, async (ctx) => ({
    license: license().view(await license().usage(ctx.em, ctx.resolve(coreServices.knex))),
  }))

  routes.post(
    '/license',
    { access: 'admin', input: LicenseInput, multipart: { maxFileSize: MAX_LICENSE_BYTES, maxFiles: 1 }, summary: 'install a license file: verified, then applied without a restart; an invalid one is a 422 and the old one stays' },
    async (ctx) => {
      let document: unknown
      const file = ctx.files.find((f) => f.field === 'license') ?? ctx.files[0]
      if (file) document = parseDocument(await readFile(file.tempPath, 'utf8'))
      else if (typeof ctx.input.license === 'string') document = parseDocument(ctx.input.license)
      else if (ctx.input.license) document = { license: ctx.input.license, signature: ctx.input.signature }
      else throw noLicenseFile()
      const installed = await license().install(document, ctx.user.userId)
      ctx.status = 201
      return { license: { ...license().view(await license().usage(ctx.em, ctx.resolve(coreServices.knex))), modules: installed.modules } }
    },
  )
}

function parseDocument(text: string): unknown {
  try {
    return JSON.parse(text.replace(/^\uFEFF/, ''))
  } catch {
    throw invalidParam('license', 'is not a license file (JSON with `license` and `signature`)')
  }
}
