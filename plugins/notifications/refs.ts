import { createServiceRef } from '../../core/index.js'
import type { NotificationService } from './service.js'

export const notificationServices = {
  service: createServiceRef<NotificationService>('notifications.service'),
}
