import { Type, type Static } from 'typebox'
import { DEFAULT_PROXY_SETTINGS as D } from './proxies.js'

/** a frame height x264 and ProRes take: even (4:2:0 and 4:2:2 halve the chroma width) */
const Height = (fallback: number, description: string) => Type.Integer({ minimum: 32, maximum: 4320, multipleOf: 2, default: fallback, description })

/**
 * The assets plugin's settings (`config.plugins.assets`, or GET/PUT /settings under `assets`),
 * read through `api.settings()`. The proxy members are read by each job, so a change over HTTP
 * applies to the next encode; the encode concurrency sizes the job queue at boot, so it comes from
 * the configuration file only.
 */
export const AssetSettings = Type.Object(
  {
    encodeConcurrency: Type.Integer({
      minimum: 1,
      maximum: 64,
      default: 1,
      readOnly: true,
      description: 'proxy and burn-in encodes at once in this process (one per two cores keeps ffmpeg near its real-time multiple); configuration file only',
    }),
    proxy: Type.Object(
      {
        height: Height(D.height, 'low-res height in pixels (never upscaled)'),
        crf: Type.Integer({ minimum: 0, maximum: 51, default: D.crf, description: 'x264 constant rate factor of the low-res proxy (lower: better and larger)' }),
        maxBitrateKbps: Type.Union([Type.Integer({ minimum: 1, maximum: 1_000_000 }), Type.Null()], {
          default: D.maxBitrateKbps,
          description: 'caps the low-res video bit rate (kbit/s, VBV buffer of two seconds); null: the quality (crf) alone decides',
        }),
        audioBitrate: Type.String({ pattern: '^[1-9][0-9]{0,3}k$', default: D.audioBitrate, description: 'AAC bit rate of low-res and audio proxies, e.g. 128k' }),
        editingHeight: Height(D.editingHeight, 'editing (ProRes Proxy) height in pixels (never upscaled)'),
        thumbnails: Type.Integer({ minimum: 1, maximum: 100, default: D.thumbnails, description: 'frames in the thumbnail strip' }),
      },
      { default: {}, additionalProperties: false },
    ),
  },
  { default: {} },
)

export type AssetSettingsValue = Static<typeof AssetSettings>
