import { Type } from 'typebox'
import { IdParam, IdParams, User, column, coreServices, conflict, forbidden, iso, invalidParam, notFound, preparedRead, type Knex, type PreparedRead, type RegisterApi, type MamContext, type Principal } from '../../core/index.js'
import { Team, TeamMembership } from './entities.js'
import { TeamInput } from './schemas.js'
import { identityServices } from './refs.js'
import { findUser } from './users-routes.js'

const TeamUserParams = Type.Object({ team_id: IdParam, user_id: IdParam })
const UserTeamParams = Type.Object({ user_id: IdParam, team_id: IdParam })
const UserParams = Type.Object({ user_id: IdParam })

/** §4.25 teams and memberships, and GET /teams/:id/access_rights (§4.3). */
export function registerTeamRoutes({ routes, events }: RegisterApi) {
  const teams = (ctx: MamContext) => ctx.resolve(identityServices.teams)
  const showTeam = async (ctx: MamContext, team: Team) => teams(ctx).one(ctx.em, team)
  const showUser = async (ctx: MamContext<any, any, Principal>, user: User) => ctx.resolve(coreServices.userViews).one(ctx.em, user, ctx.user)
  // team membership decides access: cached principals must see it at once
  const changed = (userId: number) => events.emit('auth.user-changed', { userId })

  routes.get('/teams', { access: 'authenticated', summary: 'list teams' }, async (ctx) => {
    await teams(ctx).ensureOwnTeams(ctx.em) // users the core created since start belong in the list too
    return { teams: await teams(ctx).views() }
  })

  routes.get('/teams/user_owned', { access: 'authenticated', summary: "users' own teams (administrators: all; others: their own)" }, async (ctx) => {
    await teams(ctx).ensureOwnTeams(ctx.em)
    return { teams: await teams(ctx).views(ctx.user.isAdmin ? { ownedOnly: true } : { ownerId: ctx.user.userId }) }
  })

  routes.get('/teams/:id', { access: 'authenticated', params: IdParams, summary: 'show a team' }, async (ctx) => ({
    team: await showTeam(ctx, await teams(ctx).get(ctx.em, ctx.params.id)),
  }))

  routes.post('/teams', { access: 'admin', input: TeamInput, wrap: 'team', summary: 'create a team' }, async (ctx) => {
    const fields = ctx.input.team ?? {}
    if (!fields.name) throw invalidParam('team[name]', 'is required')
    if (await ctx.em.count(Team, { name: fields.name })) throw conflict(`A team named "${fields.name}" exists already`)
    const team = ctx.em.create(Team, { name: fields.name, quota: fields.quota ?? null })
    await ctx.em.flush()
    ctx.status = 201
    return { teams: await showTeam(ctx, team) } // wire.md: one object under the plural key
  })

  routes.put('/teams/:id', { access: 'admin', params: IdParams, input: TeamInput, wrap: 'team', summary: 'update a team' }, async (ctx) => {
    const team = await teams(ctx).get(ctx.em, ctx.params.id)
    const fields = ctx.input.team ?? {}
    if (fields.name !== undefined && fields.name !== team.name) {
      if (await ctx.em.count(Team, { name: fields.name })) throw conflict(`A team named "${fields.name}" exists already`)
      team.name = fields.name
    }
    if (fields.quota !== undefined) {
      team.quota = fields.quota
      team.quotaMailSent = false
    }
    await ctx.em.flush()
    return { team: await showTeam(ctx, team) }
  })

  routes.delete('/teams/:id', { access: 'admin', params: IdParams, summary: 'delete a team and its rights' }, async (ctx) => {
    const team = await teams(ctx).get(ctx.em, ctx.params.id)
    if (team.owner) throw conflict(`"${team.name}" is the own team of a user; it goes when the user is deleted`)
    const body = { team: await showTeam(ctx, team) }
    const members = await ctx.em.find(TeamMembership, { team })
    await ctx.em.remove(team).flush()
    for (const m of members) changed(m.user.id)
    return body
  })

  const join = async (ctx: MamContext, add: boolean) => {
    const team = await teams(ctx).get(ctx.em, ctx.params.team_id)
    const user = await findUser(ctx, ctx.params.user_id)
    await (add ? teams(ctx).addMember(ctx.em, team, user) : teams(ctx).removeMember(ctx.em, team, user))
    changed(user.id)
    return { team, user }
  }
  routes.post('/teams/:team_id/users/:user_id', { access: 'admin', params: TeamUserParams, summary: 'add a user to a team' }, async (ctx) => ({ team: await showTeam(ctx, (await join(ctx, true)).team) }))
  routes.delete('/teams/:team_id/users/:user_id', { access: 'admin', params: TeamUserParams, summary: 'remove a user from a team' }, async (ctx) => ({ team: await showTeam(ctx, (await join(ctx, false)).team) }))
  routes.post('/users/:user_id/teams/:team_id', { access: 'admin', params: UserTeamParams, summary: 'add a user to a team' }, async (ctx) => ({ user: await showUser(ctx, (await join(ctx, true)).user) }))
  routes.delete('/users/:user_id/teams/:team_id', { access: 'admin', params: UserTeamParams, summary: 'remove a user from a team' }, async (ctx) => ({ user: await showUser(ctx, (await join(ctx, false)).user) }))

  routes.post('/users/:user_id/assign_to_all_teams', { access: 'admin', params: UserParams, summary: 'add a user to every shared team' }, async (ctx) => {
    const user = await findUser(ctx, ctx.params.user_id)
    for (const team of await ctx.em.find(Team, { owner: null })) await teams(ctx).addMember(ctx.em, team, user)
    changed(user.id)
    return { user: await showUser(ctx, user) }
  })

  routes.delete('/users/:user_id/remove_from_all_teams', { access: 'admin', params: UserParams, summary: 'remove a user from every team but their own' }, async (ctx) => {
    const user = await findUser(ctx, ctx.params.user_id)
    const shared = await ctx.em.find(Team, { owner: null })
    if (shared.length) await ctx.em.nativeDelete(TeamMembership, { user, team: { $in: shared } })
    changed(user.id)
    return { user: await showUser(ctx, user) }
  })

  // plain rows from two prepared statements (the team with the caller's membership, then its rights):
  // entities, a fork and a count cost ~60 times the queries (bench/routes.ts)
  let teamRights: { team: PreparedRead; rights: PreparedRead } | undefined
  routes.get('/teams/:id/access_rights', { access: 'authenticated', params: IdParams, summary: "a team's rights on every object" }, async (ctx) => {
    const knex = ctx.resolve(coreServices.knex) as Knex
    teamRights ??= {
      team: preparedRead(knex, 'select t.id, (select count(*) from team_memberships m where m.team_id = t.id and m.user_id = ?) as member from teams t where t.id = ?'),
      rights: preparedRead(knex, 'select id, team_id, object_type, object_id, read, write, created_at, updated_at from access_rights where team_id = ? order by object_type, object_id'),
    }
    const [team] = await teamRights.team([ctx.user.userId, ctx.params.id])
    if (!team) throw notFound('team', ctx.params.id)
    if (!Number(team.member) && !ctx.user.isAdmin) throw forbidden('Only members of the team and administrators see its rights')
    const rows = await teamRights.rights([ctx.params.id])
    // AccessRightService.serialize, from the row
    return {
      access_rights: rows.map((r) => ({
        id: Number(r.id),
        team_id: Number(r.team_id),
        object_type: r.object_type as string,
        object_id: Number(r.object_id),
        read: column.bool(r.read),
        write: column.bool(r.write),
        created_at: iso(column.date(r.created_at)),
        updated_at: iso(column.date(r.updated_at)),
      })),
    }
  })
}
