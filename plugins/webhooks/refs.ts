import { createServiceRef } from '../../core/plugin/services.js'
import type { WebhookService } from './service.js'

export const webhookServices = {
  service: createServiceRef<WebhookService>('webhooks.service'),
}
