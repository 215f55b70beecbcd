import { Type } from 'typebox'
import { definePlugin, coreServices } from '../../core/index.js'
import { markerServices } from './refs.js'
import { MarkerDescriptionSchema } from './entities.js'
import { migrations } from './migrations.js'
import { MarkerService } from './service.js'
import { registerMarkerRoutes } from './routes.js'
import { registerReportRoutes } from './report-routes.js'
import { defineMarkerJobs } from './jobs.js'
import { toRate } from './timecode.js'

export { MarkerDescription } from './entities.js'
export { MarkerService } from './service.js'
export { markerServices } from './refs.js'
/** timecode math and colour names, shared with the sequences plugin */
export { toRate, parseTimecode, formatTimecode, rationalSeconds, rateString, rateValue, sameRate, canDrop, nominal, type Rate } from './timecode.js'
export { normalizeColor, COLORS, DEFAULT_COLOR, type MarkerColor } from './colors.js'

const Settings = Type.Object(
  {
    /** the rate of markers on assets without a video frame rate (audio files) */
    defaultRate: Type.String({ default: '25', pattern: '^\\d+(\\.\\d+)?(/\\d+)?$' }),
  },
  { default: {} },
)

/** Timecoded marker descriptions on assets (§4.7), their editing-suite exports and imports, XLSX and PDF reports. */
export const markersPlugin = definePlugin({
  name: 'markers',
  title: 'Markers',
  version: '1.0.0',
  description: 'Frame-accurate markers on assets with replies, editing-suite marker exports and imports, XLSX and PDF reports',
  dependsOn: ['assets', 'edits'],
  entities: [MarkerDescriptionSchema],
  migrations,
  settings: Settings,
  register(api) {
    const rate = toRate(api.settings().defaultRate) ?? { num: 25, den: 1 }
    api.provide(markerServices.service, (r) => new MarkerService(r(coreServices.knex), rate))
    registerMarkerRoutes(api)
    registerReportRoutes(api)
    defineMarkerJobs(api)
  },
})
