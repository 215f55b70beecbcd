import type { TranscriptionService } from './service.js'
import type { Engines } from './engine.js'

import { createServiceRef } from '../../core/index.js'
/** The transcription plugin's services, for plugins that list `transcription` in their dependsOn (or optionalDependsOn). */
export const transcriptionServices = {
  /** transcripts of assets: queue runs, read sentences, `searchText(assetId)` / `textOf(id)` for search indexing */
  service: createServiceRef<TranscriptionService>('transcription.service'),
  /** the speech-to-text engines of this server and why unavailable ones are */
  engines: createServiceRef<Engines>('transcription.engines'),
} as const
