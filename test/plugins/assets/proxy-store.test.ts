import { randomBytes, randomUUID } from 'node:crypto'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { text } from 'node:stream/consumers'
import t from 'tap'
import type { Asset } from '../../../plugins/assets/index.js'
import { ProxyStore } from '../../../plugins/assets/proxy-store.js'

/** ProxyStore.openPlain / savePlain: the plaintext of a stored (encrypted) proxy, for other plugins' processing. */

t.test('proxy store: a stored proxy opened and saved as plaintext; unknown kinds are 404', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'mamkit-proxy-store-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const store = new ProxyStore(path.join(dir, 'data'), randomBytes(32))
  const asset = { id: 7, uuid: randomUUID(), proxies: {}, proxyVersion: 0, proxyKeyEnc: null } as unknown as Asset
  const plain = randomBytes(100_000 + 5) // not a multiple of the 16-byte block
  await writeFile(path.join(dir, 'lowres.mp4'), plain)
  await writeFile(path.join(dir, 'poster.jpg'), '')
  asset.proxies = await store.store(asset, { lowres: path.join(dir, 'lowres.mp4'), poster: path.join(dir, 'poster.jpg') })

  const stored = await readFile(store.fileOf(asset, 'lowres')!)
  t.notOk(stored.includes(plain.subarray(0, 64)), 'encrypted at rest')
  const chunks: Buffer[] = []
  for await (const chunk of await store.openPlain(asset, 'lowres')) chunks.push(chunk as Buffer)
  t.ok(Buffer.concat(chunks).equals(plain), 'openPlain streams the plaintext')
  await store.savePlain(asset, 'lowres', path.join(dir, 'copy.mp4'))
  t.ok((await readFile(path.join(dir, 'copy.mp4'))).equals(plain), 'savePlain writes it to a file')
  t.equal(await text(await store.openPlain(asset, 'poster')), '', 'an empty proxy is an empty stream')
  await t.rejects(store.openPlain(asset, 'editing'), { status: 404, message: /editing proxy of asset/ })
  await rm(store.fileOf(asset, 'lowres')!)
  await t.rejects(store.openPlain(asset, 'lowres'), { code: 'ENOENT' }, 'a file gone from disk')
})
