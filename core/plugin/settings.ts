import type { TSchema } from 'typebox'
import { BootError, type ParamError } from '../errors.js'
import { check, compileSchema, type CompiledSchema } from '../http/validation.js'
import type { PluginDefinition } from './contract.js'

/** `proxy[height]` (a parameter name) → `plugins.assets.proxy.height` (where an operator sets it) */
const settingPath = (plugin: string, param: string) => `plugins.${plugin}.${param.replace(/\[/g, '.').replace(/\]/g, '')}`.replace(/\.\(body\)$/, '')

export type SettingsListener = (plugin: string, value: Record<string, unknown>, previous: Record<string, unknown>) => void

/**
 * Every plugin's settings: `config.plugins.<name>` checked against the plugin's `settings` schema,
 * with the schema's defaults filled in (nested objects need a `default: {}` of their own for their
 * members' defaults to apply). One store per runtime; read through `api.settings()`, which always
 * returns the value in force: `replace` (PUT /settings) changes it without a restart.
 */
export class PluginSettings {
  private readonly values = new Map<string, unknown>()
  private readonly schemas = new Map<string, CompiledSchema>()
  private readonly listeners = new Set<SettingsListener>()

  /** validates a plugin's configured values at boot; a bad value stops the boot naming the setting */
  load(plugin: PluginDefinition, configured: unknown): void {
    const value = structuredClone(configured ?? {})
    if (!plugin.settings) {
      this.values.set(plugin.name, value)
      return
    }
    let compiled: CompiledSchema
    try {
      compiled = compileSchema(plugin.settings)
    } catch (err) {
      throw new BootError('SCHEMA_INVALID', plugin.name, `settings schema: ${(err as Error).message}`)
    }
    const errors = check(compiled, value, true)
    if (errors.length)
      throw new BootError('SETTINGS_INVALID', plugin.name, errors.map((e) => `setting ${settingPath(plugin.name, e.param)} ${e.message}`).join('; '))
    this.schemas.set(plugin.name, compiled)
    this.values.set(plugin.name, value)
  }

  get<T = Record<string, unknown>>(plugin: string): T {
    return this.values.get(plugin) as T
  }

  /** the plugins that declare a settings schema, in load order, with the schema */
  typed(): Array<{ plugin: string; schema: TSchema }> {
    return [...this.schemas].map(([plugin, compiled]) => ({ plugin, schema: compiled.schema }))
  }

  /**
   * Checks a plugin's whole settings object against its schema (defaults filled in, `typed`: JSON
   * types as sent, else strings coerced as from a form) and, when valid, puts it in force at once.
   * Returns the offending settings, named `<prefix>[member]`; nothing changes then.
   */
  replace(plugin: string, value: Record<string, unknown>, typed = true, prefix = ''): ParamError[] {
    const compiled = this.schemas.get(plugin)
    if (!compiled) return [{ param: prefix || plugin, message: 'has no settings' }]
    const candidate = structuredClone(value)
    const errors = check(compiled, candidate, typed, prefix)
    if (errors.length) return errors
    const previous = this.get<Record<string, unknown>>(plugin)
    this.values.set(plugin, candidate)
    for (const listener of this.listeners) listener(plugin, candidate, previous)
    return []
  }

  /** like `replace`, without putting anything in force; `value` gets the schema's defaults filled in */
  check(plugin: string, value: unknown, typed = true, prefix = ''): ParamError[] {
    const compiled = this.schemas.get(plugin)
    if (!compiled) return [{ param: prefix || plugin, message: 'has no settings' }]
    return check(compiled, value, typed, prefix)
  }

  /** called after every `replace`; returns the unsubscribe function */
  onChange(listener: SettingsListener): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }
}
