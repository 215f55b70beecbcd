import { column, type Knex, type EventAudience, type PublishedEvent } from '../../core/index.js'

/**
 * Who may read an event's subject: the rule that keeps a notification from telling anybody about an
 * object they cannot see. Projects (and the assets in them) and galleries through team access rights, jobs by the
 * user who started them, users and teams by themselves; administrators read everything. A subject
 * type without a rule here is told to administrators only.
 */
/** what one fan-out batch looked up once: who reads each subject, who the administrators are */
export interface BatchLookups {
  readers: Map<string, Promise<Set<number>>>
  admins?: Promise<Set<number>>
}

export class Audience {
  constructor(private readonly knex: Knex) {}

  /**
   * The administrators, read once per batch (not cached across batches: a user made administrator a
   * moment ago, by this process or another, hears the next event).
   */
  adminIds(batch: BatchLookups): Promise<Set<number>> {
    batch.admins ??= (async () => {
      const roles = await this.knex('roles').select('id', 'role_matrix')
      const adminRoles = roles.filter((r: any) => column.json<Record<string, boolean>>(r.role_matrix, {}).admin === true).map((r: any) => Number(r.id))
      const users = adminRoles.length ? await this.knex('users').whereIn('role_id', adminRoles).pluck('id') : []
      return new Set(users.map(Number))
    })()
    return batch.admins
  }

  private async teamMembers(teamIds: number[]): Promise<number[]> {
    if (!teamIds.length) return []
    return (await this.knex('team_memberships').whereIn('team_id', teamIds).pluck('user_id')).map(Number)
  }

  /** members of teams with read on the object (a write right always comes with read) */
  private async objectReaders(objectType: 'project' | 'gallery', objectId: number): Promise<number[]> {
    const rows = await this.knex('access_rights as ar')
      .join('team_memberships as tm', 'tm.team_id', 'ar.team_id')
      .where({ 'ar.object_type': objectType, 'ar.object_id': objectId, 'ar.read': true })
      .distinct('tm.user_id')
    return rows.map((r: any) => Number(r.user_id))
  }

  /** who may read the subject through a right of their own (administrators read everything besides) */
  async readers(subject: { type: string; id: number }): Promise<Set<number>> {
    const out = new Set<number>()
    const add = (ids: Array<number | null | undefined>) => ids.forEach((id) => id !== null && id !== undefined && out.add(Number(id)))
    switch (subject.type) {
      case 'project':
        add(await this.objectReaders('project', subject.id))
        break
      case 'asset': {
        const asset = await this.knex('assets').where({ id: subject.id }).first('project_id')
        if (asset) add(await this.objectReaders('project', Number(asset.project_id)))
        break
      }
      // review and share events of the galleries plugin: users with read on the gallery (team rights on `gallery`)
      case 'gallery':
        add(await this.objectReaders('gallery', subject.id))
        break
      case 'job': {
        const job = await this.knex('jobs').where({ id: subject.id }).first('user_id')
        if (job) add([job.user_id])
        break
      }
      case 'user':
        add([subject.id])
        break
      case 'team':
        add(await this.teamMembers([subject.id]))
        break
    }
    return out
  }

  /**
   * The users to tell about an event: whom it concerns (its audience), less the user who caused it,
   * less anybody who may not read its subject.
   */
  async recipients(event: PublishedEvent, audience: EventAudience, batch: BatchLookups): Promise<number[]> {
    const key = `${event.subject.type}:${event.subject.id}`
    let readers = batch.readers.get(key)
    if (!readers) batch.readers.set(key, (readers = this.readers(event.subject)))
    const explicit = await readers
    const admins = await this.adminIds(batch)
    const wanted = new Set<number>()
    for (const id of audience.users ?? []) if (id !== null && id !== undefined) wanted.add(Number(id))
    for (const id of await this.teamMembers((audience.teams ?? []).filter((t): t is number => t !== null && t !== undefined))) wanted.add(id)
    if (audience.admins) for (const id of admins) wanted.add(id)
    if (audience.readers) for (const id of explicit) wanted.add(id)
    if (event.actor_id !== null) wanted.delete(event.actor_id)
    return [...wanted].filter((id) => explicit.has(id) || admins.has(id)).sort((a, b) => a - b)
  }
}
