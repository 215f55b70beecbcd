import { Type } from 'typebox'
import { OneOf, PageInput } from '../../core/index.js'

export const INGEST_MODES = ['copy', 'move', 'in_place'] as const
export type IngestMode = (typeof INGEST_MODES)[number]

const DAY = 86_400

const ingestFields = {
  name: Type.String({ minLength: 1, maxLength: 200 }),
  /** a named storage (`MAMKIT_STORAGES`) */
  storage: Type.String({ minLength: 1, maxLength: 64 }),
  /** the watched folder, relative to the storage */
  path: Type.String({ maxLength: 4096 }),
  /** the library project that receives the files */
  project_id: Type.Integer({ minimum: 1 }),
  mode: OneOf(INGEST_MODES),
  /** a file is registered once its size and modification time stayed the same this long */
  stable_seconds: Type.Integer({ minimum: 1, maximum: DAY }),
  /** how often the folder is listed */
  interval_seconds: Type.Integer({ minimum: 1, maximum: DAY }),
  /** Avid MediaFiles/MXF folders: the OP-Atom files of one clip are registered together */
  mxf_op_atom: Type.Boolean(),
  enabled: Type.Boolean(),
}

export const IngestCreateInput = Type.Object(
  {
    library_ingest: Type.Object(
      {
        name: ingestFields.name,
        storage: ingestFields.storage,
        path: ingestFields.path,
        project_id: ingestFields.project_id,
        mode: Type.Optional(ingestFields.mode),
        stable_seconds: Type.Optional(ingestFields.stable_seconds),
        interval_seconds: Type.Optional(ingestFields.interval_seconds),
        mxf_op_atom: Type.Optional(ingestFields.mxf_op_atom),
        enabled: Type.Optional(ingestFields.enabled),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
)

export const IngestUpdateInput = Type.Object(
  { library_ingest: Type.Partial(Type.Object(ingestFields, { additionalProperties: false })) },
  { additionalProperties: false },
)

export const IngestListInput = Type.Object(PageInput, { additionalProperties: false })

export const IngestFilesInput = Type.Object(
  { ...PageInput, state: Type.Optional(OneOf(['waiting', 'registering', 'registered', 'failed'] as const)) },
  { additionalProperties: false },
)

export const INGEST_DEFAULTS = { mode: 'copy' as IngestMode, stable_seconds: 10, interval_seconds: 10, mxf_op_atom: false, enabled: true }
