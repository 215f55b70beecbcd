import { strategyServices } from './refs.js'
import { KINDS, ROOT_KEY, STRATEGY_TYPES, TRANSMISSION_CHECKS, CONTENTS, WRAP_KEY, type StrategyKind } from './strategies.js'
import { strategyInput } from './schemas.js'

import { IdParams, invalidParam, type RegisterApi } from '../../core/index.js'
const PATHS: Record<StrategyKind, string> = {
  archive: '/archive_strategies',
  backup: '/backup_strategies',
  asset_copy_to: '/asset_copy_to_strategies',
  project_copy_to: '/project_copy_to_strategies',
}

/** §4.5: strategies of the four kinds; lists and shows for every user, changes for administrators */
export function registerStrategyRoutes(api: RegisterApi) {
  const { routes } = api
  const service = api.use(strategyServices.strategies)

  // before /archive_strategies/:id, which would take "configuration" for an id
  routes.get('/archive_strategies/configuration', { access: 'authenticated', summary: 'the target kinds strategies can write to and their settings' }, async () => ({
    hash: {
      targets: {
        disk: {
          destination: 'an absolute directory inside one of the configured target roots (plugins.strategies.roots)',
          settings: {},
        },
        s3: {
          destination: 's3://bucket/prefix',
          settings: {
            endpoint: { type: 'string', description: 'http(s) URL of an S3-compatible server; empty for AWS' },
            region: { type: 'string', default: 'us-east-1' },
            access_key_id: { type: 'string', required: true },
            secret_access_key: { type: 'string', required: true, description: 'sealed at rest, never shown again' },
            force_path_style: { type: 'boolean', default: 'true for non-AWS endpoints' },
            storage_class: { type: 'string', description: 'STANDARD, GLACIER, … as the server knows them' },
            checksum_mode: { type: 'string', enum: ['WHEN_REQUIRED', 'WHEN_SUPPORTED'], default: 'WHEN_REQUIRED for non-AWS endpoints' },
          },
        },
      },
      formats: ['plain'],
      transmission_checks: TRANSMISSION_CHECKS,
      strategy_types: STRATEGY_TYPES,
      contents: CONTENTS,
      roots: api.settings().roots,
    },
  }))

  for (const kind of KINDS) {
    const base = PATHS[kind]
    const wrap = WRAP_KEY[kind]
    const root = ROOT_KEY[kind]
    const Input = strategyInput(wrap)
    const param = (f: string) => `${wrap}[${f}]`
    const label = kind.replace(/_/g, ' ')

    routes.get(base, { access: 'authenticated', summary: `list ${label} strategies (admin-only ones for administrators)` }, async (ctx) => ({
      array: (await service().list(kind, ctx.user)).map((r) => service().serialize(r, ctx.user)),
    }))
    routes.get(`${base}/:id`, { access: 'authenticated', params: IdParams, summary: `show a ${label} strategy` }, async (ctx) => ({
      [root]: service().serialize(await service().get(kind, ctx.params.id, ctx.user), ctx.user),
    }))
    routes.post(base, { access: 'admin', input: Input, wrap, summary: `create a ${label} strategy (${wrap}[name|destination|target|…])` }, async (ctx) => {
      const row = await service().create(kind, ctx.input[wrap] ?? {}, param)
      ctx.status = 201
      return { [root]: service().serialize(row, ctx.user) }
    })
    routes.put(`${base}/:id`, { access: 'admin', params: IdParams, input: Input, wrap, summary: `change a ${label} strategy` }, async (ctx) => {
      return { [root]: service().serialize(await service().update(kind, ctx.params.id, ctx.input[wrap] ?? {}, param), ctx.user) }
    })
    if (kind === 'asset_copy_to' || kind === 'project_copy_to')
      routes.delete(`${base}/:id`, { access: 'admin', params: IdParams, summary: `delete a ${label} strategy` }, async (ctx) => ({
        [root]: service().serialize(await service().remove(kind, ctx.params.id), ctx.user),
      }))
  }
}

/** a strategy id sent as `strategy` (or `archive_strategy_id`), named as sent */
export function strategyParam(input: { strategy?: number | string; archive_strategy_id?: number | string }, required = true): { id: number; param: string } | undefined {
  const param = input.strategy !== undefined ? 'strategy' : 'archive_strategy_id'
  const raw = input.strategy ?? input.archive_strategy_id
  if (raw === undefined) {
    if (required) throw invalidParam('strategy', 'is required')
    return undefined
  }
  return { id: Number(raw), param }
}
