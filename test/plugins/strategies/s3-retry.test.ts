/**
 * Transient failures of a real S3 server (a single-node Ceph RGW on loopback, behind a proxy that
 * misbehaves on purpose) are retried by the archive job with a bounded backoff instead of failing
 * the run. Its own file: each test here takes over a minute on a loaded machine, and the RGW tests
 * of s3.test.ts fill that file's time limit already.
 */
import { readFile } from 'node:fs/promises'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import path from 'node:path'
import t from 'tap'
import { CreateBucketCommand } from '@aws-sdk/client-s3'
import { onEachDatabase } from '../../helpers/index.js'
import { exists } from '../projects/fixtures.js'
import { archivedProject, rgwForTests, sha, waitForArchive } from './fixtures.js'

const env = await rgwForTests(t, 's3 retries (Ceph RGW)')
if (env) {
  const { client, dir, target, rgw } = env

  /**
   * A proxy in front of the RGW that answers the first `slowDowns` PUTs with 503 SlowDown (more
   * than the SDK's own 3 attempts) and cuts the first GET of one.bin (300 kB) off after its first bytes (a reset
   * while the body streams, which the SDK does not retry).
   */
  async function flakyProxy(upstream: string, slowDowns: number) {
    const seen = { slowDowns: 0, resets: 0, gets: [] as string[] }
    const up = new URL(upstream)
    const server = http.createServer((req, res) => {
      if (req.method === 'PUT' && seen.slowDowns < slowDowns) {
        seen.slowDowns++
        req.resume()
        res.writeHead(503, { 'content-type': 'application/xml' })
        res.end('<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>')
        return
      }
      if (req.method === 'GET') seen.gets.push(req.url ?? '')
      const cut = req.method === 'GET' && /\/files\/one\.bin/.test(req.url ?? '') && seen.resets === 0
      const forward = http.request({ host: up.hostname, port: up.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode!, answer.headers)
        if (cut && answer.statusCode === 200) {
          seen.resets++
          answer.once('data', (chunk) => {
            res.write(chunk)
            res.socket?.destroy()
            answer.destroy()
          })
        } else answer.pipe(res)
      })
      forward.on('error', () => res.destroy())
      req.pipe(forward)
    })
    server.listen(0, '127.0.0.1')
    await new Promise((r) => server.once('listening', r))
    return { endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, close: () => new Promise((r) => server.close(r)) }
  }

  onEachDatabase(
    t,
    's3 (Ceph RGW behind a flaky proxy): 503 SlowDown past the SDK retries and a reset while reading back are retried by the job; the archive ends archived and restores byte-identical',
    async (t, s) => {
      const { randomBytes } = await import('node:crypto')
      const proxy = await flakyProxy(rgw.endpoint, 5)
      t.teardown(() => proxy.close())
      const bucket = `mamkit-flaky-${s.db}-${Date.now()}`
      await client.send(new CreateBucketCommand({ Bucket: bucket }))
      const made = await s.request('POST', '/archive_strategies', { token: s.admin.token, json: { name: 'Flaky', destination: `s3://${bucket}`, target: target({ endpoint: proxy.endpoint }), transmission_check: 'fingerprint' } })
      t.equal(made.status, 201, made.text)
      const files = { 'one.bin': randomBytes(300_000), 'two.bin': randomBytes(9 * 1024 * 1024 + 3) }
      const { p, sums } = await archivedProject(s, 'Flaky', files)
      t.equal((await s.request('PUT', `/projects/${p.id}/archive`, { token: s.user.token, json: { strategy: made.body.archivestrategy.id } })).status, 202)
      const st = await waitForArchive(s, p.id, 180_000)
      t.equal(st.state, 'archived', `archived despite the flaky storage (${st.error ?? ''})`)
      t.equal(proxy.seen.slowDowns, 5, 'five PUTs were answered 503')
      t.equal(proxy.seen.resets, 1, `one read-back was cut off (GETs: ${proxy.seen.gets.join(' ')})`)
      for (const f of Object.keys(files)) t.notOk(await exists(path.join(p.path, f)), `${f} released`)
      t.equal((await s.request('PUT', `/projects/${p.id}/unarchive`, { token: s.user.token })).status, 202)
      const back = await waitForArchive(s, p.id, 180_000)
      t.equal(back.state, 'online', `restored (${back.error ?? ''})`)
      for (const [f, sum] of Object.entries(sums)) t.equal(sha(await readFile(path.join(p.path, f))), sum, `${f} restored byte-identical`)
    },
    { config: { plugins: { strategies: { roots: [dir] } } } },
  )
}
