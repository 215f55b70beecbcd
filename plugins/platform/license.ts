import { createHmac, createPublicKey, verify, type KeyObject } from 'node:crypto'
import type { Static } from 'typebox'
import type { Logger } from 'pino'
import { compileSchema, checkParams, invalidParam, MamError, invalid, iso, User, type Knex, type Dialect, type EntityManager, type FeatureService, type PluginDefinition, type ParamError } from '../../core/index.js'
import { LicenseFile, type LicenseBody } from './schemas.js'

export type License = Static<typeof LicenseBody>

const licenseFile = compileSchema(LicenseFile)
/** DER prefix of an Ed25519 SubjectPublicKeyInfo; the 32 raw key bytes follow */
const ED25519_SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex')

/**
 * Stable id of this server for licenses: an HMAC of the data dir's secret key (`secret.key`, made
 * once when the data dir is created), so it survives restarts and upgrades, moves with the data dir
 * and says nothing about the network card or the key itself.
 */
export function machineIdOf(secretKey: Buffer): string {
  const h = createHmac('sha256', secretKey).update('mamkit machine id v1').digest('hex')
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`
}

/** JSON with object keys sorted at every level and no spaces: the bytes a license signature covers */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`
  if (value !== null && typeof value === 'object')
    return `{${Object.keys(value)
      .sort()
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`)
      .join(',')}}`
  return JSON.stringify(value)
}

/** PEM (SPKI) or base64 of the 32 raw bytes */
export function parsePublicKey(text: string): KeyObject {
  const trimmed = text.trim()
  if (trimmed.startsWith('-----BEGIN')) return createPublicKey(trimmed)
  const raw = Buffer.from(trimmed, 'base64')
  if (raw.length !== 32) throw new Error('an Ed25519 public key is 32 bytes')
  return createPublicKey({ key: Buffer.concat([ED25519_SPKI_PREFIX, raw]), format: 'der', type: 'spki' })
}

/**
 * The license in force and how one is installed. A license file is `{"license": {customer,
 * machine_id, expires_at, modules, max_users, max_sites}, "signature": base64}`, the signature an
 * Ed25519 signature over the canonical JSON of `license` by the key whose public half is the
 * setting `platform.license.public_key`. Without any license the built-in plugins run (the project
 * is open); with one, it alone decides the modules sold separately (FeatureService.useLicense).
 */
export class LicenseService {
  private current?: { license: License; installedAt: Date; verified: boolean }

  constructor(
    private readonly knex: Knex,
    private readonly features: FeatureService,
    private readonly plugins: readonly PluginDefinition[],
    private readonly machineId: string,
    private readonly publicKey: () => string,
    private readonly log: Logger,
    private readonly dialect: Dialect,
  ) {}

  /** the license in force, if any */
  inForce(): License | undefined {
    return this.current?.license
  }

  /** modules sold separately: plugins that check an activation key */
  private licensable(): string[] {
    return this.plugins.filter((p) => p.verifyActivationKey).map((p) => p.name)
  }

  /**
   * Checks a license file: its shape, signature, machine and expiry. Returns the license or the
   * problems, each naming `license` (the parameter the file came in).
   */
  verify(document: unknown): { license?: License; errors: ParamError[] } {
    const keyText = this.publicKey()
    if (!keyText) throw new MamError('service_unavailable', 'No license public key is configured (plugins.platform.license.public_key in the configuration file), so no license can be verified')
    let key: KeyObject
    try {
      key = parsePublicKey(keyText)
    } catch {
      throw new MamError('service_unavailable', 'The configured license public key (plugins.platform.license.public_key) is not an Ed25519 key')
    }
    const shape = checkParams(licenseFile, document, true, 'license')
    if (shape.length) return { errors: [{ param: 'license', message: `is not a license file: ${shape.map((e) => `${e.param.replace(/^license/, '') || 'the file'} ${e.message}`).join('; ')}` }] }
    const file = document as Static<typeof LicenseFile>
    const signature = Buffer.from(file.signature, 'base64')
    if (!verify(null, Buffer.from(canonicalJson(file.license)), key, signature)) return { errors: [{ param: 'license', message: 'has a signature that does not verify' }] }
    const expires = Date.parse(file.license.expires_at)
    if (Number.isNaN(expires)) return { errors: [{ param: 'license', message: 'has an expiry date that is not a date' }] }
    if (expires <= Date.now()) return { errors: [{ param: 'license', message: `expired on ${new Date(expires).toISOString()}` }] }
    if (file.license.machine_id !== this.machineId)
      return { errors: [{ param: 'license', message: `is for machine ${file.license.machine_id}, this server is ${this.machineId} (GET /api/v1/machine_id)` }] }
    return { license: file.license, errors: [] }
  }

  /** POST /license: verifies, stores and applies; an invalid license is a 422 and the old one stays */
  async install(document: unknown, userId: number): Promise<License> {
    const { license, errors } = this.verify(document)
    if (!license) throw invalid(errors)
    const now = new Date()
    await this.knex('platform_licenses').insert({ document: JSON.stringify(document), installed_by_id: userId, created_at: now, updated_at: now })
    await this.apply(license, now, true)
    return license
  }

  /** at start and every refresh: the newest stored license that still verifies is put in force */
  async load(): Promise<void> {
    const row = await this.knex('platform_licenses').orderBy('id', 'desc').first()
    if (!row) return this.apply(undefined, undefined, false)
    const installedAt = new Date(row.created_at)
    if (this.current?.installedAt.getTime() === installedAt.getTime() && (!this.current.verified || Date.parse(this.current.license.expires_at) > Date.now())) return
    const document = JSON.parse(row.document)
    let result: ReturnType<LicenseService['verify']>
    try {
      result = this.verify(document)
    } catch (err) {
      result = { errors: [{ param: 'license', message: (err as Error).message }] }
    }
    if (result.license) return this.apply(result.license, installedAt, true)
    // expired, or no longer verifiable (another key, another machine): still a license, not the open
    // mode, but one that grants nothing
    this.log.warn({ errors: result.errors }, 'the license in force is no longer valid: modules sold separately are off')
    await this.apply(document.license, installedAt, false)
  }

  /**
   * Puts a license in force in this process: the modules it grants can be activated (and are, when
   * they are on by default), those it drops are switched off in the features table too.
   */
  private async apply(license: License | undefined, installedAt: Date | undefined, verified: boolean): Promise<void> {
    this.current = license && installedAt ? { license, installedAt, verified } : undefined
    if (!license) return this.features.useLicense(undefined)
    const granted = new Set(verified ? license.modules : [])
    this.features.useLicense({ grants: (module) => granted.has(module) && Date.parse(license.expires_at) > Date.now() })
    await this.features.reload()
    for (const name of this.licensable()) {
      if (granted.has(name)) continue
      await this.knex('features').where({ name, active: true }).update({ active: false, updated_at: new Date() })
    }
    await this.features.reload()
  }

  /**
   * The limits of the license in force (null: none). Those of an expired or no longer verifiable
   * license still hold: a license that grants nothing does not grant more users either.
   */
  limits(): { maxUsers: number | null; maxStorageBytes: number | null; maxSites: number | null } {
    const l = this.current?.license
    return { maxUsers: l?.max_users ?? null, maxStorageBytes: l?.max_storage_bytes ?? null, maxSites: l?.max_sites ?? null }
  }

  /**
   * A user limit (identity's `userLimits`): refuses a new account when the license's `max_users`
   * are all taken. Runs in the transaction that creates the account; on PostgreSQL it first takes a
   * transaction lock so that two creations cannot both pass the same count (SQLite runs one
   * transaction at a time on its one connection).
   */
  readonly assertUserRoom = async (em: EntityManager): Promise<void> => {
    const { maxUsers } = this.limits()
    if (maxUsers === null) return
    if (this.dialect === 'postgresql') await em.execute('select pg_advisory_xact_lock(?, ?)', [LICENSE_LOCK, USERS_LOCK])
    const users = await em.count(User)
    if (users >= maxUsers)
      throw new MamError('license_limit', `The license allows ${maxUsers} users and ${users} exist; remove a user or install a license with a higher max_users`, {
        limit: 'max_users',
        max_users: maxUsers,
        users,
      })
  }

  /** bytes stored in projects, as their sizes are measured (the trash included: it still takes space) */
  async storedBytes(knex: Knex): Promise<number> {
    const [{ total }] = await knex('projects').sum({ total: 'size' })
    return Number(total ?? 0)
  }

  /**
   * A space limit (projects' `spaceLimits`): `ahead` refuses an upload early, `charged` in the
   * transaction that added its bytes to a project, after that update. On PostgreSQL `charged` takes
   * a transaction lock first; the sum read after it (read committed: a fresh snapshot) sees every
   * upload that committed before, so two uploads cannot both fit into the same last bytes.
   */
  readonly storageLimit = {
    ahead: async (knex: Knex, extra: number) => {
      if (this.limits().maxStorageBytes !== null) this.assertStorage(extra, await this.storedBytes(knex))
    },
    charged: async (trx: Knex, extra: number) => {
      if (this.limits().maxStorageBytes === null) return
      if (this.dialect === 'postgresql') await trx.raw('select pg_advisory_xact_lock(?, ?)', [LICENSE_LOCK, STORAGE_LOCK])
      // the sum includes this transaction's own charge
      const stored = await this.storedBytes(trx)
      this.assertStorage(extra, stored - extra)
    },
  }

  private assertStorage(extra: number, stored: number): void {
    const { maxStorageBytes } = this.limits()
    if (maxStorageBytes === null || stored + extra <= maxStorageBytes) return
    throw new MamError(
      'license_limit',
      `The license allows ${maxStorageBytes} bytes in projects; ${stored} are stored and this needs ${extra} more. Free space or install a license with a higher max_storage_bytes`,
      { limit: 'max_storage_bytes', max_storage_bytes: maxStorageBytes, stored_bytes: stored, needed_bytes: extra },
    )
  }

  /** what is used against each limit, for GET /license */
  async usage(em: EntityManager, knex: Knex) {
    const { maxUsers, maxStorageBytes, maxSites } = this.limits()
    return {
      users: { used: await em.count(User), limit: maxUsers },
      storage_bytes: { used: await this.storedBytes(knex), limit: maxStorageBytes },
      // this server is the one site: federation of several sites is not part of this tree
      sites: { used: 1, limit: maxSites },
    }
  }

  /** GET /license */
  view(usage: Awaited<ReturnType<LicenseService['usage']>>) {
    const l = this.current?.license
    if (!l)
      return {
        status: 'open',
        detail: 'No license is installed: the built-in plugins run (the project is open); modules sold separately need their activation key',
        machine_id: this.machineId,
        modules: [],
        licensable_modules: this.licensable(),
        usage,
      }
    const status = !this.current!.verified ? 'invalid' : Date.parse(l.expires_at) > Date.now() ? 'valid' : 'expired'
    return {
      status,
      customer: l.customer,
      machine_id: this.machineId,
      expires_at: l.expires_at,
      issued_at: l.issued_at ?? null,
      modules: l.modules,
      licensable_modules: this.licensable(),
      max_users: l.max_users,
      max_sites: l.max_sites,
      max_storage_bytes: l.max_storage_bytes ?? null,
      users: usage.users.used,
      usage,
      installed_at: iso(this.current!.installedAt),
    }
  }
}

// keys of the PostgreSQL transaction locks that serialise the checks of a limit
const LICENSE_LOCK = 7_005_016
const USERS_LOCK = 1
const STORAGE_LOCK = 2

export const noLicenseFile = () => invalidParam('license', 'is required: the license file (its text, or its object with `signature`)')
