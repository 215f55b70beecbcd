import { BootError } from '../errors.js'
import { check, compileSchema, type CompiledSchema } from '../http/validation.js'
import type { PluginDefinition } from './contract.js'

/** `proxy[height]` (a parameter name) → `plugins.assets.proxy.height` (where an operator sets it) */
const settingPath = (plugin: string, param: string) => `plugins.${plugin}.${param.replace(/\[/g, '.').replace(/\]/g, '')}`.replace(/\.\(body\)$/, '')

/**
 * Every plugin's settings: `config.plugins.<name>` checked against the plugin's `settings` schema,
 * with the schema's defaults filled in (nested objects need a `default: {}` of their own for their
 * members' defaults to apply). One store per runtime; read through `api.settings()`.
 */
export class PluginSettings {
  private readonly values = new Map<string, unknown>()
  private readonly schemas = new Map<string, CompiledSchema>()

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
}
