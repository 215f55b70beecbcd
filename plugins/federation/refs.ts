import { createServiceRef } from '../../core/index.js'
import type { FederationService } from './service.js'
import type { JoinService } from './join.js'
import type { TransportService } from './transports.js'

/** The federation plugin's services. */
export const federationServices = {
  service: createServiceRef<FederationService>('federation.service'),
  join: createServiceRef<JoinService>('federation.join'),
  transports: createServiceRef<TransportService>('federation.transports'),
} as const
