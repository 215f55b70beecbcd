import { UniqueConstraintViolationException } from '@mikro-orm/core'
import { iso, User, conflict, notFound, type EntityManager, type Knex } from '../../core/index.js'
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
    const owners = em.createQueryBuilder(Team, 't').select('t.owner_id').where({ owner: { $ne: null } }).getKnexQuery()
    for (const user of await em.find(User, { id: { $nin: owners as any } })) await this.ensureOwnTeam(em, user)
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

  async serialize(em: EntityManager, teams: Team[]) {
    const members = teams.length
      ? await this.knex('team_memberships as m')
          .join('users as u', 'u.id', 'm.user_id')
          .whereIn(
            'm.team_id',
            teams.map((t) => t.id),
          )
          .orderBy('u.username')
          .select('m.team_id', 'u.id', 'u.username', 'u.firstname', 'u.lastname')
      : []
    return teams.map((t) => ({
      id: t.id,
      name: t.name,
      quota: t.quota,
      quota_mail_sent: t.quotaMailSent,
      space_used: t.spaceUsed,
      user_owned: t.owner !== null,
      owner_id: t.owner?.id ?? null,
      users: members
        .filter((m: any) => Number(m.team_id) === t.id)
        .map((m: any) => ({ id: Number(m.id), username: m.username, firstname: m.firstname, lastname: m.lastname })),
      created_at: iso(t.createdAt),
      updated_at: iso(t.updatedAt),
    }))
  }

  async one(em: EntityManager, team: Team) {
    return (await this.serialize(em, [team]))[0]
  }
}
