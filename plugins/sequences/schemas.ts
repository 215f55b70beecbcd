import { Type } from 'typebox'
import { IdParam, Nullable, PageInput } from '../../core/index.js'
import { MAX_MARKERS } from './service.js'

/** `25`, `29.97`, `"30000/1001"` */
const FrameRate = Type.Union([Type.Number({ exclusiveMinimum: 0, maximum: 1000 }), Type.String({ minLength: 1, maxLength: 20 })])
/** a frame number from the asset's first frame, or a timecode in the asset's start timecode */
const FrameOrTimecode = Type.Union([Type.Integer({ minimum: 0, maximum: 2147483647 }), Type.String({ minLength: 1, maxLength: 20 })])

export const MarkerInput = Type.Object(
  {
    /** frames from the sequence's start */
    frame: Type.Integer({ minimum: 0, maximum: 2147483647 }),
    duration: Type.Optional(Type.Integer({ minimum: 0, maximum: 2147483647 })),
    name: Type.Optional(Type.String({ maxLength: 255 })),
    comment: Type.Optional(Type.String({ maxLength: 10_000 })),
    color: Type.Optional(Type.String({ maxLength: 20 })),
  },
  { additionalProperties: false },
)

const sequenceFields = {
  project_id: Type.Optional(IdParam),
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
  frame_rate: Type.Optional(FrameRate),
  drop_frame: Type.Optional(Type.Boolean()),
  start_timecode: Type.Optional(Type.String({ minLength: 1, maxLength: 20 })),
  width: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: 16384 }))),
  height: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: 16384 }))),
  markers: Type.Optional(Type.Array(MarkerInput, { maxItems: MAX_MARKERS })),
  remove_clip_ids: Type.Optional(Type.Array(IdParam, { maxItems: 10_000 })),
}
export const SequenceInput = Type.Object({ preditor_sequence: Type.Optional(Type.Object(sequenceFields, { additionalProperties: false })) }, { additionalProperties: false })

export const ListInput = Type.Object({ project_id: Type.Optional(IdParam), ...PageInput }, { additionalProperties: false })

export const AddAssetInput = Type.Object(
  {
    asset_id: IdParam,
    /** source in (inclusive) and out (exclusive): frames from the asset's first frame or timecodes; default the whole asset */
    in: Type.Optional(FrameOrTimecode),
    out: Type.Optional(FrameOrTimecode),
    /** `V1`, `A2` …; default V1 for video, A1 for audio */
    track: Type.Optional(Type.String({ pattern: '^[VvAa][1-9][0-9]?$' })),
    /** record position, frames from the sequence's start; default the end of the track */
    position: Type.Optional(Type.Integer({ minimum: 0, maximum: 2147483647 })),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
  },
  { additionalProperties: false },
)

/** `format` is read from the query string (the core keeps a `format` parameter out of the input) */
export const DownloadInput = Type.Object({}, { additionalProperties: false })

export const ImportInput = Type.Object(
  {
    /** an asset of the project whose original is the sequence file (instead of an upload) */
    asset_id: Type.Optional(IdParam),
    /** the new sequence's name; default the file's sequence name */
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    /** the rate of an EDL (EDLs do not carry one); default 24, or 29.97 when the EDL says DROP FRAME */
    frame_rate: Type.Optional(FrameRate),
  },
  { additionalProperties: false },
)

export const ReportInput = Type.Object(
  {
    type: Type.Optional(Type.String({ minLength: 1, maxLength: 40 })),
    frame_rate: Type.Optional(FrameRate),
  },
  { additionalProperties: false },
)

export const ReportParams = Type.Object({ id: IdParam, job_id: IdParam })
