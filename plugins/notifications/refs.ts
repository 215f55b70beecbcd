import { createServiceRef } from '../../core/plugin/services.js'
import type { NotificationService } from './service.js'

export const notificationServices = {
  service: createServiceRef<NotificationService>('notifications.service'),
}
