import { createServiceRef } from '../../core/index.js'
import type { ViewFarmService } from './service.js'
import type { FarmNode } from './node.js'

/** The view farm's services. */
export const viewFarmServices = {
  /** every node's row and the commands of the API */
  farm: createServiceRef<ViewFarmService>('view-farms.farm'),
  /** this process as a node: heartbeats and applies what the farm asks */
  node: createServiceRef<FarmNode>('view-farms.node'),
} as const
