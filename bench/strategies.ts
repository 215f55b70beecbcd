/**
 * Archive and restore throughput of the strategies plugin against plain copies of the same files,
 * in one run: a disk target (vs `cp -r`) and, when the Debian packages are installed, a real Ceph
 * RGW (vs lib-storage's Upload alone). Then files per second for many small files.
 *
 *   npx tsc -p . && node dist/bench/strategies.js [--mib 512] [--small 2000]
 */
import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { createReadStream } from 'node:fs'
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { CreateBucketCommand, S3Client } from '@aws-sdk/client-s3'
import { Upload } from '@aws-sdk/lib-storage'
import { startTestServer, type TestServer } from '../core/testing/index.js'
import { startRgw } from '../test/helpers/rgw.js'

const { values } = parseArgs({ options: { mib: { type: 'string', default: '512' }, small: { type: 'string', default: '2000' } } })
const MIB = Number(values.mib)
const SMALL = Number(values.small)
const rate = (bytes: number, ms: number) => `${((bytes / 1048576) / (ms / 1000)).toFixed(1)} MiB/s`

async function project(s: TestServer, name: string, files: Record<string, number>) {
  const r = await s.request('POST', '/projects', { token: s.user.token, json: { name } })
  const id = r.body.project.id
  const root = (await s.request('GET', `/projects/${id}`, { token: s.admin.token })).body.project.path
  const chunk = randomBytes(1 << 20)
  for (const [f, size] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(root, f)), { recursive: true })
    const parts: Buffer[] = []
    for (let left = size; left > 0; left -= chunk.length) parts.push(left >= chunk.length ? randomBytes(chunk.length) : randomBytes(left))
    await writeFile(path.join(root, f), Buffer.concat(parts))
  }
  return { id, root }
}

async function timeArchive(s: TestServer, id: number, strategy: number, direction: 'archive' | 'unarchive') {
  const t0 = performance.now()
  const r = await s.request('PUT', `/projects/${id}/${direction}`, { token: s.user.token, json: direction === 'archive' ? { strategy } : {} })
  if (r.status !== 202) throw new Error(r.text)
  for (;;) {
    const st = await s.runtime.db.knex('archive_states').where({ project_id: id }).first('state', 'error')
    if (['archived', 'online', 'failed'].includes(st.state)) {
      if (st.state === 'failed') throw new Error(st.error)
      return performance.now() - t0
    }
    await new Promise((res) => setTimeout(res, 20))
  }
}

const targets = await mkdtemp(path.join(tmpdir(), 'mamkit-bench-targets-'))
const s = await startTestServer({ config: { logLevel: 'silent', plugins: { strategies: { roots: [targets] } } } })
try {
  const bytes = MIB * 1048576
  const big: Record<string, number> = {}
  for (let i = 0; i < 4; i++) big[`Media/f${i}.mov`] = bytes / 4
  const strategy = async (name: string, destination: string, target?: Record<string, unknown>) =>
    (await s.request('POST', '/archive_strategies', { token: s.admin.token, json: { name, destination, target, transmission_check: 'fingerprint' } })).body.archivestrategy.id

  // disk
  const disk = await strategy('disk', path.join(targets, 'disk'))
  const p = await project(s, 'Big', big)
  const cpDir = path.join(targets, 'cp')
  let t0 = performance.now()
  execFileSync('cp', ['-r', p.root, cpDir])
  execFileSync('sync')
  const cpMs = performance.now() - t0
  await rm(cpDir, { recursive: true })
  const archiveMs = await timeArchive(s, p.id, disk, 'archive')
  const restoreMs = await timeArchive(s, p.id, disk, 'unarchive')
  console.log(`disk, ${MIB} MiB in 4 files: cp -r + sync ${rate(bytes, cpMs)}; archive (hash, copy, fsync, read-back verify, release) ${rate(bytes, archiveMs)} = ${(cpMs / archiveMs).toFixed(2)}x; restore (copy, hash, fsync, link) ${rate(bytes, restoreMs)} = ${(cpMs / restoreMs).toFixed(2)}x`)

  // small files
  const small: Record<string, number> = {}
  for (let i = 0; i < SMALL; i++) small[`s/${Math.floor(i / 100)}/f${i}.bin`] = 4096
  const q = await project(s, 'Small', small)
  const smallMs = await timeArchive(s, q.id, disk, 'archive')
  const smallBack = await timeArchive(s, q.id, disk, 'unarchive')
  console.log(`disk, ${SMALL} files of 4 KiB: archive ${(SMALL / (smallMs / 1000)).toFixed(0)} files/s, restore ${(SMALL / (smallBack / 1000)).toFixed(0)} files/s`)

  // S3 on Ceph RGW
  const rgw = await startRgw()
  if (typeof rgw === 'string') console.log(`s3: skipped (${rgw})`)
  else {
    try {
      const client = new S3Client({ endpoint: rgw.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: { accessKeyId: rgw.accessKeyId, secretAccessKey: rgw.secretAccessKey }, requestChecksumCalculation: 'WHEN_REQUIRED', responseChecksumValidation: 'WHEN_REQUIRED' })
      await client.send(new CreateBucketCommand({ Bucket: 'bench' }))
      t0 = performance.now()
      for (const f of await readdir(path.join(p.root, 'Media')))
        await new Upload({ client, queueSize: 4, partSize: 8 << 20, params: { Bucket: 'bench', Key: `plain/${f}`, Body: createReadStream(path.join(p.root, 'Media', f)) } }).done()
      const upMs = performance.now() - t0
      const s3 = await strategy('s3', 's3://bench/archives', { endpoint: rgw.endpoint, access_key_id: rgw.accessKeyId, secret_access_key: rgw.secretAccessKey })
      const a = await timeArchive(s, p.id, s3, 'archive')
      const r = await timeArchive(s, p.id, s3, 'unarchive')
      console.log(`s3 (Ceph RGW, memstore), ${MIB} MiB: lib-storage Upload alone ${rate(bytes, upMs)}; archive ${rate(bytes, a)} = ${(upMs / a).toFixed(2)}x; restore ${rate(bytes, r)}`)
      client.destroy()
    } finally {
      await rgw.stop()
    }
  }
} finally {
  await s.close()
  await rm(targets, { recursive: true, force: true })
}
