import { createServiceRef } from '../../core/index.js'
import type { Conformer } from './conform.js'
import type { SequenceService } from './service.js'

/** The sequences plugin's services, for plugins that list `sequences` in their dependsOn. */
export const sequenceServices = {
  /** preditor sequences: rights, lock, clips, markers */
  service: createServiceRef<SequenceService>('sequences.service'),
  /** matching editing-suite clips to MAM assets (path, file name, reel + timecode) */
  conformer: createServiceRef<Conformer>('sequences.conformer'),
} as const
