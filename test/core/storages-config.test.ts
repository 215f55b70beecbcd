import path from 'node:path'
import t from 'tap'
import { resolveConfig } from '../../core/config.js'
import { BootError } from '../../core/errors.js'
import { StorageRegistry } from '../../core/storage/storages.js'

/** named storages: a typed, checked field of the core config, from three sources (issue 9, finding 8) */

const failure = (fn: () => unknown): BootError => {
  try {
    fn()
  } catch (err) {
    return err as BootError
  }
  throw new Error('no boot error')
}

t.test('storages come from `storages`, the old spelling plugins.storage.storages and MAMKIT_STORAGES', async (t) => {
  const dataDir = t.testdir()
  const config = resolveConfig(
    { dataDir, storages: { media_1: path.join(dataDir, 'm1'), fast: path.join(dataDir, 'fast') }, plugins: { storage: { storages: { old: path.join(dataDir, 'old'), fast: '/not/this/one' } } } },
    { MAMKIT_STORAGES: ` media_2=${path.join(dataDir, 'm2')} , eq=${path.join(dataDir, 'a=b')}` },
  )
  t.same(config.storages, {
    old: path.join(dataDir, 'old'),
    fast: path.join(dataDir, 'fast'), // `storages` wins over the old spelling
    media_1: path.join(dataDir, 'm1'),
    media_2: path.join(dataDir, 'm2'),
    eq: path.join(dataDir, 'a=b'), // a folder may hold "="
  })
  const registry = new StorageRegistry(config)
  t.same(registry.list().map((s) => s.name), ['default', 'old', 'fast', 'media_1', 'media_2', 'eq'])
  t.equal(registry.get('default').root, path.join(dataDir, 'storage', 'default'))

  // the environment wins per name, as it did
  t.equal(resolveConfig({ dataDir, storages: { media_1: '/from/config' } }, { MAMKIT_STORAGES: `media_1=${path.join(dataDir, 'env')}` }).storages.media_1, path.join(dataDir, 'env'))
  t.same(resolveConfig({ dataDir }, {}).storages, {}, 'none configured: only default')
})

t.test('a bad storage value is a SETTINGS_INVALID boot error naming it', async (t) => {
  const dataDir = t.testdir()
  const cases: Array<[Parameters<typeof resolveConfig>[0], NodeJS.ProcessEnv, RegExp]> = [
    [{ dataDir, storages: { 'media 1': '/mnt/m1' } }, {}, /setting storages\.media 1 names a storage "media 1"/],
    [{ dataDir, storages: { media_1: '' } }, {}, /setting storages\.media_1 must be a folder/],
    [{ dataDir, storages: { media_1: 42 as unknown as string } }, {}, /setting storages\.media_1 must be a folder/],
    [{ dataDir, storages: ['/mnt/m1'] as unknown as Record<string, string> }, {}, /setting storages must be an object/],
    [{ dataDir, plugins: { storage: { storages: { 'bad/name': '/x' } } } }, {}, /setting plugins\.storage\.storages\.bad\/name names a storage/],
    [{ dataDir }, { MAMKIT_STORAGES: 'media_1' }, /setting MAMKIT_STORAGES has "media_1", which is not name=\/folder/],
    [{ dataDir }, { MAMKIT_STORAGES: 'media_1=' }, /setting MAMKIT_STORAGES \(media_1\) must be a folder/],
  ]
  for (const [input, env, message] of cases) {
    const err = failure(() => resolveConfig(input, env))
    t.ok(err instanceof BootError, String(message))
    t.equal(err.code, 'SETTINGS_INVALID')
    t.equal(err.plugin, 'core')
    t.match(err.message, message)
  }
})
