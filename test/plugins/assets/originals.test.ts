import { mkdtemp, readFile, readlink, rm, symlink, writeFile, mkdir, lstat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import t from 'tap'
import { openInside } from '../../../core/storage/paths.js'
import { coreServices, type ServiceRef } from '../../../core/index.js'
import { withOriginal } from '../../../plugins/assets/originals.js'

/**
 * openInside and withOriginal without a server: the descriptor path names the opened file even after
 * a swap, the private tool path keeps the extension and goes away, errors never name server paths.
 */

t.test('openInside reads the checked file; withOriginal hides its private paths', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'mamkit-originals-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const root = path.join(dir, 'project')
  await mkdir(path.join(root, 'Shoot'), { recursive: true })
  await writeFile(path.join(root, 'Shoot', 'clip.mov'), 'the original')
  await writeFile(path.join(dir, 'secret.key'), 'the key')

  const opened = await openInside(root, 'Shoot/clip.mov', 'asset 1 (Shoot/clip.mov)')
  t.equal(opened.realPath, path.join(root, 'Shoot', 'clip.mov'))
  t.equal(opened.stats.size, 12)
  // swapped for a symlink after the open: the descriptor and its path still name the checked file
  await rm(path.join(root, 'Shoot', 'clip.mov'))
  await symlink(path.join(dir, 'secret.key'), path.join(root, 'Shoot', 'clip.mov'))
  t.equal(await readFile(opened.descriptorPath, 'utf8'), 'the original', 'the descriptor path reads the opened file')
  await opened.close()
  await t.rejects(openInside(root, 'Shoot/clip.mov', 'asset 1 (Shoot/clip.mov)'), { status: 403, permanent: true, message: 'The file of asset 1 (Shoot/clip.mov) leads outside its storage; it is not read' })

  const config = { dataDir: path.join(dir, 'data') }
  const ctx = { resolve: (ref: ServiceRef<unknown>): any => (ref.id === coreServices.config.id ? config : { pathOf: () => root }) }
  await writeFile(path.join(root, 'Shoot', 'take.mov'), 'take two')
  const asset = { id: 2, path: 'Shoot/take.mov', name: 'take.mov', project: {} } as any
  let tool = ''
  const read = await withOriginal(ctx, asset, async (original) => {
    tool = await original.toolPath()
    t.equal(path.extname(tool), '.mov', 'the tool path keeps the extension')
    t.equal(await readlink(tool), original.descriptorPath)
    return readFile(tool, 'utf8')
  })
  t.equal(read, 'take two')
  t.notOk(await lstat(tool).catch(() => null), 'the tool path is gone afterwards')
  await t.rejects(
    withOriginal(ctx, asset, async (original) => {
      throw new Error(`ffmpeg failed (1): file:${await original.toolPath()}: Invalid data found when processing input`)
    }),
    { message: 'ffmpeg failed (1): file:Shoot/take.mov: Invalid data found when processing input' },
    "a tool's error names the asset's path, not the server's",
  )
  await t.rejects(withOriginal(ctx, { ...asset, id: 3, path: 'Shoot/gone.mov' }, async () => 'never'), { offline: true, message: /asset 3 \(Shoot\/gone.mov\) is offline/ })
  await t.rejects(withOriginal(ctx, { ...asset, id: 1, path: 'Shoot/clip.mov' }, async () => 'never'), { status: 403, permanent: true, message: 'The file of asset 1 (Shoot/clip.mov) leads outside its storage; it is not read' })
  await symlink('loop.mov', path.join(root, 'Shoot', 'loop.mov'))
  await t.rejects(withOriginal(ctx, { ...asset, id: 4, path: 'Shoot/loop.mov' }, async () => 'never'), { message: 'The original of asset 4 (Shoot/loop.mov) cannot be read (ELOOP)' }, 'a file system error by its code, not the server path')
})
