import { Type } from 'typebox'
import { IdParam, IdParams, forbidden, notFound, iso, type Knex, type EntityManager, type RegisterApi, type MamContext, type Principal } from '../../core/index.js'
import { AccessRight, Team } from './entities.js'
import { identityServices } from './refs.js'

export type Right = 'none' | 'read' | 'write' | 'admin'

export interface ProtectedType {
  /** `project`, `gallery`, `preditor_sequence` … stored in access_rights.object_type */
  type: string
  /** what 404 bodies call it */
  label: string
  /** the table of the objects, and the column values of live ones (`{ deleted: false }`): existence checks */
  table: string
  live?: Record<string, unknown>
}

const RightFields = { read: Type.Optional(Type.Boolean()), write: Type.Optional(Type.Boolean()) }
const TeamRightInput = Type.Object({ team_id: IdParam, ...RightFields }, { additionalProperties: false })
const BulkForObject = Type.Object({ teams: Type.Array(Type.Object({ team_id: IdParam, ...RightFields }, { additionalProperties: false }), { maxItems: 1000 }) }, { additionalProperties: false })
const BulkForTeam = Type.Object({ access_rights: Type.Array(Type.Object({ id: IdParam, ...RightFields }, { additionalProperties: false }), { maxItems: 1000 }) }, { additionalProperties: false })
const ObjectTeamParams = Type.Object({ id: IdParam, team_id: IdParam })
const TeamParams = Type.Object({ team_id: IdParam })

/** write implies read; both false removes the right */
const normalise = (r: { read?: boolean; write?: boolean }) => ({ write: r.write === true, read: r.read === true || r.write === true })

/**
 * One access-right model for everything teams can be given: a team has read and/or write on an
 * object. Users see objects through their teams; administrators see everything. Resolved by
 * other plugins as `accessRights`; `mountAccessRightRoutes` gives a plugin the team routes under its prefix.
 */
export class AccessRightService {
  constructor(private readonly knex: Knex) {}

  async rightOf(user: Principal, type: string, objectId: number): Promise<Right> {
    if (user.isAdmin) return 'admin'
    const rows = await this.knex('access_rights as ar')
      .join('team_memberships as tm', 'tm.team_id', 'ar.team_id')
      .where({ 'tm.user_id': user.userId, 'ar.object_type': type, 'ar.object_id': objectId })
      .select('ar.read', 'ar.write')
    if (rows.some((r: any) => Boolean(r.write))) return 'write'
    if (rows.some((r: any) => Boolean(r.read))) return 'read'
    return 'none'
  }

  /**
   * The principal's right on a live object; 404 when the object does not exist (administrators too)
   * or the principal has no right on it: users must not learn that it exists.
   */
  async assertRead(principal: Principal, p: ProtectedType, id: number): Promise<Right> {
    const [found, right] = await Promise.all([this.exists(p, id), this.rightOf(principal, p.type, id)])
    if (!found || right === 'none') throw notFound(p.label, id)
    return right
  }

  /** 404 without a right, 403 with read only */
  async assertWrite(principal: Principal, p: ProtectedType, id: number): Promise<Right> {
    const right = await this.assertRead(principal, p, id)
    if (right === 'read') throw forbidden(`You may read this ${p.label} but not change it`)
    return right
  }

  async exists(p: ProtectedType, id: number): Promise<boolean> {
    return Boolean(await this.knex(p.table).where({ ...p.live, id }).first('id'))
  }

  /**
   * Limits a list query to the objects the principal can read (`column` holds their ids); no
   * change for administrators.
   */
  scope<Q extends Knex.QueryBuilder>(query: Q, principal: Principal, type: string, column: string): Q {
    return principal.isAdmin ? query : (query.whereIn(column, this.readableIds(principal, type)) as Q)
  }

  /** ids of the objects of `type` that a user can read, as a subquery for list filters */
  readableIds(user: Principal, type: string): Knex.QueryBuilder {
    return this.knex('access_rights as ar')
      .join('team_memberships as tm', 'tm.team_id', 'ar.team_id')
      .where({ 'tm.user_id': user.userId, 'ar.object_type': type, 'ar.read': true })
      .select('ar.object_id')
  }

  async grant(em: EntityManager, type: string, objectId: number, teamId: number, rights: { read?: boolean; write?: boolean }) {
    const { read, write } = normalise(rights)
    const existing = await em.findOne(AccessRight, { objectType: type, objectId, team: teamId })
    if (!read) {
      if (existing) await em.remove(existing).flush()
      return null
    }
    const right = existing ?? em.create(AccessRight, { objectType: type, objectId, team: em.getReference(Team, teamId), read, write })
    right.read = read
    right.write = write
    await em.flush()
    return right
  }

  async revoke(em: EntityManager, type: string, objectId: number, teamId: number): Promise<boolean> {
    return (await em.nativeDelete(AccessRight, { objectType: type, objectId, team: teamId })) > 0
  }

  /** everything that was granted on an object, e.g. when the object is deleted */
  async forget(em: EntityManager, type: string, objectId: number): Promise<void> {
    await em.nativeDelete(AccessRight, { objectType: type, objectId })
  }

  async teamsOf(em: EntityManager, type: string, objectId: number) {
    const rights = await em.find(AccessRight, { objectType: type, objectId }, { populate: ['team'], orderBy: { team: { name: 'asc' } } })
    return rights.map((r) => ({ id: r.team.id, team_id: r.team.id, name: r.team.name, user_owned: r.team.owner !== null, read: r.read, write: r.write }))
  }

  /** user id → the team that gives that user the best right (wire.md) */
  async effective(type: string, objectId: number) {
    const rows = await this.knex('access_rights as ar')
      .join('team_memberships as tm', 'tm.team_id', 'ar.team_id')
      .where({ 'ar.object_type': type, 'ar.object_id': objectId })
      .select('tm.user_id', 'ar.team_id', 'ar.read', 'ar.write')
      .orderBy('ar.team_id')
    const map: Record<string, { team_id: number; read: boolean; write: boolean }> = {}
    for (const r of rows) {
      const key = String(r.user_id)
      const entry = { team_id: Number(r.team_id), read: Boolean(r.read), write: Boolean(r.write) }
      if (!map[key] || (entry.write && !map[key].write)) map[key] = entry
    }
    return map
  }

  serialize(r: AccessRight) {
    return {
      id: r.id,
      team_id: r.team.id,
      object_type: r.objectType,
      object_id: r.objectId,
      read: r.read,
      write: r.write,
      created_at: iso(r.createdAt),
      updated_at: iso(r.updatedAt),
    }
  }
}

/**
 * The six team-right routes under a plugin's prefix: GET/PUT /:id/teams, DELETE /:id/teams/:team_id,
 * GET /:id/effective_access_rights, PUT /:id/update_teams, PUT /update_teams/:team_id.
 */
export function mountAccessRightRoutes({ routes, use }: RegisterApi, prefix: string, p: ProtectedType) {
  const rights = use(identityServices.accessRights)
  const object = async (ctx: MamContext, write: boolean) => {
    const id = ctx.params.id as number
    await (write ? rights().assertWrite(ctx.requireUser(), p, id) : rights().assertRead(ctx.requireUser(), p, id))
    return id
  }
  const team = async (ctx: MamContext, teamId: number) => {
    if (!(await ctx.em.count(Team, teamId))) throw notFound('team', teamId)
    return teamId
  }
  const list = async (ctx: MamContext, id: number) => ({ teams: await rights().teamsOf(ctx.em, p.type, id) })
  const params = IdParams

  routes.get(`${prefix}/:id/teams`, { access: 'authenticated', params, summary: `teams and their rights on a ${p.label}` }, async (ctx) => list(ctx, await object(ctx, false)))

  routes.get(`${prefix}/:id/effective_access_rights`, { access: 'authenticated', params, summary: `users mapped to the team that gives them access to a ${p.label}` }, async (ctx) => ({
    hash: await rights().effective(p.type, await object(ctx, false)),
  }))

  routes.put(`${prefix}/:id/teams`, { access: 'authenticated', params, input: TeamRightInput, summary: `set one team's rights on a ${p.label}` }, async (ctx) => {
    const id = await object(ctx, true)
    await rights().grant(ctx.em, p.type, id, await team(ctx, ctx.input.team_id), ctx.input)
    return list(ctx, id)
  })

  routes.delete(`${prefix}/:id/teams/:team_id`, { access: 'authenticated', params: ObjectTeamParams, summary: `remove a team's rights on a ${p.label}` }, async (ctx) => {
    const id = await object(ctx, true)
    if (!(await rights().revoke(ctx.em, p.type, id, await team(ctx, ctx.params.team_id)))) throw notFound('access right of team', ctx.params.team_id)
    return list(ctx, id)
  })

  routes.put(`${prefix}/:id/update_teams`, { access: 'authenticated', params, input: BulkForObject, summary: `replace all team rights on a ${p.label}` }, async (ctx) => {
    const id = await object(ctx, true)
    for (const t of ctx.input.teams) await team(ctx, t.team_id)
    await ctx.em.transactional(async (em) => {
      await em.nativeDelete(AccessRight, { objectType: p.type, objectId: id })
      for (const t of ctx.input.teams) await rights().grant(em, p.type, id, t.team_id, t)
    })
    return list(ctx, id)
  })

  routes.put(`${prefix}/update_teams/:team_id`, { access: 'admin', params: TeamParams, input: BulkForTeam, summary: `set one team's rights on many ${p.label}s` }, async (ctx) => {
    const teamId = await team(ctx, ctx.params.team_id)
    for (const r of ctx.input.access_rights) if (!(await rights().exists(p, r.id))) throw notFound(p.label, r.id)
    await ctx.em.transactional(async (em) => {
      for (const r of ctx.input.access_rights) await rights().grant(em, p.type, r.id, teamId, r)
    })
    const granted = await ctx.em.find(AccessRight, { objectType: p.type, team: teamId }, { populate: ['team'], orderBy: { objectId: 'asc' } })
    return { access_rights: granted.map((r) => rights().serialize(r)) }
  })
}
