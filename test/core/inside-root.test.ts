import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import t from 'tap'
import { InsideRoot } from '../../core/storage/paths.js'

/**
 * InsideRoot (openInside for many files of one root, each folder resolved once): the same answers
 * as openInside for plain files, symlinks inside and out, folders that lead out, missing files, and
 * a folder swapped for a symlink after it was resolved (caught on the opened descriptor).
 */
t.test('InsideRoot opens what openInside opens and refuses what it refuses', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'mamkit-inside-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const root = path.join(dir, 'project')
  await mkdir(path.join(root, 'Shoot'), { recursive: true })
  await mkdir(path.join(dir, 'elsewhere'))
  await writeFile(path.join(root, 'Shoot', 'clip.mov'), 'the original')
  await writeFile(path.join(dir, 'elsewhere', 'secret.key'), 'the key')
  await symlink(path.join(root, 'Shoot', 'clip.mov'), path.join(root, 'Shoot', 'alias.mov'))
  await symlink(path.join(dir, 'elsewhere', 'secret.key'), path.join(root, 'Shoot', 'planted.mov'))
  await symlink(path.join(dir, 'elsewhere'), path.join(root, 'Out'))
  const inside = await InsideRoot.of(root)
  const read = async (rel: string) => {
    const opened = await inside.open(rel, `file ${rel}`)
    try {
      return { text: await readFile(opened.descriptorPath, 'utf8'), realPath: opened.realPath }
    } finally {
      await opened.close()
    }
  }

  t.same(await read('Shoot/clip.mov'), { text: 'the original', realPath: path.join(root, 'Shoot', 'clip.mov') })
  t.same(await read('Shoot/alias.mov'), { text: 'the original', realPath: path.join(root, 'Shoot', 'clip.mov') }, 'a symlink to a file inside is followed, as openInside does')
  const outside = (rel: string) => ({ status: 403, permanent: true, message: `The file of file ${rel} leads outside its storage; it is not read` })
  await t.rejects(inside.open('Shoot/planted.mov', 'file Shoot/planted.mov'), outside('Shoot/planted.mov'), 'a symlink to a file outside is refused')
  await t.rejects(inside.open('Out/secret.key', 'file Out/secret.key'), outside('Out/secret.key'), 'a folder leading outside is refused')
  await t.rejects(inside.pathOf('Out/secret.key', 'file Out/secret.key'), outside('Out/secret.key'), 'pathOf checks the folder too')
  await t.rejects(inside.open('../elsewhere/secret.key', 'file x'), { status: 403, message: /leads outside its storage/ }, '`..` out of the root is refused')
  await t.rejects(inside.open('Shoot/..', 'file Shoot/..'), { status: 409, message: /is not a regular file/ }, 'a folder is not a regular file')
  await t.rejects(inside.open('Shoot/missing.mov', 'file Shoot/missing.mov'), { code: 'ENOENT' })
  await t.rejects(inside.open('Gone/clip.mov', 'file Gone/clip.mov'), { code: 'ENOENT' })
  t.equal(await inside.pathOf('Shoot/planted.mov', 'x'), path.join(root, 'Shoot', 'planted.mov'), 'pathOf leaves the name itself unresolved')

  // the folder resolved above is swapped for a symlink leading out: the check on the opened descriptor refuses it
  await rm(path.join(root, 'Shoot'), { recursive: true })
  await symlink(path.join(dir, 'elsewhere'), path.join(root, 'Shoot'))
  await t.rejects(inside.open('Shoot/secret.key', 'file Shoot/secret.key'), outside('Shoot/secret.key'))
})
