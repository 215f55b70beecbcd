import { createServiceRef } from '../../core/index.js'
import type { WebhookService } from './service.js'

export const webhookServices = {
  service: createServiceRef<WebhookService>('webhooks.service'),
}
