import { Type } from 'typebox'
import type { RegisterApi } from '../plugin/contract.js'
import { iso } from '../db/entity.js'
import { SERVER_VERSION, API_RELEASE } from '../version.js'
import type { FeatureService } from './features.js'
import { coreServices } from '../plugin/services.js'

const ModuleInput = Type.Object(
  { module: Type.String({ minLength: 1, maxLength: 100 }), key: Type.Optional(Type.String({ maxLength: 4096 })) },
  { additionalProperties: false },
)

type Feature = ReturnType<FeatureService['list']>[number]
const serializeFeature = (f: Feature) => ({
  id: f.id,
  name: f.name,
  title: f.plugin.title ?? f.name,
  description: f.plugin.description ?? null,
  version: f.plugin.version,
  active: f.active,
  required: f.plugin.required === true,
  dependencies: f.plugin.dependsOn ?? [],
  created_at: iso(f.created_at),
  updated_at: iso(f.updated_at),
})

/** §4.13: GET /features, /features/:id, /version, activate_module and deactivate_module. */
export function registerFeatureRoutes({ routes }: RegisterApi, versions: () => Record<string, string>) {
  routes.get('/features', { access: 'authenticated', summary: 'plugins and whether they are active' }, (ctx) => ({
    features: ctx.resolve(coreServices.features).list().map(serializeFeature),
  }))

  routes.get('/features/:id', { access: 'authenticated', params: Type.Object({ id: Type.String({ maxLength: 100 }) }), summary: 'one plugin, by id or name' }, (ctx) => ({
    feature: serializeFeature(ctx.resolve(coreServices.features).find(ctx.params.id)),
  }))

  // what runs where helps an attacker more than anyone else: anonymous callers get the server and API
  // versions, signed-in users the plugins too, administrators also Node.js and the media tools with their paths
  routes.get('/version', { access: 'public', summary: 'versions of the server and API; plugins for signed-in users; Node.js and media tools for administrators' }, async (ctx) => {
    const hash: Record<string, unknown> = { server: SERVER_VERSION, api: 1, release: API_RELEASE }
    if (ctx.user) hash.plugins = Object.fromEntries(ctx.resolve(coreServices.features).list().map((f) => [f.name, { version: f.plugin.version, active: f.active }]))
    if (ctx.user?.isAdmin) {
      await ctx.resolve(coreServices.mediaTools).ready()
      Object.assign(hash, { node: process.versions.node, tools: versions() })
    }
    return { hash }
  })

  routes.put('/settings/activate_module', { access: 'admin', input: ModuleInput, summary: 'switch a module on' }, async (ctx) => ({
    feature: serializeFeature(await ctx.resolve(coreServices.features).activate(ctx.input.module, ctx.input.key)),
  }))

  routes.put('/settings/deactivate_module', { access: 'admin', input: ModuleInput, summary: 'switch a module off' }, async (ctx) => ({
    feature: serializeFeature(await ctx.resolve(coreServices.features).deactivate(ctx.input.module)),
  }))
}
