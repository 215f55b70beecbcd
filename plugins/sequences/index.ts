import { Type } from 'typebox'
import { coreServices, definePlugin } from '../../core/index.js'
import { identityServices, mountAccessRightRoutes } from '../identity/index.js'
import { projectServices } from '../projects/index.js'
import { Conformer } from './conform.js'
import { sequenceEntities } from './entities.js'
import { migrations } from './migrations.js'
import { sequenceServices } from './refs.js'
import { registerSequenceRoutes } from './routes.js'
import { PREDITOR_SEQUENCE, SequenceService } from './service.js'

export { sequenceServices } from './refs.js'
export { PREDITOR_SEQUENCE, SequenceService } from './service.js'
export { PreditorSequence, PreditorSequenceClip, PreditorSequenceMarker } from './entities.js'
export type { SequenceDoc, SequenceClip, SequenceMarker } from './model.js'

const Settings = Type.Object(
  {
    /** the frame rate of a new sequence when the request names none */
    defaultRate: Type.String({ default: '25', pattern: '^\\d+(\\.\\d+)?(/\\d+)?$' }),
  },
  { default: {} },
)

/** Preditor sequences (§4.19): timelines of assets with team rights and an editing lock, editing-suite imports and exports, sequence reports. */
export const sequencesPlugin = definePlugin({
  name: 'sequences',
  title: 'Preditor sequences',
  version: '1.0.0',
  description: 'Sequences of assets (video and audio tracks, markers) with team rights and an editing lock; import and download as EDL, FCP7 XML, FCPXML and OTIO; clip usage and music cue sheet reports',
  dependsOn: ['identity', 'projects', 'assets', 'markers'],
  optionalDependsOn: ['custom-metadata'],
  migrations,
  entities: sequenceEntities,
  settings: Settings,
  register(api) {
    api.provide(sequenceServices.service, (r) => new SequenceService(r(coreServices.knex), r(identityServices.accessRights), r(identityServices.teams), r(projectServices.service), r(coreServices.db).dialect))
    api.provide(sequenceServices.conformer, (r) => new Conformer(r(coreServices.knex), r(projectServices.service), r(coreServices.db).dialect))
    registerSequenceRoutes(api)
    mountAccessRightRoutes(api, '/preditor_sequences', PREDITOR_SEQUENCE)
  },
})
