import { waitForJobs, createProject, readerAndStranger, type TestServer } from '../../../core/testing/index.js'
import { writeTree } from '../projects/fixtures.js'

/** a project with text files in nested folders (names with LIKE wildcards and case twins), all registered and analysed */
export const FILES = {
  'a.txt': 'a',
  'b.txt': 'bb',
  'Media/c.txt': 'c',
  'Media/d.txt': 'd',
  'Media/Sub/e.txt': 'e',
  'my_f/x.txt': 'x',
  'my_f/sub/z.txt': 'z',
  'myxf/y.txt': 'y',
  'myxf/sub/w.txt': 'w',
  'MEDIA/Sub/g.txt': 'g',
}

export async function setup(s: TestServer) {
  const p = await createProject(s, s.user, { name: 'Listed' })
  await writeTree(p.path, FILES)
  const added = await s.request('POST', `/projects/${p.id}/addassets`, { token: s.user.token, json: { paths: Object.keys(FILES) } })
  if (added.status !== 201) throw new Error(added.text)
  await waitForJobs(s, { types: ['assets.analyse'] })
  return { p, ...(await readerAndStranger(s, p.id)) }
}

export const paths = (reply: any) => reply.body.assets.map((a: any) => a.path)

/** a project of the plain user with `files` written and registered */
export async function projectWithFiles(s: TestServer, name: string, files: Record<string, string>) {
  const p = await createProject(s, s.user, { name })
  await writeTree(p.path, files)
  const added = await s.request('POST', `/projects/${p.id}/addassets`, { token: s.user.token, json: { paths: Object.keys(files) } })
  if (added.status !== 201) throw new Error(`addassets: ${added.status} ${added.text}`)
  return { p, assets: added.body.assets as any[] }
}
