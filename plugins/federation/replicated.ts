import { Role, User, USER_ROLE, type EntityManager } from '../../core/index.js'
import { Team, type TeamService } from '../identity/index.js'
import { StatusFlag, type StatusFlagService } from '../status-flags/index.js'
import { falseWins, priorityWins, trueWins, type TypeRules, type Value } from './kernel.js'
import { createHash } from 'node:crypto'

/**
 * The replicated types of this version (FEDERATION.md §3.4) and how each maps onto its plugin's
 * rows: `list` reads the local rows as field values, `materialize` writes resolved values back.
 * Other plugins are reached through their exported entities and services only.
 */
export interface LocalRecord {
  localId: number
  values: Record<string, Value>
  /** when the row was made: SQLite reuses the id of a deleted last row, and a new row must not pass for the old one */
  created: number
  /** a uuid every site derives alike (the built-in roles), so they merge instead of duplicating */
  fixedUuid?: string
}

export interface MaterializeContext {
  em: EntityManager
  /** local id of a replicated record, when it is materialised here */
  localIdOf(uuid: string): Promise<number | null>
  uuidOfLocal(type: string, localId: number): Promise<string | null>
  /** short id of the origin site: the suffix of a name that collides with a local one (§8.2) */
  originSlug: string
}

export interface ReplicatedType {
  type: string
  /** the tables `list` reads and `materialize` writes: locked while the federation works on them */
  tables: readonly string[]
  rules: TypeRules
  list(em: EntityManager, ctx: Pick<MaterializeContext, 'uuidOfLocal'>): Promise<LocalRecord[]>
  /** writes the values into the local row (creating it), or removes it when `_deleted`; the local id, or null */
  materialize(localId: number | null, values: Record<string, Value>, ctx: MaterializeContext): Promise<number | null>
}

/** a uuid-shaped name derived from a string, for records every site has from the start */
export function derivedUuid(name: string): string {
  const h = createHash('sha256').update(`mamkit-federation:${name}`).digest('hex')
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`
}
/** the origin of records that exist at every site from the start */
export const EVERYWHERE = '00000000-0000-0000-0000-000000000000'

/** what capture compares a row with next time: its values and when it was made (never shipped) */
export const snapshotOf = (rec: LocalRecord) => JSON.stringify({ ...rec.values, [CREATED]: rec.created })
export const CREATED = '@created'

const str = (v: Value | undefined): string | null => (typeof v === 'string' ? v : null)
const deleted = (values: Record<string, Value>) => values._deleted === true

/** a name free in a table: the wanted one, else `<name><sep><origin slug>` (then numbered) */
async function freeName(taken: (name: string) => Promise<boolean>, wanted: string, sep: string, slug: string, max: number): Promise<string> {
  if (!(await taken(wanted))) return wanted
  for (let n = 1; ; n++) {
    const suffix = n === 1 ? `${sep}${slug}` : `${sep}${slug}${n}`
    const name = wanted.slice(0, max - suffix.length) + suffix
    if (!(await taken(name))) return name
  }
}

export function replicatedTypes(services: { teams: () => TeamService; flags: () => StatusFlagService }): ReplicatedType[] {
  const role: ReplicatedType = {
    type: 'role',
    tables: ['roles'],
    // a capability revoked at one site while granted at another stays revoked (§3.4)
    rules: { resolvers: { 'matrix/': falseWins } },
    async list(em) {
      const roles = await em.find(Role, {}, { orderBy: { id: 'asc' } })
      return roles.map((r) => ({
        localId: r.id,
        created: r.createdAt.getTime(),
        values: { name: r.name, ...Object.fromEntries(Object.entries(r.roleMatrix ?? {}).map(([k, v]) => [`matrix/${k}`, v === true])) },
        fixedUuid: r.builtin ? derivedUuid(`role:${r.name}`) : undefined,
      }))
    },
    async materialize(localId, values, ctx) {
      const em = ctx.em
      const existing = localId ? await em.findOne(Role, localId) : null
      if (deleted(values)) {
        // a role still held by users here, or built in, is kept: removing it would strand them
        if (existing && !existing.builtin && !(await em.count(User, { role: existing.id }))) {
          await em.nativeDelete(Role, { id: existing.id })
          return null
        }
        return existing?.id ?? null
      }
      const matrix = Object.fromEntries(Object.entries(values).filter(([k]) => k.startsWith('matrix/')).map(([k, v]) => [k.slice(7), v === true]))
      const wanted = str(values.name) ?? 'role'
      const name = existing && existing.name === wanted ? wanted : await freeName(async (n) => (await em.count(Role, { name: n, ...(existing ? { id: { $ne: existing.id } } : {}) })) > 0, wanted, '~', ctx.originSlug, 200)
      if (existing) {
        existing.name = name
        existing.roleMatrix = matrix
        await em.flush()
        return existing.id
      }
      const created = em.create(Role, { name, roleMatrix: matrix, builtin: false })
      await em.flush()
      return created.id
    },
  }

  const user: ReplicatedType = {
    type: 'user',
    tables: ['users'],
    // login and password are the origin's alone, so a login stays unique per origin (§8.2)
    rules: { resolvers: { disabled: trueWins }, originOnly: ['login', 'password_hash'] },
    async list(em, ctx) {
      const users = await em.find(User, {}, { orderBy: { id: 'asc' } })
      const out: LocalRecord[] = []
      for (const u of users) {
        const roleId = typeof u.role === 'object' ? u.role.id : (u.role as unknown as number)
        out.push({
          localId: u.id,
          created: u.createdAt.getTime(),
          values: { login: u.username, firstname: u.firstname, lastname: u.lastname, email: u.email, password_hash: u.passwordHash, role: roleId ? await ctx.uuidOfLocal('role', roleId) : null },
        })
      }
      return out
    },
    async materialize(localId, values, ctx) {
      const em = ctx.em
      const existing = localId ? await em.findOne(User, localId) : null
      if (deleted(values)) {
        if (existing) {
          try {
            await em.nativeDelete(User, { id: existing.id })
          } catch {
            return existing.id // rows of other plugins still point at the user: kept, and listed as a difference
          }
        }
        return null
      }
      const roleUuid = str(values.role)
      const roleLocal = roleUuid ? await ctx.localIdOf(roleUuid) : null
      const role = (roleLocal ? await em.findOne(Role, roleLocal) : null) ?? (await em.findOne(Role, { name: USER_ROLE }))
      const wanted = (str(values.login) ?? 'user').replace(/[^A-Za-z0-9._@-]/g, '_').slice(0, 100) || 'user'
      const username = existing && existing.username === wanted ? wanted : await freeName(async (n) => (await em.count(User, { username: n, ...(existing ? { id: { $ne: existing.id } } : {}) })) > 0, wanted, '@', ctx.originSlug, 100)
      const fields = { username, firstname: str(values.firstname), lastname: str(values.lastname), email: str(values.email), passwordHash: str(values.password_hash) }
      if (existing) {
        Object.assign(existing, fields)
        if (role) existing.role = role
        await em.flush()
        return existing.id
      }
      const created = em.create(User, { ...fields, role: role! })
      await em.flush()
      return created.id
    },
  }

  const team: ReplicatedType = {
    type: 'team',
    tables: ['teams', 'team_memberships'],
    // members are an add-wins set: one field per member, dropped to remove
    rules: {},
    async list(em, ctx) {
      // own teams are per site (every site makes one for each user it has), not shared records
      const teams = await em.find(Team, { owner: null }, { orderBy: { id: 'asc' } })
      const members = await services.teams().memberIdsOf(em, teams.map((t) => t.id))
      const out: LocalRecord[] = []
      for (const t of teams) {
        const values: Record<string, Value> = { name: t.name }
        for (const m of members.get(t.id) ?? []) {
          const uuid = await ctx.uuidOfLocal('user', m)
          if (uuid) values[`members/${uuid}`] = true
        }
        out.push({ localId: t.id, created: t.createdAt.getTime(), values })
      }
      return out
    },
    async materialize(localId, values, ctx) {
      const em = ctx.em
      let existing = localId ? await em.findOne(Team, localId) : null
      if (deleted(values)) {
        if (existing) await em.nativeDelete(Team, { id: existing.id })
        return null
      }
      const wanted = str(values.name) ?? 'team'
      const name = existing && existing.name === wanted ? wanted : await freeName(async (n) => (await em.count(Team, { name: n, ...(existing ? { id: { $ne: existing.id } } : {}) })) > 0, wanted, '~', ctx.originSlug, 200)
      if (existing) existing.name = name
      else existing = em.create(Team, { name, owner: null, quota: null })
      await em.flush()
      const wantedMembers = new Set<number>()
      for (const [k, v] of Object.entries(values)) {
        if (!k.startsWith('members/') || v !== true) continue
        const id = await ctx.localIdOf(k.slice(8))
        if (id) wantedMembers.add(id)
      }
      const current = (await services.teams().memberIdsOf(em, [existing.id])).get(existing.id) ?? []
      for (const id of current) if (!wantedMembers.has(id)) await services.teams().removeMember(em, existing, em.getReference(User, id))
      for (const id of wantedMembers) if (!current.includes(id)) await services.teams().addMember(em, existing, em.getReference(User, id))
      return existing.id
    },
  }

  const statusFlag: ReplicatedType = {
    type: 'status_flag',
    tables: ['status_flags'],
    rules: {},
    async list(em) {
      // unscoped flags only: scoped ones came with a project from elsewhere (§6.6)
      const flags = await services.flags().list(em, null)
      return flags.map((f) => ({ localId: f.id, created: f.createdAt.getTime(), values: { name: f.name, color: f.color, position: f.position } }))
    },
    async materialize(localId, values, ctx) {
      const em = ctx.em
      const existing = localId ? await em.findOne(StatusFlag, localId) : null
      if (deleted(values)) {
        if (existing) await services.flags().remove(em, existing)
        return null
      }
      const wanted = (str(values.name) ?? 'flag').slice(0, 100)
      const color = /^#[0-9a-f]{6}$/i.test(str(values.color) ?? '') ? str(values.color)! : '#808080'
      const position = typeof values.position === 'number' ? values.position : undefined
      const taken = async (n: string) => (await em.count(StatusFlag, { name: n, scopeProjectId: null, ...(existing ? { id: { $ne: existing.id } } : {}) })) > 0
      const name = existing && existing.name === wanted ? wanted : await freeName(taken, wanted, '~', ctx.originSlug, 100)
      if (existing) return (await services.flags().update(em, existing, { name, color, position })).id
      return (await services.flags().create(em, { name, color, position })).id
    },
  }

  return [role, user, team, statusFlag]
}

/** the site record's rules: `left` is irreversible without a new join; a revoked key stays revoked */
export const SITE_RULES: TypeRules = { resolvers: { status: priorityWins(['left', 'suspended']), 'revoked/': trueWins } }

/** initial_data's order: parents before what refers to them */
export const TYPE_ORDER = ['site', 'role', 'user', 'team', 'status_flag']
