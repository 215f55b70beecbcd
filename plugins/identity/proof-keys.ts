import { createHash } from 'node:crypto'
import { Type } from 'typebox'
import { User, coreServices, createAuthToken, iso, conflict, unauthenticated, clientApp, type RegisterApi } from '../../core/index.js'
import { ProofKey } from './entities.js'

const LIFETIME_MS = 5 * 60_000
// RFC 7636: verifiers are 43-128 characters of [A-Za-z0-9-._~]; S256 challenges are 43 base64url characters
const Verifier = Type.String({ minLength: 43, maxLength: 128, pattern: '^[A-Za-z0-9._~-]+$' })
const VerifierParams = Type.Object({ code_verifier: Verifier })
const ChallengeInput = Type.Object(
  {
    code_challenge: Type.String({ minLength: 43, maxLength: 43, pattern: '^[A-Za-z0-9_-]+$' }),
    code_challenge_method: Type.Unsafe<'S256'>({ type: 'string', enum: ['S256'], default: 'S256' }),
  },
  { additionalProperties: false },
)

export const s256 = (verifier: string) => createHash('sha256').update(verifier).digest('base64url')

/**
 * §4.21 PKCE login for the desktop app: a signed-in user (the browser) registers a code challenge;
 * the app exchanges the matching verifier, once and within five minutes, for its own token.
 */
export function registerProofKeyRoutes({ routes, config }: RegisterApi) {
  routes.post('/proof_keys', { access: 'authenticated', input: ChallengeInput, summary: 'register a PKCE code challenge (S256)' }, async (ctx) => {
    if (await ctx.em.count(ProofKey, { codeChallenge: ctx.input.code_challenge })) throw conflict('This code challenge is registered already')
    const key = ctx.em.create(ProofKey, { user: ctx.em.getReference(User, ctx.user.userId), codeChallenge: ctx.input.code_challenge, expiresAt: new Date(Date.now() + LIFETIME_MS) })
    await ctx.em.flush()
    ctx.status = 201
    return { proof_key: { id: key.id, code_challenge_method: 'S256', expires_at: iso(key.expiresAt), created_at: iso(key.createdAt) } }
  })

  routes.delete('/proof_keys/:code_verifier', { access: 'public', params: VerifierParams, summary: 'log in with a PKCE code verifier' }, async (ctx) => {
    const throttle = ctx.resolve(coreServices.loginThrottle)
    const keys = [`ip:${ctx.ip}`]
    throttle.check(keys)
    const now = new Date()
    // one atomic update marks the key used, so a verifier logs in once even under concurrent calls
    const claimed = await ctx.em.nativeUpdate(ProofKey, { codeChallenge: s256(ctx.params.code_verifier), usedAt: null, expiresAt: { $gt: now } }, { usedAt: now })
    const key = claimed ? await ctx.em.findOne(ProofKey, { codeChallenge: s256(ctx.params.code_verifier) }, { populate: ['user', 'user.role'] }) : null
    if (!key) {
      throttle.fail(keys)
      throw unauthenticated('The code verifier is invalid, expired or used')
    }
    const { secret } = await createAuthToken(ctx.em, key.user, config.auth.tokenTtlDays, 'proof key login', clientApp(ctx))
    return { authentication_token: secret, user: await ctx.resolve(coreServices.userViews).one(ctx.em, key.user, { userId: key.user.id, isAdmin: false }) }
  })
}
