import { conflict, created, forbidden, invalidParam, iso, notFound, type MamContext, type Principal, type RegisterApi } from '../../core/index.js'
import { contentShaOf, transportJson, type TransportService } from './transports.js'
import type { JoinService, HelloBody } from './join.js'
import { FinalizeJoinInput, GossipCompare, GossipPush, InitialDataQuery, InitiateJoinInput, MergeInput, OwnsUuidQuery, SiteInput, SiteParams, TransportInput } from './schemas.js'
import { PAGE, PROTOCOL, type FederationService, type PeerRow } from './service.js'
import { isSite, type SitePrincipal } from './signing.js'
import { fingerprintOf } from './site.js'
import { PREFIX_PATTERN, toWire } from './store.js'
import { pullTransport } from './jobs.js'

/** a site's requests and an admin's both reach these routes; anybody else is refused */
const SITE = { access: 'authenticated' as const, scopes: ['site'] }

const siteOrAdmin = (user: Principal, allowPending = false): SitePrincipal | undefined => {
  if (isSite(user)) {
    if (!(allowPending && user.scope.status === 'pending')) assertActiveSite(user)
    return user
  }
  if (!user.isAdmin) throw forbidden('This action needs administrative privileges or a member site\'s signature')
  return undefined
}

function assertActiveSite(user: SitePrincipal) {
  const status = user.scope.status
  if (status === 'left') throw forbidden('This site has left the federation; it can come back only through a new join')
  if (status === 'suspended') throw forbidden('This site is suspended')
  if (status !== 'active') throw forbidden(`This site is ${status}, not an active member`)
}

const onlySite = (user: Principal): SitePrincipal => {
  if (!isSite(user)) throw forbidden('Only member sites call this route, with a signed request')
  assertActiveSite(user)
  return user
}

/** where this server is reached: the configured base URL, else the request's origin */
const selfUrl = (fed: FederationService, ctx: MamContext) => fed.settings().baseUrl ?? fed.site.current.base_url ?? `${ctx.protocol}://${ctx.host}`

function decodeCursor(cursor: string | undefined): { type: string; uuid: string; seq: number } | undefined {
  if (!cursor) return undefined
  try {
    const c = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'))
    if (typeof c.type === 'string' && typeof c.uuid === 'string' && Number.isSafeInteger(c.seq)) return c
  } catch {
    /* below */
  }
  throw invalidParam('cursor', 'is not a cursor of this endpoint')
}

export function registerRoutes(api: RegisterApi, deps: { fed: () => FederationService; join: () => JoinService; transports: () => TransportService }) {
  const { fed, join, transports } = deps

  const sitesJson = async (admin: boolean) => {
    const f = fed()
    const self = await f.site.load()
    const seq = await f.store.currentSeq()
    const root = await f.store.root()
    const own = { id: 0, uuid: self.site_uuid, name: self.name, base_url: self.base_url, status: self.federation_uuid ? 'active' : 'standalone', self: true, replica: f.replica(), fingerprint: fingerprintOf(self.public_key), federation: self.federation_uuid, protocol: PROTOCOL }
    const peerJson = (p: PeerRow) => ({
      id: p.id,
      uuid: p.site_uuid,
      name: p.name,
      base_url: p.base_url,
      status: p.status,
      self: false,
      replica: p.replica,
      fingerprint: fingerprintOf(p.public_key),
      pull_only: p.pull_only,
      introduced_by: p.introduced_by,
      ...(admin
        ? {
            link: {
              sent_acked_seq: p.sent_acked_seq,
              recv_seq: p.recv_seq,
              lag: Math.max(0, seq - p.sent_acked_seq),
              roots_equal: p.last_root === root,
              last_ok_at: iso(p.last_ok_at),
              clock_offset_ms: p.clock_offset_ms,
              last_error: p.last_error,
            },
          }
        : {}),
    })
    return [own, ...(await f.peers()).map(peerJson)]
  }

  api.routes.post('/federation/initiate_join', { ...SITE, input: InitiateJoinInput, summary: 'issue a single-use invite (admin), or a joining site\'s signed hello' }, async (ctx) => {
    const input = ctx.input
    if (isSite(ctx.user)) {
      if (input.phase !== 'hello') throw invalidParam('phase', 'a site calls initiate_join with phase "hello"')
      for (const field of ['token_id', 'site', 'nonce_j', 'proof'] as const) if (input[field] === undefined) throw invalidParam(field, 'is required for the hello')
      return { join: await join().hello(ctx.user, input as HelloBody) }
    }
    if (!ctx.user.isAdmin) throw forbidden('This action needs administrative privileges')
    if (input.phase !== undefined) throw invalidParam('phase', 'the hello is sent by the joining site\'s server, signed; an admin joins with finalize_join')
    if (!input.name) throw invalidParam('name', 'is required: the name of the site to invite')
    const invite = await join().invite(ctx.user.userId, { name: input.name, base_url: input.base_url }, selfUrl(fed(), ctx))
    return created(ctx, { invite: { ...invite, expires_at: iso(invite.expires_at) } })
  })

  api.routes.post('/federation/finalize_join', { ...SITE, input: FinalizeJoinInput, summary: 'join with an invite (admin of the new site), or the joining site\'s signed last step' }, async (ctx) => {
    const input = ctx.input
    if (isSite(ctx.user)) {
      for (const field of ['nonce_s', 'watermark', 'signature'] as const) if (input[field] === undefined) throw invalidParam(field, 'is required')
      return await join().activate(ctx.user, { nonce_s: input.nonce_s!, watermark: input.watermark!, signature: input.signature! })
    }
    if (!ctx.user.isAdmin) throw forbidden('This action needs administrative privileges')
    if (!input.invite) throw invalidParam('invite', 'is required: the invite issued by a member\'s initiate_join')
    return { federation: await join().join(input.invite, { name: input.name, base_url: input.base_url }, selfUrl(fed(), ctx)) }
  })

  api.routes.post('/federation/dry_run_merge_state', { ...SITE, input: MergeInput, summary: 'the given states merged with this site\'s, and what would change; nothing is committed' }, async (ctx) => {
    siteOrAdmin(ctx.user)
    return { merge: await fed().mergeWithReport(ctx.input.crdts, true) }
  })

  api.routes.post('/federation/merge_state', { access: 'admin', input: MergeInput, summary: 'merge the given states into this site (bundle import)' }, async (ctx) => {
    return { merge: await fed().mergeWithReport(ctx.input.crdts, false) }
  })

  api.routes.get('/federation/initial_data', { ...SITE, input: InitialDataQuery, summary: 'a page of the snapshot for a joining site, with the watermark to continue from' }, async (ctx) => {
    siteOrAdmin(ctx.user, true)
    const f = fed()
    const self = await f.site.load()
    const after = decodeCursor(ctx.input.cursor)
    const page = await f.snapshotPage(after && { type: after.type, uuid: after.uuid }, ctx.input.limit, after?.seq)
    const sites = (await f.peers()).map((p) => ({ uuid: p.site_uuid, name: p.name, base_url: p.base_url, status: p.status, replica: p.replica }))
    return {
      initial_data: {
        federation: self.federation_uuid,
        sites,
        watermark: { site: self.site_uuid, incarnation: String(self.incarnation), seq: page.seq },
        crdts: page.rows.map(toWire),
        cursor: page.next ? Buffer.from(JSON.stringify(page.next)).toString('base64url') : null,
      },
    }
  })

  api.routes.post('/federation_transports', { ...SITE, input: TransportInput, wrap: 'federation_transport', summary: 'create (or find) the receive record of a transport; a job fetches and verifies the bytes' }, async (ctx) => {
    const site = siteOrAdmin(ctx.user)
    const t = ctx.input.federation_transport
    let from = t.from_site
    if (site) {
      if (from !== undefined && from !== site.scope.id) throw invalidParam('federation_transport[from_site]', 'must be the signing site')
      from = site.scope.id
    } else if (!from) throw invalidParam('federation_transport[from_site]', 'is required')
    else if (from !== fed().site.current.site_uuid && !(await fed().peer(from))) throw invalidParam('federation_transport[from_site]', 'is not a site of this federation')
    if (contentShaOf(t.manifest) !== t.content_sha256) throw invalidParam('federation_transport[content_sha256]', 'is not the SHA-256 of the manifest (sorted "sha256:size:role" lines)')
    const { row, created: isNew } = await transports().receive({ from_site: from!, kind: t.kind, subject: t.subject ?? null, manifest: t.manifest, content_sha256: t.content_sha256 })
    if (isNew) await pullTransport.enqueue(ctx, row.id, ctx.user.userId || null)
    ctx.status = isNew ? 201 : 200
    return { federation_transport: transportJson(row) }
  })

  api.routes.post('/gossip', { ...SITE, input: GossipPush, summary: 'a member site\'s delta push: merge its states, acknowledge, answer with one page back' }, async (ctx) => {
    const site = onlySite(ctx.user)
    const body = ctx.input
    const f = fed()
    const self = await f.site.load()
    if (body.protocol !== PROTOCOL) throw conflict(`Protocol ${body.protocol} is not spoken here (this site speaks ${PROTOCOL})`, { protocol: PROTOCOL })
    if (body.federation !== self.federation_uuid) throw conflict('The request is for another federation')
    if (body.from !== site.scope.id) throw invalidParam('from', 'is not the signing site')
    return { gossip: await f.receivePush(site.scope.id, body) }
  })

  api.routes.put('/gossip', { ...SITE, input: GossipCompare, summary: 'compare bucket checksums; at the leaves, return the states whose checksum differs' }, async (ctx) => {
    onlySite(ctx.user)
    const body = ctx.input
    const f = fed()
    if (body.protocol !== PROTOCOL) throw conflict(`Protocol ${body.protocol} is not spoken here (this site speaks ${PROTOCOL})`, { protocol: PROTOCOL })
    if (body.level !== 'rows') {
      const level = body.level
      for (const p of body.parents ?? []) if (!PREFIX_PATTERN(level - 1).test(p)) throw invalidParam('parents', `"${p}" is not a node of level ${level - 1}`)
      for (const p of Object.keys(body.checksums ?? {})) if (!PREFIX_PATTERN(level).test(p)) throw invalidParam('checksums', `"${p}" is not a node of level ${level}`)
      const mine = await f.store.rollup(level, body.parents?.length ? body.parents : undefined)
      const theirs = body.checksums ?? {}
      const differing = [...new Set([...Object.keys(mine), ...Object.keys(theirs)])].filter((k) => mine[k] !== theirs[k]).sort()
      return { gossip: { level, differing, root: await f.store.root() } }
    }
    if (body.depth === undefined) throw invalidParam('depth', 'is required with level "rows"')
    if (body.prefix === undefined || !PREFIX_PATTERN(body.depth).test(body.prefix)) throw invalidParam('prefix', `must be a node of level ${body.depth}`)
    const theirs = new Map((body.rows ?? []).map(([u, c]) => [u, c]))
    const mine = await f.store.leaf(body.depth, body.prefix, null, 100_000)
    const differing = mine.filter((r) => theirs.get(r.uuid) !== r.checksum && (!body.cursor || r.uuid > body.cursor))
    const page = differing.slice(0, PAGE)
    const mineSet = new Set(mine.map((r) => r.uuid))
    return {
      gossip: {
        crdts: page.map(toWire),
        want: body.cursor ? [] : [...theirs.keys()].filter((u) => !mineSet.has(u)).sort(),
        cursor: differing.length > PAGE ? page[page.length - 1].uuid : null,
      },
    }
  })

  api.routes.get('/owns_uuid', { ...SITE, input: OwnsUuidQuery, summary: 'whether this site owns a replicated record (holds its media), and its origin' }, async (ctx) => {
    if (isSite(ctx.user)) assertActiveSite(ctx.user)
    const f = fed()
    const row = await f.store.get(ctx.input.uuid)
    if (!row) throw notFound('replicated record', ctx.input.uuid)
    const self = await f.site.load()
    return { hash: { uuid: row.uuid, type: row.type, owned: row.owner_site === self.site_uuid, owner_site: row.owner_site, origin_site: row.origin_site } }
  })

  api.routes.get('/sites', { access: 'authenticated', summary: 'the sites of the federation; administrators also see each link\'s health' }, async (ctx) => {
    return { sites: await sitesJson(ctx.user.isAdmin) }
  })

  api.routes.put('/site/:id', { access: 'admin', params: SiteParams, input: SiteInput, wrap: 'site', summary: 'edit a site\'s record (name, URL, pull-only, status) through the replicated site record' }, async (ctx) => {
    const f = fed()
    const self = await f.site.load()
    const id = ctx.params.id
    const peer = /^\d+$/.test(id) ? (Number(id) === 0 ? undefined : (await f.peers()).find((p) => p.id === Number(id))) : await f.peer(id)
    const isSelf = id === '0' || id === self.site_uuid
    if (!peer && !isSelf) throw notFound('site', id)
    const changes = ctx.input.site
    if (!self.federation_uuid) throw conflict('This site is not in a federation')
    if (isSelf && changes.status !== undefined && changes.status !== 'active') throw invalidParam('site[status]', 'a site does not suspend or remove itself; an admin of another member does')
    if (peer?.status === 'left' && changes.status !== undefined && changes.status !== 'left') throw conflict('The site has left the federation; it can come back only through a new join')
    if (peer?.status === 'pending') throw conflict('The site has not finished joining')
    const uuid = isSelf ? self.site_uuid : peer!.site_uuid
    await f.transaction(async (_em, k) => {
      const row = await f.writeSiteRecord(k, uuid, changes)
      if (isSelf) await f.site.update(k, { ...(changes.name !== undefined ? { name: changes.name } : {}), ...(changes.base_url !== undefined ? { base_url: changes.base_url } : {}) })
      else await f.materializeSite(k, row)
    })
    const site = (await sitesJson(true)).find((s) => s.uuid === uuid)
    return { site }
  })
}
