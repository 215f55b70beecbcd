import { createHmac } from 'node:crypto'
import canonicalize from 'canonicalize'
import type { TestServer } from '../../../core/testing/index.js'
import type { FederationService } from '../../../plugins/federation/index.js'

export const fedConfig = { plugins: { federation: { gossipIntervalMs: 0 } } }
export const fedOf = (s: TestServer) => s.runtime.container.resolve<FederationService>('federation.service')

/** A issues an invite, B joins with it (through the API, as admins would) */
export async function joinPair(a: TestServer, b: TestServer): Promise<void> {
  const invite = (await a.request('POST', '/federation/initiate_join', { token: a.admin.token, json: { name: 'joiner' } })).body.invite.invite
  const joined = await b.request('POST', '/federation/finalize_join', { token: b.admin.token, json: { invite } })
  if (joined.status !== 200) throw new Error(`join failed: ${joined.text}`)
}

/** push rounds at every site until all roots are equal (bounded); the common root */
export async function converge(sites: TestServer[], rounds = 8): Promise<string> {
  for (let i = 0; i < rounds; i++) {
    for (const s of sites) await fedOf(s).round()
    const roots = await Promise.all(sites.map((s) => fedOf(s).store.root()))
    if (roots.every((r) => r === roots[0])) return roots[0]
  }
  throw new Error('the sites did not converge')
}

/** the joiner's proof of the invite secret, as the joining server computes it */
export const helloProof = (secret: string, body: unknown) => createHmac('sha256', Buffer.from(secret, 'base64url')).update(canonicalize(body) ?? '').digest('base64')
