import { rm } from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { assertProblem, createProject, onEachDatabase, readerAndStranger, upload, waitForAsset } from '../../../core/testing/index.js'
import { filesBelow, makeStill } from '../../helpers/media.js'

/** A proxy row whose file is gone from disk: download_lowres answers 404 saying so (it answered 500). */
onEachDatabase(t, 'download_lowres of a proxy file missing on disk: 404 naming it, no download headers', async (t, s) => {
  const p = await createProject(s, s.user, { name: 'Lost proxies' })
  const { reader, stranger } = await readerAndStranger(s, p.id)
  const still = await makeStill(path.join(s.dataDir, 'generated', 'still.jpg'))
  const up = await upload(s, s.user.token, p.id, [{ name: 'still.jpg', file: still }])
  t.equal(up.status, 201)
  const image = await waitForAsset(s, s.user.token, up.body.assets[0].id)
  t.match(image, { type: 'image', proxy_state: 'ready' })
  const download = (token?: string, id = image.id) => s.request('GET', `/assets/${id}/download_lowres`, { token })
  const ok = await download(reader.token)
  t.equal(ok.status, 200, 'a reader downloads the proxy while it is there')
  t.match(ok.headers.get('content-disposition'), /attachment; filename="still_lowres\./)

  assertProblem(t, await download(), 401)
  assertProblem(t, await download(stranger.token), 404)
  assertProblem(t, await download(reader.token, 99999), 404)

  const row = await s.runtime.db.knex('assets').where({ id: image.id }).first('uuid')
  const files = (await filesBelow(path.join(s.dataDir, 'proxies'))).filter((f) => f.includes(row.uuid))
  t.ok(files.length > 0, 'the proxy files are on disk')
  for (const f of files) await rm(f)

  const variants: Array<Record<string, string>> = [{}, { range: 'bytes=0-99' }]
  for (const headers of variants) {
    const gone = await s.request('GET', `/assets/${image.id}/download_lowres`, { token: reader.token, headers })
    assertProblem(t, gone, 404)
    t.match(gone.body, { code: 'not_found', detail: /image proxy file of this asset is missing on disk/, proxy_state: 'ready' })
    t.equal(gone.headers.get('content-disposition'), null, 'no attachment header on the problem')
    t.equal(gone.headers.get('content-range'), null)
  }
  assertProblem(t, await s.request('GET', `/assets/${image.id}/proxies/image`, { token: reader.token }), 404)
  t.equal((await s.runtime.db.knex('assets').where({ id: image.id }).first('proxy_state')).proxy_state, 'ready', 'a read changes nothing')
})
