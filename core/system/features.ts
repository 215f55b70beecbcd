import type { Knex } from '@mikro-orm/knex'
import type { EventBus } from '../events.js'
import type { PluginDefinition } from '../plugin/contract.js'
import { conflict, forbidden, invalidParam, notFound } from '../errors.js'

export interface FeatureRow {
  id: number
  name: string
  active: boolean
  created_at: Date
  updated_at: Date
}

const REFRESH_MS = 3000

/**
 * Which plugins are switched on. Kept in the `features` table so the state survives restarts and
 * is shared by every process on the database; read from memory on the request path and reloaded
 * every few seconds to see changes made by other processes.
 */
/** which modules sold separately a license grants (set by the plugin that installs licenses) */
export interface LicensePolicy {
  grants(module: string): boolean
}

export class FeatureService {
  private rows = new Map<string, FeatureRow>()
  private license?: LicensePolicy
  private readonly plugins: Map<string, PluginDefinition>
  private loadedAt = 0
  private refreshing?: Promise<void>

  constructor(
    private readonly knex: Knex,
    plugins: PluginDefinition[],
    private readonly events: EventBus,
  ) {
    this.plugins = new Map(plugins.map((p) => [p.name, p]))
  }

  /** Adds a row for every plugin seen for the first time. */
  async sync(): Promise<void> {
    const existing = new Set((await this.knex('features').select('name')).map((r: { name: string }) => r.name))
    const now = new Date()
    for (const p of this.plugins.values()) {
      if (existing.has(p.name)) continue
      await this.knex('features')
        .insert({ name: p.name, active: p.activeByDefault !== false, created_at: now, updated_at: now })
        .onConflict('name')
        .ignore()
    }
    await this.reload()
  }

  async reload(): Promise<void> {
    const rows = await this.knex('features').select('*').orderBy('id')
    this.rows = new Map(rows.map((r: any) => [r.name, { ...r, id: Number(r.id), active: Boolean(r.active) }]))
    this.loadedAt = Date.now()
  }

  /** loaded and switched on, and so is everything it depends on (a module on by default may need one that is off) */
  isActive(name: string): boolean {
    if (!this.plugins.has(name)) return false
    if (Date.now() - this.loadedAt > REFRESH_MS && !this.refreshing)
      this.refreshing = this.reload()
        .catch(() => {})
        .finally(() => (this.refreshing = undefined))
    return this.switchedOn(name) && (this.plugins.get(name)?.dependsOn ?? []).every((d) => this.isActive(d))
  }

  /**
   * Puts a license in force (undefined: none). While one is, it alone decides the modules sold
   * separately (those with `verifyActivationKey`): a module it does not grant is off and cannot be
   * activated, whatever key is given; without a license their activation keys decide, as before.
   */
  useLicense(policy: LicensePolicy | undefined): void {
    this.license = policy
  }

  /** a module sold separately that the license in force does not grant */
  private unlicensed(name: string): boolean {
    return this.license !== undefined && this.plugins.get(name)?.verifyActivationKey !== undefined && !this.license.grants(name)
  }

  private switchedOn(name: string): boolean {
    if (this.plugins.get(name)?.required) return true
    if (this.unlicensed(name)) return false
    return this.rows.get(name)?.active ?? this.plugins.get(name)?.activeByDefault !== false
  }

  list(): Array<FeatureRow & { plugin: PluginDefinition }> {
    return [...this.rows.values()]
      .filter((r) => this.plugins.has(r.name))
      .map((r) => ({ ...r, active: this.isActive(r.name), plugin: this.plugins.get(r.name)! }))
  }

  find(idOrName: string): FeatureRow & { plugin: PluginDefinition } {
    const found = this.list().find((f) => String(f.id) === idOrName || f.name === idOrName)
    if (!found) throw notFound('feature', idOrName)
    return found
  }

  async activate(name: string, key: string | undefined) {
    const plugin = this.plugin(name)
    if (this.license && plugin.verifyActivationKey) {
      if (this.unlicensed(name)) throw forbidden(`The license in force does not grant "${name}"; POST /api/v1/license with a license that does`)
    } else if (plugin.verifyActivationKey) {
      if (!key) throw invalidParam('key', `is required to activate "${name}"`)
      if (!plugin.verifyActivationKey(key)) throw forbidden(`The activation key for "${name}" is not valid`)
    }
    const inactiveDeps = (plugin.dependsOn ?? []).filter((d) => !this.isActive(d))
    if (inactiveDeps.length) throw conflict(`"${name}" needs ${inactiveDeps.map((d) => `"${d}"`).join(', ')} active first`, { dependencies: inactiveDeps })
    return this.set(name, true)
  }

  async deactivate(name: string) {
    const plugin = this.plugin(name)
    if (plugin.required) throw conflict(`"${name}" is part of the core and cannot be switched off`)
    const dependents = [...this.plugins.values()].filter((p) => p.dependsOn?.includes(name) && this.isActive(p.name)).map((p) => p.name)
    if (dependents.length)
      throw conflict(`Active modules depend on "${name}": ${dependents.join(', ')}`, { dependents })
    return this.set(name, false)
  }

  private plugin(name: string): PluginDefinition {
    const p = this.plugins.get(name)
    if (!p) throw invalidParam('module', `"${name}" is not an installed module`)
    return p
  }

  private async set(name: string, active: boolean) {
    await this.knex('features').where({ name }).update({ active, updated_at: new Date() })
    await this.reload()
    this.events.emit('features.changed', { name, active })
    return this.find(name)
  }
}
