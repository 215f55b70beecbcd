import { mkdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs'
import { randomBytes } from 'node:crypto'
import path from 'node:path'
import { BootError } from './errors.js'

export interface MamConfig {
  /** everything the server writes lives below this folder */
  dataDir: string
  /** postgres://… for PostgreSQL; unset for the embedded SQLite file in dataDir */
  databaseUrl?: string
  port: number
  host: string
  logLevel: string
  /** a 32-byte key that encrypts secrets at rest; kept in dataDir/secret.key */
  secretKey: Buffer
  limits: {
    jsonBytes: number
    formBytes: number
    uploadBytes: number
    queryDepth: number
    queryParameters: number
    arrayLength: number
    pageSize: number
  }
  jobs: {
    /** a running job whose lease lapses (process died) is retried */
    leaseMs: number
    pollMs: number
    concurrency: number
    maxAttempts: number
    /** piscina threads for CPU work */
    threads: number
    /** a job that met a full disk runs again after this, without counting an attempt */
    diskFullRetryMs: number
  }
  http: {
    /** the request line and headers must arrive within this (slow-header clients hold no socket longer) */
    headersTimeoutMs: number
    /**
     * a JSON or form body must arrive within this (408 otherwise); an upload may take as long as it
     * keeps moving bytes, and this is then the longest pause allowed; 0: no limit
     */
    requestTimeoutMs: number
    /**
     * graceful shutdown (SIGTERM) ends within this: past it, running jobs are released (their leases
     * lapse and another process retries them) and the process exits non-zero naming what was still open
     */
    shutdownTimeoutMs: number
    /** an idle keep-alive connection is closed after this (above the 60 s of common load balancers) */
    keepAliveTimeoutMs: number
  }
  auth: {
    /** how long a verified credential is trusted before the database is asked again */
    cacheTtlMs: number
    tokenTtlDays: number
  }
  database: {
    /**
     * the longest a request waits for the database: a pooled connection (PostgreSQL), a new
     * connection to be made, or another process's write lock (SQLite busy_timeout). Past it the
     * request answers 503 with Retry-After instead of hanging through an outage.
     */
    waitMs: number
    /** the Retry-After (seconds) of a 503 that an outage or a lock answered */
    retryAfterSeconds: number
  }
  /**
   * Named storages where projects live: name → folder. `default` (`<dataDir>/storage/default`)
   * is always there unless named here. Merged from the config files' `storages`, their old spelling
   * `plugins.storage.storages`, and `MAMKIT_STORAGES=name=/folder,other=/folder2` (which wins per name);
   * checked at boot (a bad name or folder is a `SETTINGS_INVALID` boot error naming it).
   */
  storages: Record<string, string>
  /** anything else, keyed by plugin name */
  plugins: Record<string, Record<string, unknown>>
}

export type MamConfigInput = Partial<Omit<MamConfig, 'limits' | 'jobs' | 'http' | 'auth' | 'database' | 'secretKey'>> & {
  database?: Partial<MamConfig['database']>
  limits?: Partial<MamConfig['limits']>
  jobs?: Partial<MamConfig['jobs']>
  http?: Partial<MamConfig['http']>
  auth?: Partial<MamConfig['auth']>
  secretKey?: Buffer
}

const num = (v: string | undefined) => (v === undefined || v === '' ? undefined : Number(v))

/** Options win over environment variables, which win over defaults. */
export function resolveConfig(input: MamConfigInput = {}, env: NodeJS.ProcessEnv = process.env): MamConfig {
  const dataDir = path.resolve(input.dataDir ?? env.MAMKIT_DATA_DIR ?? 'data')
  mkdirSync(dataDir, { recursive: true })
  return {
    dataDir,
    databaseUrl: input.databaseUrl ?? (env.MAMKIT_DATABASE_URL || undefined),
    port: input.port ?? num(env.MAMKIT_PORT) ?? 3000,
    host: input.host ?? env.MAMKIT_HOST ?? '127.0.0.1',
    logLevel: input.logLevel ?? env.MAMKIT_LOG_LEVEL ?? 'info',
    secretKey: input.secretKey ?? loadSecretKey(dataDir),
    limits: {
      jsonBytes: 1 << 20,
      formBytes: 1 << 20,
      uploadBytes: 50 * (1 << 30),
      queryDepth: 6,
      queryParameters: 1000,
      arrayLength: 1000,
      pageSize: 500,
      ...input.limits,
    },
    jobs: {
      leaseMs: num(env.MAMKIT_JOB_LEASE_MS) ?? 30_000,
      pollMs: num(env.MAMKIT_JOB_POLL_MS) ?? 1000,
      concurrency: num(env.MAMKIT_JOB_CONCURRENCY) ?? 4,
      maxAttempts: 5,
      threads: 2,
      diskFullRetryMs: num(env.MAMKIT_JOB_DISK_FULL_RETRY_MS) ?? 30_000,
      ...input.jobs,
    },
    http: {
      headersTimeoutMs: num(env.MAMKIT_HEADERS_TIMEOUT_MS) ?? 15_000,
      requestTimeoutMs: num(env.MAMKIT_REQUEST_TIMEOUT_MS) ?? 30_000,
      keepAliveTimeoutMs: num(env.MAMKIT_KEEP_ALIVE_TIMEOUT_MS) ?? 65_000,
      shutdownTimeoutMs: num(env.MAMKIT_SHUTDOWN_TIMEOUT_MS) ?? 30_000,
      ...input.http,
    },
    auth: { cacheTtlMs: 5000, tokenTtlDays: 30, ...input.auth },
    database: {
      waitMs: num(env.MAMKIT_DB_WAIT_MS) ?? 15_000,
      retryAfterSeconds: num(env.MAMKIT_DB_RETRY_AFTER_S) ?? 5,
      ...input.database,
    },
    storages: storagesOf(input, env),
    plugins: input.plugins ?? {},
  }
}

const STORAGE_NAME = /^[A-Za-z0-9_-]{1,64}$/
const badStorage = (where: string, why: string) => new BootError('SETTINGS_INVALID', 'core', `setting ${where} ${why}`)

/** the named storages of every source, checked; later sources win per name (the environment last, as before) */
function storagesOf(input: MamConfigInput, env: NodeJS.ProcessEnv): Record<string, string> {
  const storages: Record<string, string> = {}
  const add = (where: string, name: string, folder: unknown) => {
    if (!STORAGE_NAME.test(name)) throw badStorage(where, `names a storage "${name}": names are 1 to 64 letters, digits, _ or -`)
    if (typeof folder !== 'string' || folder.trim() === '') throw badStorage(where, 'must be a folder (a non-empty path)')
    storages[name] = folder.trim()
  }
  const addAll = (where: string, value: unknown) => {
    if (value === undefined || value === null) return
    if (typeof value !== 'object' || Array.isArray(value)) throw badStorage(where, 'must be an object of storage names to folders ({"media_1": "/mnt/media1"})')
    for (const [name, folder] of Object.entries(value)) add(`${where}.${name}`, name, folder)
  }
  addAll('plugins.storage.storages', input.plugins?.storage?.storages) // the old spelling, still read
  addAll('storages', input.storages)
  for (const pair of (env.MAMKIT_STORAGES ?? '').split(',').map((p) => p.trim()).filter(Boolean)) {
    const eq = pair.indexOf('=')
    if (eq <= 0) throw badStorage('MAMKIT_STORAGES', `has "${pair}", which is not name=/folder`)
    const name = pair.slice(0, eq).trim()
    add(`MAMKIT_STORAGES (${name})`, name, pair.slice(eq + 1))
  }
  return storages
}

function loadSecretKey(dataDir: string): Buffer {
  const file = path.join(dataDir, 'secret.key')
  if (!existsSync(file)) {
    try {
      writeFileSync(file, randomBytes(32).toString('base64') + '\n', { mode: 0o600, flag: 'wx' })
    } catch (err) {
      // another process (a CLI command beside a running server) created it first
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
    }
  }
  return Buffer.from(readFileSync(file, 'utf8').trim(), 'base64')
}
