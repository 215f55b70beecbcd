import { UniqueConstraintViolationException } from '@mikro-orm/core'
import { column, iso, User, conflict, notFound, type EntityManager, type Knex } from '../../core/index.js'
import { Team, TeamMembership } from './entities.js'

/** Teams and memberships; resolved by other plugins as `teams`. */
export class TeamService {
  constructor(private readonly knex: Knex) {}

  async get(em: EntityManager, id: number): Promise<Team> {
    const team = await em.findOne(Team, id)
    if (!team) throw notFound('team', id)
    return team
  }

  /** Every user has a team of their own, named after them, so rights can be granted to one person. */
  async ensureOwnTeam(em: EntityManager, user: Pick<User, 'id' | 'username'>): Promise<Team> {
    for (let attempt = 1; ; attempt++) {
      const existing = await em.findOne(Team, { owner: user.id })
      if (existing) return existing
      let name = user.username
      for (let n = 2; await em.count(Team, { name }); n++) name = `${user.username} (${n})`
      // Parallel requests that first see a user created by the core race here. owner_id and name
      // are unique, so one insert wins and the others read its team. The insert runs in a fork, so
      // a lost race leaves nothing pending in the caller's unit of work (and a caller's transaction
      // stays the one it runs in: SQLite has a single connection).
      const fork = em.fork({ keepTransactionContext: true })
      const owner = fork.getReference(User, user.id)
      fork.create(TeamMembership, { team: fork.create(Team, { name, owner, quota: null }), user: owner })
      try {
        await fork.flush()
      } catch (err) {
        if (!(err instanceof UniqueConstraintViolationException) || attempt >= 3) throw err
      }
    }
  }

  /**
   * Own teams for users created outside this plugin (the core's createUser: the CLI, the first
   * admin, another process). Run at start and before listing teams, so no user is missing there.
   */
  async ensureOwnTeams(em: EntityManager): Promise<void> {
    // one plain query that finds nobody almost always (GET /teams runs it): entities only for the missing
    const missing = await this.knex('users as u').leftJoin('teams as t', 't.owner_id', 'u.id').whereNull('t.id').select('u.id', 'u.username')
    for (const user of missing) await this.ensureOwnTeam(em, { id: Number(user.id), username: user.username })
  }

  async addMember(em: EntityManager, team: Team, user: User): Promise<void> {
    if (await em.count(TeamMembership, { team, user })) return
    em.create(TeamMembership, { team, user })
    await em.flush()
  }

  async removeMember(em: EntityManager, team: Team, user: User): Promise<void> {
    if (team.owner?.id === user.id) throw conflict(`"${team.name}" is the own team of ${user.username}; they cannot leave it`)
    await em.nativeDelete(TeamMembership, { team, user })
  }

  /** member user ids per team, read through the caller's EntityManager (inside its transaction) */
  async memberIdsOf(em: EntityManager, teamIds: number[]): Promise<Map<number, number[]>> {
    const out = new Map<number, number[]>(teamIds.map((id) => [id, []]))
    if (!teamIds.length) return out
    for (const m of await em.find(TeamMembership, { team: { $in: teamIds } }, { orderBy: { id: 'asc' } })) out.get(m.team.id)?.push(m.user.id)
    return out
  }

  /** team ids of a user: the basis of every access check */
  async teamIdsOf(userId: number): Promise<number[]> {
    const rows = await this.knex('team_memberships').where({ user_id: userId }).select('team_id')
    return rows.map((r: { team_id: number }) => Number(r.team_id))
  }

  /**
   * Teams as the API shows them, each with its members, from plain rows: a list of 220 teams with
   * 200 users cost ~60 ms as entities with a member scan per team (issue 10); two queries and a
   * map now. `where` narrows the list (`owner` set: own teams; `ownerId`: one user's).
   */
  async views(filter: { ids?: number[]; ownedOnly?: boolean; ownerId?: number } = {}) {
    const query = this.knex('teams').orderBy('name').select('id', 'name', 'quota', 'quota_mail_sent', 'space_used', 'owner_id', 'created_at', 'updated_at')
    if (filter.ids) query.whereIn('id', filter.ids)
    if (filter.ownedOnly) query.whereNotNull('owner_id')
    if (filter.ownerId !== undefined) query.where('owner_id', filter.ownerId)
    const teams = await query
    if (teams.length === 0) return []
    const members = await this.knex('team_memberships as m')
      .join('users as u', 'u.id', 'm.user_id')
      .modify((q) => (filter.ids || filter.ownerId !== undefined ? q.whereIn('m.team_id', teams.map((t: any) => t.id)) : q))
      .orderBy('u.username')
      .select('m.team_id', 'u.id', 'u.username', 'u.firstname', 'u.lastname')
    const byTeam = new Map<number, { id: number; username: string; firstname: string; lastname: string }[]>()
    for (const m of members) {
      const teamId = Number(m.team_id)
      let list = byTeam.get(teamId)
      if (!list) byTeam.set(teamId, (list = []))
      list.push({ id: Number(m.id), username: m.username, firstname: m.firstname, lastname: m.lastname })
    }
    return teams.map((t: any) => ({
      id: Number(t.id),
      name: t.name as string,
      quota: column.intOrNull(t.quota),
      quota_mail_sent: column.bool(t.quota_mail_sent),
      space_used: column.int(t.space_used),
      user_owned: t.owner_id !== null,
      owner_id: column.intOrNull(t.owner_id),
      users: byTeam.get(Number(t.id)) ?? [],
      created_at: iso(column.date(t.created_at)!),
      updated_at: iso(column.date(t.updated_at)!),
    }))
  }

  async one(em: EntityManager, team: Team) {
    await em.flush() // a team changed through the unit of work is read back as a row
    return (await this.views({ ids: [team.id] }))[0]
  }
}
