import { createWriteStream } from 'node:fs'
import { rename, rm, rmdir, stat } from 'node:fs/promises'
import path from 'node:path'
import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { deriveKey, notFound, unseal, seal } from '../../core/index.js'
import type { Asset } from './entities.js'
import { decryptRange, encryptFile, newProxyKey, plainSize } from './proxy-crypto.js'
import { makeDirs } from '../../core/index.js'

/**
 * Where proxies live: below `<dataDir>/proxies`, keyed by the asset's uuid, never by a client path.
 * Layout 1 put every asset in one folder (`proxies/<uuid>`); layout 2 shards by the uuid's first two
 * characters (`proxies/v2/ab/<uuid>`) so no folder holds millions of entries. New proxies use the
 * latest layout; `convert_proxy_structure` moves older ones.
 */
export const PROXY_LAYOUT = 2

export class ProxyStore {
  private readonly sealingKey: Buffer

  constructor(
    private readonly dataDir: string,
    secretKey: Buffer,
  ) {
    this.sealingKey = deriveKey(secretKey, 'proxy-keys')
  }

  dirOf(asset: Pick<Asset, 'uuid'>, layout: number): string {
    if (layout <= 1) return path.join(this.dataDir, 'proxies', asset.uuid)
    return path.join(this.dataDir, 'proxies', `v${layout}`, asset.uuid.slice(0, 2), asset.uuid)
  }

  fileOf(asset: Pick<Asset, 'uuid' | 'proxies' | 'proxyVersion'>, kind: string): string | null {
    const name = asset.proxies[kind]
    return name ? path.join(this.dirOf(asset, asset.proxyVersion), name) : null
  }

  /** the asset's proxy key, created (and sealed into the row, bound to the asset's uuid) on first use */
  keyOf(asset: Asset): Buffer {
    if (asset.proxyKeyEnc) return Buffer.from(unseal(this.sealingKey, asset.proxyKeyEnc, asset.uuid), 'base64')
    const key = newProxyKey()
    asset.proxyKeyEnc = seal(this.sealingKey, key.toString('base64'), asset.uuid)
    return key
  }

  /**
   * The plaintext of one of the asset's proxies, as a stream (for plugins that process a proxy:
   * galleries burn watermarks into it). 404 when the asset has no proxy of that kind; a file gone
   * from disk rejects with ENOENT.
   */
  async openPlain(asset: Asset, kind: string): Promise<Readable> {
    const file = this.fileOf(asset, kind)
    if (!file) throw notFound(`${kind} proxy of asset`, asset.id)
    const size = await plainSize(file)
    return size > 0 ? decryptRange(this.keyOf(asset), file, 0, size - 1) : Readable.from([])
  }

  /** writes the plaintext of one of the asset's proxies to `target` (a scratch file of the caller) */
  async savePlain(asset: Asset, kind: string, target: string): Promise<void> {
    await pipeline(await this.openPlain(asset, kind), createWriteStream(target))
  }

  /**
   * Encrypts plaintext proxies into the asset's folder; returns kind → file name. Should one fail (a
   * full disk), the files this call added and the folders it made are removed: none is in the row
   * yet. A file it replaced stays replaced (same name, same key: a whole, newer proxy).
   */
  async store(asset: Asset, plain: Record<string, string>): Promise<Record<string, string>> {
    const key = this.keyOf(asset)
    const layout = asset.proxyVersion || PROXY_LAYOUT
    const dir = this.dirOf(asset, layout)
    const madeDir = await makeDirs(dir)
    const stored: Record<string, string> = {}
    const added: string[] = []
    try {
      for (const [kind, file] of Object.entries(plain)) {
        const name = `${kind}${path.extname(file)}.enc`
        const target = path.join(dir, name)
        const existed = await stat(target).then(() => true, () => false)
        await encryptFile(key, file, target)
        if (!existed) added.push(target)
        stored[kind] = name
      }
    } catch (err) {
      for (const file of added) await rm(file, { force: true }).catch(() => {})
      // emptied folders only, deepest first: another asset's job may share the shard folder meanwhile
      if (madeDir) for (let d = dir; d.startsWith(madeDir); d = path.dirname(d)) if (!(await rmdir(d).then(() => true, () => false))) break
      throw err
    }
    asset.proxyVersion = layout
    return stored
  }

  /** moves an asset's proxies to the latest layout; idempotent (a rerun finds them moved) */
  async migrate(asset: Asset): Promise<boolean> {
    if (asset.proxyVersion === PROXY_LAYOUT || !Object.keys(asset.proxies).length) return false
    const from = this.dirOf(asset, asset.proxyVersion)
    const to = this.dirOf(asset, PROXY_LAYOUT)
    const present = await stat(from).then(() => true, () => false)
    if (present) {
      await makeDirs(path.dirname(to))
      await rm(to, { recursive: true, force: true })
      await rename(from, to)
    }
    asset.proxyVersion = PROXY_LAYOUT
    return true
  }

  async remove(asset: Asset): Promise<void> {
    await rm(this.dirOf(asset, asset.proxyVersion), { recursive: true, force: true })
  }
}
