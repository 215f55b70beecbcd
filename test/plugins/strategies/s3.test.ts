/**
 * Archives on a real S3 server: a single-node Ceph RGW on loopback (Debian radosgw, ceph-mon,
 * ceph-osd; skipped with the reason where they are not installed or do not start). Multipart uploads, our
 * checksums in object metadata, byte-identical restores, move between a disk and an S3 target,
 * and the SDK's default checksum mode, which Ceph Pacific refuses (the reason the targets default
 * to WHEN_REQUIRED).
 */
import { readFile } from 'node:fs/promises'
import path from 'node:path'
import t from 'tap'
import { CreateBucketCommand, GetObjectCommand, HeadObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3'
import { onEachDatabase } from '../../helpers/index.js'
import { exists, row } from '../projects/fixtures.js'
import { archivedProject, diskStrategy, rgwForTests, sha, waitForArchive } from './fixtures.js'

const env = await rgwForTests(t, 's3 (Ceph RGW)')
if (env) {
  const { client, dir, target } = env

  onEachDatabase(
    t,
    's3 (Ceph RGW): archive, verify by read back, restore byte-identical, move to disk and back',
    async (t, s) => {
      const bucket = `mamkit-${s.db}-${Date.now()}`
      await client.send(new CreateBucketCommand({ Bucket: bucket }))
      const made = await s.request('POST', '/archive_strategies', { token: s.admin.token, json: { archive_strategy: { name: 'Ceph', destination: `s3://${bucket}/archives`, target: target(), transmission_check: 'fingerprint' } } })
      t.equal(made.status, 201, made.text)
      const strategy = made.body.archivestrategy
      // 12 MiB: a multipart upload of two 8 MiB parts
      const { randomBytes } = await import('node:crypto')
      const files = { 'a.txt': 'alpha', 'Media/big.mov': randomBytes(12 * 1024 * 1024 + 5), 'Media/small.wav': randomBytes(70_000) }
      const { p, sums } = await archivedProject(s, 'ToCeph', files)
      const size = Number((await row(s, 'projects', { id: p.id })).size)

      t.equal((await s.request('PUT', `/projects/${p.id}/archive`, { token: s.user.token, json: { strategy: strategy.id } })).status, 202)
      const done = await waitForArchive(s, p.id, 120_000)
      t.equal(done.state, 'archived', `archived (${done.error ?? ''})`)
      for (const f of Object.keys(files)) t.notOk(await exists(path.join(p.path, f)), `${f} released`)
      // the objects carry our checksums; the big one went up in parts
      const key = `archives/${done.archive_key}/files/Media/big.mov`
      const head = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: key }))
      t.equal(head.Metadata?.sha256, sums['Media/big.mov'], 'sha256 in the object metadata')
      t.equal(Number(head.ContentLength), 12 * 1024 * 1024 + 5)
      t.match(String(head.ETag), /-2"$/, 'a multipart upload of two parts')
      const body = Buffer.from(await (await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }))).Body!.transformToByteArray())
      t.equal(sha(body), sums['Media/big.mov'], 'byte-identical in the bucket')
      const listed = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `archives/${done.archive_key}/` }))
      t.same((listed.Contents ?? []).map((o) => o.Key!.slice(`archives/${done.archive_key}/`.length)).sort(), ['files/Media/big.mov', 'files/Media/small.wav', 'files/a.txt', 'manifest.json'])

      // move the archive to a disk target and back to S3: copy, verify, delete the old
      const disk = await diskStrategy(s, 'archive_strategies', path.join(dir, `${s.db}-moved`))
      const moved = await s.request('PUT', `/projects/${p.id}/move_archive`, { token: s.user.token, json: { strategy: disk.id } })
      t.equal(moved.status, 202, moved.text)
      t.equal(moved.body.archivestrategystate.direction, 'move')
      const m = await waitForArchive(s, p.id, 120_000)
      t.equal(m.state, 'archived', `moved (${m.error ?? ''})`)
      t.equal(Number(m.archive_strategy_id), disk.id)
      t.equal(sha(await readFile(path.join(dir, `${s.db}-moved`, m.archive_key, 'files', 'Media/big.mov'))), sums['Media/big.mov'], 'byte-identical on the new target')
      const gone = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: `archives/${done.archive_key}/` }))
      t.equal(gone.KeyCount ?? 0, 0, 'the old copies were deleted from the bucket')
      t.equal((await s.request('PUT', `/projects/${p.id}/move_archive`, { token: s.user.token, json: { strategy: strategy.id } })).status, 202)
      const back = await waitForArchive(s, p.id, 120_000)
      t.equal(Number(back.archive_strategy_id), strategy.id)

      // restore from S3: byte-identical
      t.equal((await s.request('PUT', `/projects/${p.id}/unarchive`, { token: s.user.token })).status, 202)
      const restored = await waitForArchive(s, p.id, 120_000)
      t.equal(restored.state, 'online', `restored (${restored.error ?? ''})`)
      for (const [f, sum] of Object.entries(sums)) t.equal(sha(await readFile(path.join(p.path, f))), sum, `${f} restored byte-identical`)
      t.equal(Number((await row(s, 'projects', { id: p.id })).size), size)
    },
    { config: { plugins: { strategies: { roots: [dir] } } } },
  )

  onEachDatabase(
    t,
    "s3 (Ceph RGW): the SDK's default checksum mode still stores verified bytes (lib-storage sends buffered parts); a wrong secret fails and releases nothing",
    async (t, s) => {
      const { randomBytes } = await import('node:crypto')
      const bucket = `mamkit-default-${s.db}-${Date.now()}`
      await client.send(new CreateBucketCommand({ Bucket: bucket }))
      const made = await s.request('POST', '/archive_strategies', { token: s.admin.token, json: { name: 'Default mode', destination: `s3://${bucket}`, target: target({ checksum_mode: 'WHEN_SUPPORTED' }) } })
      t.equal(made.status, 201, made.text)
      const { p, sums } = await archivedProject(s, 'DefaultMode', { 'x.bin': randomBytes(9 * 1024 * 1024) })
      t.equal((await s.request('PUT', `/projects/${p.id}/archive`, { token: s.user.token, json: { strategy: made.body.archivestrategy.id } })).status, 202)
      const st = await waitForArchive(s, p.id, 120_000)
      t.equal(st.state, 'archived', `archived (${st.error ?? ''})`)
      const body = Buffer.from(await (await client.send(new GetObjectCommand({ Bucket: bucket, Key: `${st.archive_key}/files/x.bin` }))).Body!.transformToByteArray())
      t.equal(sha(body), sums['x.bin'], 'byte-identical in the bucket (nothing of aws-chunked framing stored)')

      const bad = await s.request('POST', '/archive_strategies', { token: s.admin.token, json: { name: 'Bad secret', destination: `s3://${bucket}/bad`, target: target({ secret_access_key: 'wrong' }) } })
      const { p: q, sums: qs } = await archivedProject(s, 'BadSecret', { 'y.bin': randomBytes(1000) })
      const again = await s.request('PUT', `/projects/${q.id}/archive`, { token: s.user.token, json: { strategy: bad.body.archivestrategy.id } })
      t.equal(again.status, 202, again.text)
      const st2 = await waitForArchive(s, q.id, 120_000)
      t.equal(st2.state, 'failed')
      t.match(st2.error, /object storage answered 403/)
      t.equal(sha(await readFile(path.join(q.path, 'y.bin'))), qs['y.bin'], 'the original stays online')
    },
    { config: { plugins: { strategies: { roots: [dir] } } } },
  )
}
