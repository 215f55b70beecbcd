import { MamError } from '../../core/index.js'

/** a chat workspace's member directory, as the validate_chat_username route needs it */
export interface ChatProvider {
  hasUser(username: string): Promise<boolean>
}

const PAGE_LIMIT = 200
const MAX_PAGES = 50
const TIMEOUT_MS = 5000

/**
 * A Slack-style Web API (`GET <api_url>/users.list?limit=&cursor=` with `Authorization: Bearer
 * <token>`, answering `{ok, members: [{name, profile: {display_name}, deleted}], response_metadata:
 * {next_cursor}}`). A user name matches a member's `name` or display name, ignoring case; deleted
 * members do not count. The URL is the administrator's setting, never the client's.
 */
export class SlackStyleChat implements ChatProvider {
  constructor(
    private readonly apiUrl: string,
    private readonly token: string,
  ) {}

  async hasUser(username: string): Promise<boolean> {
    const wanted = username.trim().replace(/^@/, '').toLowerCase()
    let cursor = ''
    for (let page = 0; page < MAX_PAGES; page++) {
      const url = new URL(`${this.apiUrl.replace(/\/+$/, '')}/users.list`)
      url.searchParams.set('limit', String(PAGE_LIMIT))
      if (cursor) url.searchParams.set('cursor', cursor)
      let body: any
      try {
        const res = await fetch(url, { headers: { authorization: `Bearer ${this.token}` }, signal: AbortSignal.timeout(TIMEOUT_MS), redirect: 'error' })
        if (!res.ok) throw new Error(`HTTP ${res.status}`)
        body = await res.json()
      } catch (err) {
        throw new MamError('service_unavailable', `The chat workspace did not answer (${(err as Error).message})`)
      }
      if (!body?.ok) throw new MamError('service_unavailable', `The chat workspace refused the request (${String(body?.error ?? 'unknown error').slice(0, 100)})`)
      for (const m of Array.isArray(body.members) ? body.members : []) {
        if (m?.deleted) continue
        const names = [m?.name, m?.profile?.display_name].filter((n): n is string => typeof n === 'string' && n !== '')
        if (names.some((n) => n.toLowerCase() === wanted)) return true
      }
      cursor = body.response_metadata?.next_cursor ?? ''
      if (!cursor) return false
    }
    return false
  }
}
