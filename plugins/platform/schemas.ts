import { Type } from 'typebox'
import { OneOf, PageInput } from '../../core/index.js'

const MB = 1024 * 1024

/**
 * The platform plugin's settings (GET/PUT /settings, key `platform`; or `plugins.platform` in the
 * configuration file). `writeOnly` members are secrets: masked when shown, redacted in the audit.
 * `readOnly` members come from the configuration file only and cannot be changed over HTTP.
 */
export const PlatformSettings = Type.Object(
  {
    license: Type.Object(
      {
        public_key: Type.String({
          readOnly: true,
          default: '',
          maxLength: 2000,
          description: 'Ed25519 public key that signs licenses (PEM, or base64 of the 32 raw bytes); configuration file only',
        }),
      },
      { default: {}, additionalProperties: false },
    ),
    metrics: Type.Object(
      {
        loopback: Type.Boolean({ default: true, description: 'GET /metrics answers requests from this machine (127.0.0.1, ::1)' }),
        token: Type.String({ default: '', maxLength: 200, writeOnly: true, description: 'GET /metrics also answers `Authorization: Bearer <token>`; empty: no token' }),
      },
      { default: {}, additionalProperties: false },
    ),
    branding: Type.Object(
      {
        max_bytes: Type.Integer({ default: 20 * MB, minimum: 1024, maximum: 200 * MB, description: 'largest logo, background or watermark upload in bytes (413 above)' }),
        max_pixels: Type.Integer({ default: 50_000_000, minimum: 10_000, maximum: 268_402_689, description: 'largest image in pixels (width × height) the server decodes (413 above)' }),
      },
      { default: {}, additionalProperties: false },
    ),
    chat: Type.Object(
      {
        api_url: Type.String({ default: '', maxLength: 500, pattern: '^(|https?://.+)$', description: 'base URL of the chat workspace Web API (Slack-style: `<url>/users.list`); empty: not configured' }),
        token: Type.String({ default: '', maxLength: 500, writeOnly: true, description: 'bot token for the chat Web API' }),
      },
      { default: {}, additionalProperties: false },
    ),
    library_ingests: Type.Object(
      {
        poll_ms: Type.Integer({ default: 1000, minimum: 50, maximum: 60_000, description: 'how often each process looks for library ingests whose scan is due (each ingest has its own interval_seconds)' }),
      },
      { default: {}, additionalProperties: false },
    ),
    subscription: Type.Object(
      {
        instance: Type.String({ default: 'default', minLength: 1, maxLength: 100, description: 'name of this hosted instance; traffic is counted per instance' }),
        subscribed: Type.Boolean({ default: false, description: 'whether the instance is subscribed (POST /instance_subscription, PUT /instance_settings)' }),
        plan: Type.String({ default: 'self-hosted', maxLength: 100, description: 'plan shown by GET /subscription/show' }),
        options: Type.Array(Type.String({ maxLength: 100 }), { default: [], maxItems: 100, description: 'options of the plan (GET /subscription/options)' }),
        traffic_limit_bytes: Type.Integer({ default: 0, minimum: 0, description: 'bytes the instance may serve per calendar month; 0: no limit' }),
      },
      { default: {}, additionalProperties: false },
    ),
  },
  { additionalProperties: false },
)

export const SettingsInput = Type.Object(
  { settings: Type.Record(Type.String({ pattern: '^[a-z][a-z0-9-]*$' }), Type.Record(Type.String(), Type.Unknown())) },
  { additionalProperties: false },
)

export const ChangesQuery = Type.Object(
  {
    ...PageInput,
    plugin: Type.Optional(Type.String({ maxLength: 100 })),
  },
  { additionalProperties: false },
)

export const ModuleList = Type.Array(Type.String({ pattern: '^[a-z][a-z0-9-]*$', maxLength: 100 }), { maxItems: 200 })

/** the signed part of a license file; canonical JSON of it is what the signature covers */
export const LicenseBody = Type.Object(
  {
    customer: Type.String({ minLength: 1, maxLength: 200 }),
    machine_id: Type.String({ minLength: 1, maxLength: 100 }),
    expires_at: Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}T', maxLength: 40 }),
    modules: ModuleList,
    max_users: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]),
    max_sites: Type.Union([Type.Integer({ minimum: 0 }), Type.Null()]),
    /** bytes all projects together may hold (their measured sizes); absent or null: no limit */
    max_storage_bytes: Type.Optional(Type.Union([Type.Integer({ minimum: 0 }), Type.Null()])),
    issued_at: Type.Optional(Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}T', maxLength: 40 })),
  },
  { additionalProperties: false },
)

export const LicenseFile = Type.Object({ license: LicenseBody, signature: Type.String({ minLength: 1, maxLength: 200 }) }, { additionalProperties: false })

export const LicenseInput = Type.Object(
  {
    /** the license file: its text, or its object with `signature` beside it */
    license: Type.Optional(Type.Union([Type.String({ maxLength: 65_536 }), Type.Record(Type.String(), Type.Unknown())])),
    signature: Type.Optional(Type.String({ maxLength: 200 })),
  },
  { additionalProperties: false },
)

export const ChatQuery = Type.Object({ username: Type.String({ minLength: 1, maxLength: 200 }) }, { additionalProperties: false })

export const InstanceInput = Type.Object(
  {
    instance_subscription: Type.Object(
      {
        instance: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
        plan: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
        options: Type.Optional(Type.Array(Type.String({ maxLength: 100 }), { maxItems: 100 })),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
)

export const InstanceSettingsInput = Type.Object(
  { instance_settings: Type.Object({ subscribed: Type.Boolean() }, { additionalProperties: false }) },
  { additionalProperties: false },
)

export const BrandingKind = OneOf(['logo', 'default_background', 'default_gallery_background', 'watermark'] as const)
