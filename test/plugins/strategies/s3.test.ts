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
import { CreateBucketCommand, GetObjectCommand, HeadObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3'
import { createHash } from 'node:crypto'
import { Readable } from 'node:stream'
import { S3Target } from '../../../plugins/strategies/targets/s3.js'
import { verify } from '../../../plugins/strategies/transfer.js'
import { onEachDatabase } from '../../helpers/index.js'
import { exists, row } from '../projects/fixtures.js'
import { archivedProject, diskStrategy, rgwForTests, sha, waitForArchive } from './fixtures.js'

const env = await rgwForTests(t, 's3 (Ceph RGW)')
if (env) {
  const { client, dir, target } = env

  onEachDatabase(
    t,
    's3 (Ceph RGW): archive, verify by our metadata, restore byte-identical, move to disk and back',
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
      t.match(head.Metadata?.crc32, /^[0-9a-f]{8}$/, 'crc32 in the object metadata')
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

  t.test('s3 (Ceph RGW): checksums set after the upload, an object without them never trusted, the server checks each signed body', async (t) => {
    const { randomBytes } = await import('node:crypto')
    const { rgw } = env
    const bucket = `mamkit-put-${Date.now()}`
    await client.send(new CreateBucketCommand({ Bucket: bucket }))
    // copyUpTo 6 MiB: the metadata of a 13 MiB object is set by a multipart copy (UploadPartCopy), as above 5 GiB
    const settings = { bucket, prefix: 'p', endpoint: rgw.endpoint, region: 'us-east-1', accessKeyId: rgw.accessKeyId, secretAccessKey: rgw.secretAccessKey, forcePathStyle: true, checksumMode: 'WHEN_REQUIRED' as const }
    const target = new S3Target({ ...settings, copyUpTo: 6 * 1024 * 1024 })
    t.teardown(() => target.close())
    const cases = { 'one put.bin': randomBytes(70_000), 'exactly 8 MiB.bin': randomBytes(8 * 1024 * 1024), 'parts ü.bin': randomBytes(13 * 1024 * 1024 + 7) }
    for (const [name, bytes] of Object.entries(cases)) {
      // in 1 MiB pieces, as a file is read
      const pieces = Array.from({ length: Math.ceil(bytes.length / 1048576) }, (_, i) => bytes.subarray(i * 1048576, (i + 1) * 1048576))
      const sums = await target.put(`k/${name}`, Readable.from(pieces), null)
      t.equal(sums.sha256, sha(bytes), `${name}: the sums of the bytes sent`)
      t.equal(sums.size, bytes.length)
      const head = await target.head(`k/${name}`)
      t.same(head, { size: bytes.length, sha256: sums.sha256, crc32: sums.crc32 }, `${name}: our checksums in its metadata`)
      const body = Buffer.from(await (await client.send(new GetObjectCommand({ Bucket: bucket, Key: `p/k/${name}` }))).Body!.transformToByteArray())
      t.equal(sha(body), sha(bytes), `${name}: byte-identical`)
      await verify(target, `k/${name}`, sums, 'fingerprint')
    }
    // an upload a crash interrupted before its metadata was set: the right bytes, no checksums
    const bytes = randomBytes(100_000)
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: 'p/k/unfinished.bin', Body: bytes }))
    const sums = { size: bytes.length, sha256: sha(bytes), crc32: '00000000' }
    for (const check of ['none', 'size', 'checksum', 'fingerprint'] as const) await t.rejects(verify(target, 'k/unfinished.bin', sums, check), /carries no checksums/, `${check}: not trusted`)
    const other = await target.put('k/other.bin', Readable.from([randomBytes(100_000)]), null)
    await t.rejects(verify(target, 'k/other.bin', { ...other, sha256: sha(bytes) }, 'size'), /carries checksum/, 'other checksums: not trusted, even for a size check')
    // metadata that lies about the bytes (a store that lost or changed them after it took them): `checksum` trusts
    // the metadata, `fingerprint` (the default) reads the object back and refuses it
    const stored = randomBytes(100_000)
    await client.send(new PutObjectCommand({ Bucket: bucket, Key: 'p/k/lying.bin', Body: stored, Metadata: { sha256: sums.sha256, crc32: sums.crc32, size: String(sums.size) } }))
    await verify(target, 'k/lying.bin', sums, 'checksum')
    await t.rejects(verify(target, 'k/lying.bin', sums, 'fingerprint'), /read back hashes to/, 'fingerprint: the bytes read back decide')
    // what `checksum` rests on (no read-back): a body that does not hash to the SHA-256 its request is signed with is refused
    const liar = new S3Client({ endpoint: rgw.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: rgw.accessKeyId, secretAccessKey: rgw.secretAccessKey }, requestChecksumCalculation: 'WHEN_REQUIRED', responseChecksumValidation: 'WHEN_REQUIRED' })
    t.teardown(() => liar.destroy())
    liar.middlewareStack.add((next) => async (args: any) => {
      args.request.headers['x-amz-content-sha256'] = createHash('sha256').update('other bytes').digest('hex')
      return next(args)
    }, { step: 'build', name: 'wrongPayloadHash' })
    const refused: any = await liar.send(new PutObjectCommand({ Bucket: bucket, Key: 'p/k/liar.bin', Body: randomBytes(1000) })).then(() => null, (err) => err)
    t.ok(refused, 'the server refuses it')
    t.equal(refused?.$metadata?.httpStatusCode, 400, `400 ${refused?.name} ${refused?.Code}`)
    t.match(String(refused?.Code ?? refused?.name), /SHA256Mismatch/, 'XAmzContentSHA256Mismatch')
    t.equal(await target.head('k/liar.bin'), null, 'nothing stored')
  })

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
