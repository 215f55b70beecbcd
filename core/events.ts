import { EventEmitter } from 'node:events'

/**
 * In-process events between core and plugins (user changed, role changed, job finished ...).
 * Listeners run synchronously and must not throw; they are for cache invalidation and wake-ups,
 * not for work that must survive a crash (that is what jobs are for).
 */
export interface EventMap {
  'auth.user-changed': { userId: number }
  'auth.role-changed': { roleId: number }
  'auth.credential-revoked': { userId: number }
  'jobs.enqueued': { type: string }
  'jobs.settled': { id: number; state: string }
  'features.changed': { name: string; active: boolean }
  [event: string]: unknown
}

export class EventBus {
  private readonly emitter = new EventEmitter({ captureRejections: false })
  constructor() {
    this.emitter.setMaxListeners(100)
  }
  on<K extends keyof EventMap & string>(event: K, listener: (payload: EventMap[K]) => void): () => void {
    this.emitter.on(event, listener)
    return () => this.emitter.off(event, listener)
  }
  emit<K extends keyof EventMap & string>(event: K, payload: EventMap[K]): void {
    this.emitter.emit(event, payload)
  }
}
