import type { Server } from 'node:http'
import { asFunction, asValue, createContainer, InjectionMode, type AwilixContainer } from 'awilix'
import type Koa from 'koa'
import pino, { type Logger } from 'pino'
// loaded eagerly, not in listen() with PostgreSQL only: test/core/jobs.test.ts's hand-back in a
// completion batch (queue.settleMany on PostgreSQL) failed when 'pg' was first imported later;
// cause not found yet, the ~0.2 s it would save a SQLite start-up is left
import pg from 'pg'
import { resolveConfig, type MamConfig, type MamConfigInput } from './config.js'
import { EventBus } from './events.js'
import { openDatabase, type Database } from './db/orm.js'
import { migrate } from './db/migrator.js'
import { assertReachable, loadPlugins, type LoadedPlugins } from './plugin/loader.js'
import type { PluginDefinition } from './plugin/contract.js'
import { coreServices, type ServiceRef, type ServiceResolver } from './plugin/services.js'
import { BootError, faultSettings } from './errors.js'
import { AUTH_CHANNEL, AuthService } from './auth/service.js'
import { LoginThrottle } from './auth/throttle.js'
import { UserViews } from './auth/user-views.js'
import { StorageRegistry } from './storage/storages.js'
import { MediaTools } from './media/tools.js'
import { FeatureService } from './system/features.js'
import { corePlugin } from './system/plugin.js'
import { JobQueue, NOTIFY_CHANNEL } from './jobs/queue.js'
import { JobRunner } from './jobs/runner.js'
import type { JobRow } from './jobs/types.js'
import { JobService } from './jobs/service.js'
import { Outbox } from './outbox.js'
import { jobEventPayload, jobFailed, jobFinished } from './system/events.js'
import { buildHttpApp } from './http/app.js'
import { removeStaleUploads, uploadDirOf } from './http/uploads.js'
import { RequestObservers } from './http/metrics.js'
import { HealthChecks } from './system/health.js'

export interface RuntimeOptions {
  /** feature plugins; the core plugin is always added first */
  plugins?: PluginDefinition[]
  config?: MamConfigInput
  logger?: Logger
  /** run pending migrations at start (default true) */
  migrate?: boolean
  /** claim and run jobs in this process (default true) */
  runJobs?: boolean
}

export function createLogger(config: Pick<MamConfig, 'logLevel'>): Logger {
  return pino({ level: config.logLevel, base: { app: 'mamkit' } }, droppingWhenBroken(process.stdout))
}

/**
 * Log lines to a stream that drops them once the stream broke (the reader of a pipe went away)
 * instead of retrying: pino's own destination retries a failed write forever on exit, which kept
 * servers whose parent had exited from ever ending. Says so once on stderr if that still works.
 */
let stderrGuarded = false
function droppingWhenBroken(stream: NodeJS.WriteStream): { write(line: string): void } {
  let broken = false
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (broken) return
    broken = true
    if (stream !== process.stderr && !process.stderr.destroyed) process.stderr.write(`mamkit: log output failed (${err.code ?? err.message}); log lines are dropped from now on\n`)
  })
  // a broken stderr must not end the process either
  if (!stderrGuarded) process.stderr.on('error', () => {})
  stderrGuarded = true
  return { write: (line) => void (broken || stream.destroyed || stream.write(line)) }
}

/** milliseconds since the previous call, by the name given to each step; `all()` lists them */
function phaseClock(): ((name: string) => void) & { all(): Record<string, number> } {
  const phases: Record<string, number> = {}
  let last = performance.now()
  const mark = (name: string) => {
    const now = performance.now()
    phases[name] = Math.round(now - last)
    last = now
  }
  return Object.assign(mark, { all: () => phases })
}

/** Registers every plugin without touching a database: enough to list routes or check a plugin. */
export async function describePlugins(options: RuntimeOptions = {}): Promise<{ config: MamConfig; loaded: LoadedPlugins }> {
  const config = resolveConfig(options.config)
  const log = options.logger ?? createLogger({ logLevel: 'silent' })
  const loaded = await loadPlugins([corePlugin, ...(options.plugins ?? [])], { config, log, events: new EventBus() })
  return { config, loaded }
}

/**
 * One mamkit instance: plugins loaded, database open and migrated, DI container, HTTP app and job
 * runner. Hosts (the CLI server, embedding adapters, tests) create one and mount `callback()`.
 */
export class MamRuntime {
  private listener?: pg.Client
  private closing = false
  private constructor(
    readonly config: MamConfig,
    readonly log: Logger,
    readonly events: EventBus,
    readonly loaded: LoadedPlugins,
    readonly db: Database,
    readonly container: AwilixContainer,
    readonly features: FeatureService,
    readonly jobs: JobService,
    readonly runner: JobRunner,
    readonly app: Koa,
  ) {}

  static async create(options: RuntimeOptions = {}): Promise<MamRuntime> {
    const config = resolveConfig(options.config)
    const log = options.logger ?? createLogger(config)
    const step = phaseClock()
    const events = new EventBus()
    const loaded = await loadPlugins([corePlugin, ...(options.plugins ?? [])], { config, log, events })
    step('plugins')
    const db = await openDatabase({
      dataDir: config.dataDir,
      databaseUrl: config.databaseUrl,
      entities: loaded.plugins.flatMap((p) => p.entities ?? []),
      waitMs: config.database.waitMs,
      log: log.child({ part: 'database' }),
    })
    faultSettings.retryAfterSeconds = config.database.retryAfterSeconds
    step('database')
    try {
      if (options.migrate !== false) {
        const applied = await migrate(db, loaded.plugins.map((p) => ({ plugin: p.name, migrations: p.migrations ?? [] })))
        if (applied.length) log.info({ applied }, 'migrations applied')
      }
      step('migrations')
      const features = new FeatureService(db.knex, loaded.plugins, events)
      await features.sync()
      step('features')
      const queue = new JobQueue(db.knex, db.dialect, events, { maxAttempts: config.jobs.maxAttempts })
      for (const job of loaded.jobs.values()) if (job.recurring) queue.recurring.set(job.type, { ...job.recurring, kind: job.kind ?? 'generic', maxAttempts: job.maxAttempts })
      const jobs = new JobService(queue, loaded.jobs)
      const outbox = new Outbox(db.knex, db.dialect, events, jobs, (p) => features.isActive(p), log.child({ part: 'outbox' }), { leaseMs: config.jobs.leaseMs })
      // a user's job that ends publishes job.finished / job.failed in the transaction that ends it
      // a finished asset job (one per file analysed) is no news; a failed one (a proxy that failed) is
      const newsworthy = (job: Pick<JobRow, 'type' | 'kind' | 'user_id' | 'state'>) =>
        job.user_id !== null && loaded.jobs.has(job.type) && !(job.state === 'finished' && job.kind === 'asset')
      // the others end many to a statement, without a transaction (the runner's completion batches)
      queue.onSettledWants = newsworthy
      queue.onSettled = async (trx, job) => {
        if (!newsworthy(job)) return
        await outbox.publish(trx, job.state === 'failed' ? jobFailed : jobFinished, jobEventPayload(job), { subjectId: job.id })
      }
      const container = createContainer({ injectionMode: InjectionMode.PROXY, strict: true })
      const storages = new StorageRegistry(config)
      const runner = new JobRunner(queue, loaded.jobs, container, config, events, log, (p) => features.isActive(p))
      jobs.attachRunner(runner)
      const core: Record<keyof typeof coreServices, unknown> = {
        config,
        log,
        events,
        db,
        knex: db.knex,
        em: undefined, // scoped: below
        jobs,
        outbox,
        features,
        auth: new AuthService(db.knex, config, events, db.dialect),
        loginThrottle: new LoginThrottle(),
        userViews: new UserViews(),
        storages,
        mediaTools: new MediaTools(),
        plugins: loaded.plugins,
        capabilities: loaded.capabilities,
        settings: loaded.settings,
        routes: loaded.routes,
        requests: new RequestObservers(),
        health: new HealthChecks(db, loaded.plugins, runner, storages, config, options.runJobs !== false),
      }
      for (const [key, value] of Object.entries(core)) {
        if (key === 'em') continue
        container.register(coreServices[key as keyof typeof coreServices].id, asValue(value))
        container.register(key, asValue(value)) // legacy string key, until every plugin resolves by ref
      }
      const fork = asFunction(() => db.orm.em.fork()).scoped()
      container.register({ [coreServices.em.id]: fork, em: asFunction((c: any) => c[coreServices.em.id]).scoped(), orm: asValue(db.orm) })
      registerPluginServices(container, loaded)
      loaded.resolveRoot = (id) => container.resolve(id)
      step('services')
      for (const phase of ['start', 'started'] as const) {
        for (const plugin of loaded.plugins) {
          if (!plugin[phase]) continue
          const scope = container.createScope()
          const reachable = loaded.reachable.get(plugin.name)!
          const resolve = (ref: ServiceRef<unknown> | string) => {
            if (typeof ref === 'string') return scope.resolve(ref)
            assertReachable(plugin.name, reachable, ref)
            return scope.resolve(ref.id)
          }
          await plugin[phase]!({ resolve: resolve as any, config, log: log.child({ plugin: plugin.name }) })
        }
      }
      step('plugin start')
      // what a killed process was receiving when it died; newer files may be another process's uploads in progress
      await removeStaleUploads(uploadDirOf(config), Date.now() - process.uptime() * 1000)
      const app = buildHttpApp({
        routes: loaded.routes,
        container,
        auth: container.resolve<AuthService>(coreServices.auth.id),
        features,
        config,
        log,
        credentials: loaded.credentials,
        observers: container.resolve<RequestObservers>(coreServices.requests.id),
      })
      step('http app')
      const runtime = new MamRuntime(config, log, events, loaded, db, container, features, jobs, runner, app)
      await outbox.resume() // events a stopped process had not handed out yet
      if (options.runJobs !== false) await runtime.startJobs()
      else if (db.dialect === 'postgresql') await runtime.listen() // credential revocations from other processes
      step('jobs')
      // where a start-up spends its time (a restart's cost is what a killed or upgraded server is away for)
      log.info({ phasesMs: step.all() }, 'runtime started')
      return runtime
    } catch (err) {
      await db.close()
      throw err
    }
  }

  /** the Node request listener: `http.createServer(runtime.callback())` */
  callback() {
    return this.app.callback()
  }

  private async startJobs() {
    this.runner.start()
    if (this.db.dialect === 'postgresql') await this.listen()
  }

  /**
   * Jobs enqueued by another process wake this one at once instead of at the next poll, and
   * credentials revoked there leave this process's cache at once (`AUTH_CHANNEL`). A lost
   * connection (PostgreSQL restarted) is replaced; polling and the cache TTL cover the gap, so this never fails.
   */
  private async listen(): Promise<void> {
    if (this.closing) return
    const client = new pg.Client({ connectionString: this.config.databaseUrl })
    this.listener = client
    let replaced = false
    const replace = (err?: Error) => {
      if (replaced || this.closing) return
      replaced = true
      this.log.warn({ err }, 'job notification listener lost; polling continues until it is back')
      client.end().catch(() => {})
      setTimeout(() => void this.listen(), Math.max(this.config.jobs.pollMs, 1000)).unref()
    }
    client.on('error', replace)
    client.on('end', () => replace())
    client.on('notification', (msg) => {
      if (msg.channel === AUTH_CHANNEL) this.container.resolve<AuthService>(coreServices.auth.id).applyRemote(msg.payload ?? '')
      else this.runner.notified(msg.payload ?? '')
    })
    try {
      await client.connect()
      // jobs last: test/core/jobs.test.ts finds the listener by its last statement
      await client.query(`listen ${AUTH_CHANNEL}`)
      await client.query(`listen ${NOTIFY_CHANNEL}`)
      this.container.resolve<AuthService>(coreServices.auth.id).applyRemote('all') // anything revoked while nobody listened
      this.runner.wake() // anything enqueued while nobody listened
    } catch (err) {
      replace(err as Error)
    }
  }

  /** Stops jobs (handing running ones back to the queue) and closes the database. */
  async close(): Promise<void> {
    this.closing = true
    await this.runner.close()
    await this.listener?.end().catch(() => {})
    this.container.resolve<MediaTools>(coreServices.mediaTools.id).close()
    await this.container.dispose()
    await this.db.close()
  }
}

/**
 * Registers the plugins' services. A ServiceRef's factory gets a resolver that reaches only the
 * core and the plugins its plugin depends on; singletons are built here, at boot, so a factory that
 * reaches further fails the boot with an error naming the plugin and the service.
 */
function registerPluginServices(container: AwilixContainer, loaded: LoadedPlugins) {
  for (const [id, service] of loaded.services) {
    if (service.resolver) {
      container.register(id, service.resolver as any)
      continue
    }
    const make = (cradle: Record<string, unknown>) => {
      const resolve: ServiceResolver = <T>(ref: ServiceRef<T>) => {
        assertReachable(service.plugin, service.reachable, ref)
        return cradle[ref.id] as T
      }
      return service.factory!(resolve)
    }
    let resolver = asFunction(make)
    if (service.dispose) resolver = resolver.disposer(service.dispose as (value: unknown) => void | Promise<void>)
    container.register(id, service.lifetime === 'request' ? resolver.scoped() : resolver.singleton())
  }
  for (const [id, service] of loaded.services) {
    if (service.resolver || service.lifetime === 'request') continue
    try {
      container.resolve(id)
    } catch (err) {
      if (err instanceof BootError) throw err
      throw new BootError('SERVICE_INVALID', service.plugin, `service "${id}" could not be built: ${(err as Error).message}`)
    }
  }
}

/** Stops accepting connections and waits for in-flight requests (SIGTERM). */
export function closeServer(server: Server, deadlineMs = 10_000): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      server.closeAllConnections()
      resolve()
    }, deadlineMs)
    timer.unref()
    server.close(() => {
      clearTimeout(timer)
      resolve()
    })
    server.closeIdleConnections()
  })
}
