import { EventEmitter } from 'node:events'
import { randomUUID } from 'node:crypto'
import type { Static, TSchema } from 'typebox'
import { compileSchema, check, type CompiledSchema } from './http/validation.js'

/**
 * Two kinds of events travel on one bus:
 *
 * - Signals between the core's parts (`EventMap`: a user changed, a job was enqueued …), emitted
 *   with `emit` and heard with `on`, synchronously, in this process only. They drop caches and wake
 *   runners; they are not a contract for plugins.
 * - The event catalogue: what happened in the system that people and integrators may want to hear
 *   about (`review.requested`, `asset.ingested`, `job.failed` …). Each is declared by the plugin that
 *   publishes it (`defineEvent` + the plugin's `events`), has a payload schema checked when it is
 *   published, and names the object it concerns, so consumers can check who may read it.
 *   `mamkit events` prints the catalogue.
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

/** A declared event of the catalogue. */
export interface EventType<P> {
  /** `<plugin>.<what-happened>`, kebab-case: `review.status-changed` */
  readonly name: string
  /** the plugin that declares and publishes it (the name's first part, or `core` for core events) */
  readonly plugin: string
  readonly payload: TSchema
  /** one line for the catalogue */
  readonly description: string
  /** the kind of object it concerns (`project`, `asset`, `gallery` …): access rights decide who hears it */
  readonly subject: string
  /**
   * whom the event concerns besides its subject's readers: consumers (notifications) tell these people,
   * and only those of them who may read the subject. Absent: nobody in particular (webhooks still get it).
   */
  readonly audience?: (payload: P) => EventAudience
  /** never set: carries the payload's type */
  readonly __payload?: P
}

/** the people an event concerns; notifications keep only those who may read the event's subject */
export interface EventAudience {
  users?: Array<number | null | undefined>
  /** every member of these teams */
  teams?: Array<number | null | undefined>
  /** everybody who may read the subject */
  readers?: boolean
  /** the administrators */
  admins?: boolean
}

const EVENT_NAME = /^([a-z][a-z0-9-]*)\.([a-z][a-z0-9-]*)$/

export function defineEvent<S extends TSchema>(
  name: string,
  options: { payload: S; description: string; subject: string; plugin?: string; audience?: (payload: Static<S>) => EventAudience },
): EventType<Static<S>> {
  const m = EVENT_NAME.exec(name)
  if (!m) throw new Error(`event "${name}": names are <plugin>.<what-happened> in kebab-case, e.g. "review.status-changed"`)
  return Object.freeze({ name, plugin: options.plugin ?? m[1], payload: options.payload, description: options.description, subject: options.subject, audience: options.audience })
}

/** One published event as consumers see it. */
export interface PublishedEvent<P = unknown> {
  /** unique: consumers deduplicate by it */
  id: string
  name: string
  time: string
  subject: { type: string; id: number }
  /** the user whose action caused it, when there is one */
  actor_id: number | null
  payload: P
}

export interface PublishOptions {
  /** the id of the object of the event's subject type */
  subjectId: number
  actorId?: number | null
}

export class EventBus {
  private readonly emitter = new EventEmitter({ captureRejections: false })
  private readonly declared = new Map<string, { event: EventType<unknown>; compiled: CompiledSchema }>()

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

  /** adds a plugin's events to the catalogue (the loader, at boot); throws on a clash */
  declare(event: EventType<unknown>): void {
    const existing = this.declared.get(event.name)
    if (existing && existing.event !== event) throw new Error(`event "${event.name}" is already declared by "${existing.event.plugin}"`)
    this.declared.set(event.name, { event, compiled: compileSchema(event.payload) })
  }

  /** every declared event, by name */
  catalogue(): EventType<unknown>[] {
    return [...this.declared.values()].map((d) => d.event).sort((a, b) => a.name.localeCompare(b.name))
  }

  /** a declared event by name (what the outbox stored) */
  declaredEvent(name: string): EventType<unknown> | undefined {
    return this.declared.get(name)?.event
  }

  /**
   * Publishes a catalogue event to this process's subscribers only: nothing is stored, a crash loses
   * it. Events that notifications and webhooks must see go through the outbox
   * (`coreServices.outbox`), written in the transaction of the change.
   */
  publish<P>(event: EventType<P>, payload: P, options: PublishOptions): PublishedEvent<P> {
    const published = this.prepare(event, payload, options)
    this.deliverLocally(published)
    return published
  }

  /**
   * Checks and stamps an event (id, time, subject). An event nobody declared, or a payload that does
   * not match its schema, is a programming error: it throws, so tests catch it.
   */
  prepare<P>(event: EventType<P>, payload: P, options: PublishOptions): PublishedEvent<P> {
    const entry = this.declared.get(event.name)
    if (!entry || entry.event !== (event as EventType<unknown>)) throw new Error(`event "${event.name}" is not declared by a loaded plugin (add it to the plugin's \`events\`)`)
    const errors = check(entry.compiled, payload, true)
    if (errors.length) throw new Error(`event "${event.name}": payload ${errors.map((e) => `${e.param} ${e.message}`).join('; ')}`)
    const published: PublishedEvent<P> = {
      id: randomUUID(),
      name: event.name,
      time: new Date().toISOString(),
      subject: { type: event.subject, id: options.subjectId },
      actor_id: options.actorId ?? null,
      payload,
    }
    return published
  }

  /** hands a published event to this process's subscribers */
  deliverLocally(published: PublishedEvent<unknown>): void {
    this.emitter.emit(`catalogue:${published.name}`, published)
    this.emitter.emit('catalogue:*', published)
  }

  /** hears one declared event (or every one with `'*'`) in this process; listeners must not throw */
  subscribe<P>(event: EventType<P> | '*', listener: (published: PublishedEvent<P>) => void): () => void {
    const key = `catalogue:${event === '*' ? '*' : event.name}`
    this.emitter.on(key, listener as (e: unknown) => void)
    return () => this.emitter.off(key, listener as (e: unknown) => void)
  }
}
