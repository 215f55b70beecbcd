import type { TSchema } from 'typebox'
import type { Logger } from 'pino'
import { invalid, iso, type Dialect, type Knex, type PluginSettings, type MamConfig, type Principal, type ParamError } from '../../core/index.js'

type Obj = Record<string, unknown>

export const MASK = '********'
const REDACTED = '[redacted]'
/** how often a process picks up changes another process made */
const REFRESH_MS = 5000

const isObject = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v)

/** `b` over `a`, objects merged member by member, anything else replaced */
export function deepMerge(a: unknown, b: unknown): unknown {
  if (!isObject(a) || !isObject(b)) return structuredClone(b)
  const out: Obj = structuredClone(a)
  for (const [k, v] of Object.entries(b)) out[k] = deepMerge(out[k], v)
  return out
}

/** the schema of the member at a dotted path, following `properties` */
function memberSchema(schema: TSchema | undefined, path: string[]): any {
  let s: any = schema
  for (const key of path) s = s?.properties?.[key]
  return s
}

/** every leaf (non-object value) of a settings object with its dotted path */
function leaves(value: unknown, prefix: string[] = [], out = new Map<string, unknown>()): Map<string, unknown> {
  if (isObject(value) && (prefix.length === 0 || Object.keys(value).length > 0)) {
    for (const [k, v] of Object.entries(value)) leaves(v, [...prefix, k], out)
  } else out.set(prefix.join('.'), value)
  return out
}

export interface SettingChangeView {
  id: number
  plugin: string
  setting: string
  old_value: unknown
  new_value: unknown
  user_id: number | null
  username: string | null
  created_at: string | null
}

/**
 * Settings of every plugin that declares a schema, as GET/PUT /settings show and change them.
 * In force: the configuration file's values (`config.plugins.<name>`) with the overrides made over
 * HTTP (table `platform_settings`) on top, checked against the schema. A change is checked whole,
 * stored with its audit rows in one transaction, then put in force at once (every `api.settings()`
 * returns it); other processes pick it up within a few seconds.
 */
export class SettingsService {
  private timer?: NodeJS.Timeout
  private applied = new Map<string, string>()

  constructor(
    private readonly knex: Knex,
    private readonly dialect: Dialect,
    private readonly store: PluginSettings,
    private readonly config: MamConfig,
    private readonly log: Logger,
  ) {}

  private schemaOf(plugin: string): TSchema | undefined {
    return this.store.typed().find((t) => t.plugin === plugin)?.schema
  }

  /** GET /settings: grouped by plugin, secrets masked */
  view(): Record<string, unknown> {
    const out: Obj = {}
    for (const { plugin, schema } of this.store.typed()) out[plugin] = mask(this.store.get(plugin), schema)
    return out
  }

  /** reads the stored overrides and puts them in force; then keeps doing so every few seconds */
  async start(alsoEachTime?: () => Promise<void>): Promise<void> {
    await this.refresh()
    const tick = async () => {
      await this.refresh()
      await alsoEachTime?.()
    }
    this.timer = setInterval(() => void tick().catch((err) => this.log.warn({ err }, 'settings refresh failed')), REFRESH_MS)
    this.timer.unref()
  }

  stop(): void {
    clearInterval(this.timer)
  }

  async refresh(): Promise<void> {
    const rows: Array<{ plugin: string; value: string }> = await this.knex('platform_settings').select('plugin', 'value')
    for (const row of rows) {
      if (!this.schemaOf(row.plugin) || this.applied.get(row.plugin) === row.value) continue
      const effective = deepMerge(this.config.plugins[row.plugin] ?? {}, JSON.parse(row.value)) as Obj
      const errors = this.store.replace(row.plugin, effective)
      // a stored override the schema no longer takes (a plugin upgraded): the file's values stay
      if (errors.length) this.log.warn({ plugin: row.plugin, errors }, 'stored settings no longer valid; ignored')
      this.applied.set(row.plugin, row.value)
    }
  }

  /**
   * PUT /settings: `changes` maps plugins to the members to change (nested objects merge; a masked
   * secret sent back unchanged keeps the secret). All plugins' changes are checked before any is
   * stored; a bad one is a 422 naming `settings[plugin][member]` and nothing changes.
   */
  async update(changes: Record<string, Obj>, principal: Principal, username: string | null, typed: boolean): Promise<Record<string, unknown>> {
    const errors: ParamError[] = []
    const plans: Array<{ plugin: string; change: Obj }> = []
    for (const [plugin, change] of Object.entries(changes)) {
      const schema = this.schemaOf(plugin)
      if (!schema) {
        errors.push({ param: `settings[${plugin}]`, message: `is not a plugin with settings (known: ${this.store.typed().map((t) => t.plugin).join(', ')})` })
        continue
      }
      const cleaned = unmask(change, this.store.get(plugin), schema)
      errors.push(...readOnlyChanges(cleaned, this.store.get(plugin), schema, `settings[${plugin}]`))
      const candidate = deepMerge(this.store.get(plugin), cleaned) as Obj
      errors.push(...this.store.check(plugin, candidate, typed, `settings[${plugin}]`))
      // form values were coerced in the candidate ("5" → 5): those are what is stored
      plans.push({ plugin, change: pick(candidate, cleaned) })
    }
    if (errors.length) throw invalid(errors)

    const now = new Date()
    const applied: Array<{ plugin: string; stored: string }> = []
    await this.knex.transaction(async (trx) => {
      for (const { plugin, change } of plans) {
        // the row is locked (PostgreSQL) or the database is (SQLite) while it is read and written:
        // two administrators changing different members of one plugin both keep their change
        await trx('platform_settings').insert({ plugin, value: '{}', created_at: now, updated_at: now }).onConflict('plugin').ignore()
        const query = trx('platform_settings').where({ plugin }).first()
        const row = await (this.dialect === 'postgresql' ? query.forUpdate() : query)
        const stored = deepMerge(JSON.parse(row.value), change) as Obj
        const before = deepMerge(this.config.plugins[plugin] ?? {}, JSON.parse(row.value)) as Obj
        const after = deepMerge(this.config.plugins[plugin] ?? {}, stored) as Obj
        const schema = this.schemaOf(plugin)!
        // the values with defaults, as they are in force
        const errs = this.store.check(plugin, after, true, `settings[${plugin}]`)
        if (errs.length) throw invalid(errs)
        this.store.check(plugin, before, true) // fills in the defaults, so the audit compares values in force
        const audit = diff(before, after, schema).map(([setting, oldValue, newValue]) => ({
          plugin,
          setting,
          old_value: oldValue,
          new_value: newValue,
          user_id: principal.userId,
          username,
          created_at: now,
        }))
        const serialized = JSON.stringify(stored)
        await trx('platform_settings').where({ plugin }).update({ value: serialized, updated_by_id: principal.userId, updated_at: now })
        if (audit.length) await trx('platform_setting_changes').insert(audit)
        applied.push({ plugin, stored: serialized })
      }
    })
    for (const { plugin, stored } of applied) {
      const errs = this.store.replace(plugin, deepMerge(this.config.plugins[plugin] ?? {}, JSON.parse(stored)) as Obj)
      if (errs.length) this.log.error({ plugin, errors: errs }, 'stored settings could not be put in force')
      this.applied.set(plugin, stored)
    }
    return this.view()
  }

  /** the audit rows (of one plugin), for `paginate` */
  changesQuery(plugin?: string): Knex.QueryBuilder {
    const q = this.knex('platform_setting_changes').select('*')
    return plugin ? q.where({ plugin }) : q
  }
}

export function serializeChange(r: any): SettingChangeView {
  return {
    id: Number(r.id),
    plugin: r.plugin,
    setting: r.setting,
    old_value: r.old_value === null ? null : JSON.parse(r.old_value),
    new_value: r.new_value === null ? null : JSON.parse(r.new_value),
    user_id: r.user_id === null ? null : Number(r.user_id),
    username: r.username,
    created_at: iso(r.created_at),
  }
}

/** the members of `shape` with their values taken from `source` */
function pick(source: unknown, shape: Obj): Obj {
  const out: Obj = {}
  for (const [k, v] of Object.entries(shape)) {
    const from = isObject(source) ? source[k] : undefined
    out[k] = isObject(v) && isObject(from) ? pick(from, v) : from
  }
  return out
}

/** secrets (`writeOnly`) shown as set or not, never their value */
function mask(value: unknown, schema: any): unknown {
  if (schema?.writeOnly) return value === '' || value === null || value === undefined ? '' : MASK
  if (isObject(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, mask(v, schema?.properties?.[k])]))
  return value
}

/** a masked secret sent back as it was shown means "unchanged": dropped from the change */
function unmask(change: Obj, current: unknown, schema: any): Obj {
  const out: Obj = {}
  for (const [k, v] of Object.entries(change)) {
    const member = schema?.properties?.[k]
    if (member?.writeOnly && v === MASK) continue
    out[k] = isObject(v) && member?.type === 'object' ? unmask(v, isObject(current) ? current[k] : undefined, member) : v
  }
  return out
}

function readOnlyChanges(change: Obj, current: unknown, schema: any, prefix: string): ParamError[] {
  const errors: ParamError[] = []
  for (const [k, v] of Object.entries(change)) {
    const member = schema?.properties?.[k]
    const now = isObject(current) ? current[k] : undefined
    if (member?.readOnly && JSON.stringify(v) !== JSON.stringify(now)) errors.push({ param: `${prefix}[${k}]`, message: 'is set in the configuration file only' })
    else if (isObject(v) && member?.type === 'object') errors.push(...readOnlyChanges(v, now, member, `${prefix}[${k}]`))
  }
  return errors
}

/** [setting, old, new] for every leaf that changed, as JSON text; secrets redacted */
function diff(before: Obj, after: Obj, schema: TSchema): Array<[string, string | null, string | null]> {
  const a = leaves(before)
  const b = leaves(after)
  const out: Array<[string, string | null, string | null]> = []
  for (const key of new Set([...a.keys(), ...b.keys()])) {
    const [x, y] = [JSON.stringify(a.get(key)), JSON.stringify(b.get(key))]
    if (x === y) continue
    const secret = memberSchema(schema, key.split('.'))?.writeOnly === true
    const show = (v: string | undefined) => (v === undefined ? null : secret ? JSON.stringify(REDACTED) : v)
    out.push([key, show(x), show(y)])
  }
  return out.sort((p, q) => p[0].localeCompare(q[0]))
}
