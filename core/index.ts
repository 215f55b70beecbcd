/**
 * The public core API, `mamkit`: what built-in and partner plugins import (`import { definePlugin,
 * Type } from 'mamkit'`). Plugins never import a core module by its path: test/core/public-api.test.ts
 * fails on such a deep import, and core/api-report.d.ts shows every change of this file in review.
 * Add an export here only for something a plugin needs and may rely on across releases.
 */

// plugin contract: definition, routes, services, settings
export { Type } from 'typebox'
export type { Static, TSchema } from 'typebox'
export { definePlugin } from './plugin/contract.js'
export type { Access, CredentialRegistrar, Handler, JobRegistrar, PluginDefinition, RegisterApi, RouteOptions, RouteContext, StartContext, UserOf } from './plugin/contract.js'
export type { CredentialResolver } from './http/credentials.js'
export { createServiceRef, coreServices, aliasOf, type ServiceRef, type ServiceResolver } from './plugin/services.js'
export type { PluginSettings } from './plugin/settings.js'
export type { FeatureService } from './system/features.js'

// errors: one table of codes, problem bodies
export * from './errors.js'

// HTTP: context, input schemas, paging, responses, validation
export type { MamContext, UploadedFile, AppClient } from './http/context.js'
export { IdParam, IdParams, NoInput, Page, Nullable, OneOf } from './http/schemas.js'
export { paginate, PageInput, jsonCursor, integerPairCursor, type PageQuery, type CursorCodec } from './http/paging.js'
export { accepted, acceptedJob, created } from './http/responses.js'
export { jsonText, type JsonText } from './http/respond.js'
export { check as checkParams, compileSchema } from './http/validation.js'
export type { ObservedRequest } from './http/metrics.js'
export { idempotent } from './idempotency/idempotent.js'
export { openApiDocument } from './system/openapi.js'

// database: entities, migrations, rows
export type { Migration } from './db/migrator.js'
export { timestamps } from './db/migrator.js'
export { BaseEntity, baseProperties, iso } from './db/entity.js'
export type { EntityManager, Database, Dialect, Knex } from './db/orm.js'
export { sqliteFile } from './db/orm.js'
export { andThen, column, columnJson, eachInTurn, escapeLike, containsIgnoringCase, limitSql, pageTotal, preparedRead, preparedReadIn, type MaybePromise, type PreparedRead } from './db/rows.js'
export { isUniqueViolation } from './db/unique.js'

// jobs and events
export { defineJob, type JobType } from './jobs/define.js'
export { stopFlagOf } from './jobs/stop-flag.js'
export type { JobContext, JobDefinition, JobFilter, JobRow, JobState, JobKind, EnqueueOptions } from './jobs/types.js'
export type { JobService } from './jobs/service.js'
export type { JobRunnerControl, RunningJob } from './jobs/runner.js'
export { serializeJob } from './system/status-routes.js'
export { defineEvent, type EventAudience, type EventType, type PublishedEvent } from './events.js'
export type { EventBus, EventMap } from './events.js'
export type { Outbox } from './outbox.js'

// users, credentials, access
export type { Principal, PrincipalKinds, PrincipalScope, PrincipalVia } from './auth/principal.js'
export { can } from './auth/principal.js'
export type { AuthService } from './auth/service.js'
export { User, Role, ApiKey, AuthToken } from './auth/entities.js'
export { createUser, createApiKey, createAuthToken, endLoginSessions, serializeUser, userViewOfRow, USER_VIEW_COLUMNS, ADMIN_ROLE, USER_ROLE } from './auth/accounts.js'
export { hashPassword, verifyPassword, sha256 } from './auth/secrets.js'
export { UserViews, type UserDecorator, type UserJson, type UserViewer } from './auth/user-views.js'
export { LoginThrottle } from './auth/throttle.js'
export { clientApp } from './system/session-routes.js'

// storage: paths that never escape their storage, exclusive names, the journal of file operations
export { resolveInside, relativeSegments, isInside, safeName, openInside, InsideRoot, uploadName, makeDirs, type OpenedFile } from './storage/paths.js'
export { StorageRegistry, type Storage } from './storage/storages.js'
export { linkExclusive, moveExclusive } from './storage/exclusive.js'
export { identityOf, sameFile, type FileIdentity } from './storage/identity.js'
export { StorageJournal, type JournalEntry } from './storage/journal.js'
export { COPY_PAGE, COPY_PAGE_WORKER, type CopyPageTask, type CopyPageResult, type PageFile, type PageOutcome, type PageSums, type RemoveUnchangedTask, type Removal, type UnchangedFile } from './storage/copy-page.js'
export { ChunkSums, sumsOrThrow, SUMS_WORKER, type ContentSums, type SumsWanted, type DescriptorSumsTask, type DescriptorSumsResult } from './storage/sums.js'

// media tools and sealing of secrets at rest
export type { MediaTools } from './media/tools.js'
export { toolVersions } from './system/plugin.js'
export { deriveKey, seal, open as unseal } from './crypto.js'

// configuration and the runtime (embedding)
export type { MamConfig, MamConfigInput } from './config.js'
export { MamRuntime, describePlugins, closeServer, type RuntimeOptions } from './runtime.js'
