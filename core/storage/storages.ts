import { mkdirSync } from 'node:fs'
import path from 'node:path'
import type { MamConfig } from '../config.js'
import { invalidParam, quoted } from '../errors.js'
import { resolveInside } from './paths.js'

export interface Storage {
  name: string
  /** absolute folder */
  root: string
}

/**
 * Named storages (`media_1` → /mnt/media1) where projects live: `config.storages` (from the config's
 * `storages`, `MAMKIT_STORAGES=media_1=/mnt/media1,media_2=/mnt/media2` or the old spelling
 * `plugins.storage.storages`, checked by `resolveConfig`); there is always a `default` storage
 * below the data dir. Resolved as `coreServices.storages`.
 */
export class StorageRegistry {
  private readonly storages = new Map<string, Storage>()

  constructor(config: Pick<MamConfig, 'dataDir' | 'storages'>) {
    this.add('default', path.join(config.dataDir, 'storage', 'default'))
    for (const [name, dir] of Object.entries(config.storages ?? {})) this.add(name, dir)
  }

  private add(name: string, dir: string) {
    const root = path.resolve(dir)
    mkdirSync(root, { recursive: true })
    this.storages.set(name, { name, root })
  }

  list(): Storage[] {
    return [...this.storages.values()]
  }

  get(name: string, param = 'storage'): Storage {
    const s = this.storages.get(name)
    if (!s)
      throw invalidParam(
        param,
        `${quoted(name, 64)} is not a configured storage (known: ${[...this.storages.keys()].join(', ')}); an administrator adds storages with MAMKIT_STORAGES=name=/folder,other=/folder2 (or the config's storages) and restarts the server`,
      )
    return s
  }

  /** a client path inside a storage, through the one path module */
  resolve(name: string, relative: string, param: string): Promise<string> {
    return resolveInside(this.get(name).root, relative, param)
  }
}
