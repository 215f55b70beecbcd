import { IdParam, Type } from '../../core/index.js'

/** which projects a run takes, evaluated when it fires; every given criterion must hold */
export const Selection = Type.Object(
  {
    /** projects carrying this status flag */
    status_flag_id: Type.Optional(IdParam),
    /** projects neither created nor used (opened on an edit) in the last N days */
    older_than_days: Type.Optional(Type.Integer({ minimum: 0, maximum: 36500 })),
    project_ids: Type.Optional(Type.Array(IdParam, { minItems: 1, maxItems: 1000 })),
    /** library projects (true) or online projects (false) */
    library: Type.Optional(Type.Boolean()),
    /** the subprojects of this project */
    parent_id: Type.Optional(IdParam),
  },
  { additionalProperties: false },
)

export const ScheduleFields = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    /** five fields (minute precision), six (seconds first) or seven (year last), as croner reads them */
    cron: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    /** IANA time zone the cron expression is read in */
    time_zone: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    strategy_type: Type.Optional(Type.String({ minLength: 1, maxLength: 40 })),
    strategy_id: Type.Optional(IdParam),
    /** tier: the named storage the projects move to (instead of a strategy) */
    storage: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    selection: Type.Optional(Selection),
    enabled: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
)

/** `schedule[name]` … from forms, `{"schedule": {...}}`, or the fields at the top level (wrap) */
export const ScheduleInput = Type.Object({ schedule: ScheduleFields }, { additionalProperties: false })
