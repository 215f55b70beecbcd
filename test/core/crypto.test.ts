import { randomBytes } from 'node:crypto'
import t from 'tap'
import { deriveKey, open, seal } from '../../core/crypto.js'

t.test('sealed secrets open only with the same key and context', async (t) => {
  const serverKey = randomBytes(32)
  const key = deriveKey(serverKey, 'edits/smb-password')
  const sealed = seal(key, 'pässwörd 🔑', 'edit:A')
  t.match(sealed, /^v1:[A-Za-z0-9+/=]+$/)
  t.notOk(sealed.includes('pässwörd'))
  t.equal(open(key, sealed, 'edit:A'), 'pässwörd 🔑', 'round trip, unicode intact')
  t.not(seal(key, 'pässwörd 🔑', 'edit:A'), sealed, 'a fresh IV every time')

  t.throws(() => open(key, sealed, 'edit:B'), 'another context')
  t.throws(() => open(deriveKey(randomBytes(32), 'edits/smb-password'), sealed, 'edit:A'), 'another server key')
  t.throws(() => open(deriveKey(serverKey, 'other/purpose'), sealed, 'edit:A'), 'a subkey for another purpose')
  const raw = Buffer.from(sealed.slice(3), 'base64')
  raw[raw.length - 1] ^= 1
  t.throws(() => open(key, `v1:${raw.toString('base64')}`, 'edit:A'), 'a flipped bit')
  t.throws(() => open(key, 'v1:AAAA', 'edit:A'), 'truncated')
  t.throws(() => open(key, 'v2:' + sealed.slice(3), 'edit:A'), 'unknown version')
  t.throws(() => deriveKey(randomBytes(16), 'x'), 'a short server key is refused')
})
