import type { Readable } from 'node:stream'
import { AbortMultipartUploadCommand, ListMultipartUploadsCommand, DeleteObjectCommand, DeleteObjectsCommand, GetObjectCommand, HeadObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3'
import { Upload } from '@aws-sdk/lib-storage'
import { Hasher, type Head, type PutBatch, type Sums, type Target } from './types.js'

import { MamError } from '../../../core/index.js'
export interface S3Settings {
  bucket: string
  prefix: string
  endpoint?: string
  region: string
  accessKeyId: string
  secretAccessKey: string
  forcePathStyle: boolean
  storageClass?: string
  /** `WHEN_REQUIRED` for anything but AWS: Ceph Pacific rejects aws-chunked trailers, s3rver stores them as data (REAL-COMPONENTS.md §1) */
  checksumMode: 'WHEN_REQUIRED' | 'WHEN_SUPPORTED'
}

/** `s3://bucket/some/prefix` → bucket and prefix (no leading or trailing slash) */
export function parseS3Url(destination: string): { bucket: string; prefix: string } | null {
  const m = /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:\/(.*))?$/.exec(destination)
  if (!m) return null
  const prefix = (m[2] ?? '').replace(/^\/+|\/+$/g, '')
  if (prefix.split('/').some((s) => s === '..' || s === '.')) return null
  return { bucket: m[1], prefix }
}

/** multipart above this; parts of this size (S3's minimum is 5 MiB) */
const PART_SIZE = 8 * 1024 * 1024

/** answers that say "later" rather than "no" */
const TRANSIENT_CODES = new Set(['SlowDown', 'Throttling', 'ThrottlingException', 'RequestThrottled', 'RequestLimitExceeded', 'TooManyRequestsException', 'RequestTimeout', 'RequestTimeoutException', 'InternalError', 'ServiceUnavailable', 'TimeoutError'])
/** a connection that broke or could not be made (a restarting gateway, a load balancer's reset) */
const NETWORK_CODES = new Set(['ECONNRESET', 'ECONNREFUSED', 'ECONNABORTED', 'EPIPE', 'ETIMEDOUT', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ENETDOWN', 'UND_ERR_SOCKET', 'ERR_STREAM_PREMATURE_CLOSE'])

/** whether another try later may succeed: 5xx, 429 and throttling, a broken connection */
export function isTransientS3(err: any): boolean {
  const status = err?.$metadata?.httpStatusCode
  if (typeof status === 'number' && (status >= 500 || status === 429)) return true
  if (TRANSIENT_CODES.has(err?.Code) || TRANSIENT_CODES.has(err?.name)) return true
  if (NETWORK_CODES.has(err?.code) || NETWORK_CODES.has(err?.errno) || NETWORK_CODES.has(err?.cause?.code)) return true
  return Boolean(err?.$retryable)
}

/**
 * Unreachable or refusing object storage is a 503 naming the target, not a 500; an answer that may
 * change (5xx, throttling, a reset connection) is marked `transient`, and the jobs retry it with a
 * backoff before they fail a file (concurrency.ts retryTransient).
 */
function s3Error(err: any, what: string): unknown {
  if (err instanceof MamError) return err
  if (err?.name === 'AbortError') return err
  const status = err?.$metadata?.httpStatusCode
  const why = err?.Code ?? err?.name ?? err?.code ?? 'error'
  if (why === 'EntityTooLarge' || why === 'QuotaExceeded') return Object.assign(new MamError('insufficient_storage', `${what}: the object storage is full (${why})`), { permanent: true })
  const error = new MamError('service_unavailable', `${what}: the object storage answered ${status ?? ''} ${why}: ${err?.message ?? ''}`.replace(/\s+/g, ' ').trim())
  return isTransientS3(err) ? Object.assign(error, { transient: true }) : error
}

/**
 * An S3-compatible bucket (AWS, Ceph RGW, MinIO …). Objects go up through lib-storage (multipart
 * for large files, a few parts in flight); our checksums are stored as user metadata
 * (`x-amz-meta-sha256`, `-crc32`) because not every server validates `x-amz-checksum-*`.
 */
export class S3Target implements Target {
  readonly kind = 's3'
  readonly needsSumsFirst = true
  private readonly client: S3Client
  constructor(private readonly s: S3Settings) {
    this.client = new S3Client({
      endpoint: s.endpoint || undefined,
      region: s.region || 'us-east-1',
      forcePathStyle: s.forcePathStyle,
      credentials: { accessKeyId: s.accessKeyId, secretAccessKey: s.secretAccessKey },
      requestChecksumCalculation: s.checksumMode,
      responseChecksumValidation: s.checksumMode,
      maxAttempts: 3,
    })
  }

  private key(key: string): string {
    return this.s.prefix ? `${this.s.prefix}/${key}` : key
  }

  async put(key: string, source: Readable, sums: Sums, signal?: AbortSignal): Promise<Sums> {
    const hasher = new Hasher()
    source.on('error', (err) => hasher.destroy(err))
    const body = source.pipe(hasher)
    const upload = new Upload({
      client: this.client,
      queueSize: 4,
      partSize: PART_SIZE,
      leavePartsOnError: false,
      params: {
        Bucket: this.s.bucket,
        Key: this.key(key),
        Body: body,
        StorageClass: (this.s.storageClass || undefined) as any,
        Metadata: { sha256: sums.sha256, crc32: sums.crc32, size: String(sums.size) },
      },
    })
    const abort = () => void upload.abort().catch(() => {})
    signal?.addEventListener('abort', abort, { once: true })
    try {
      await upload.done()
    } catch (err) {
      throw s3Error(err, `upload of ${key}`)
    } finally {
      signal?.removeEventListener('abort', abort)
    }
    return hasher.sums()
  }

  /** an upload is durable when it is done: a batch is plain puts */
  batch(): PutBatch {
    return {
      put: (key, source, sums, signal) => {
        if (!sums) throw new MamError('internal', `S3 put of ${key} without its checksums (they go in the object metadata)`)
        return this.put(key, source, sums, signal)
      },
      drop: (key) => this.delete(key),
      commit: async () => new Map(),
      abort: async () => {},
    }
  }

  async head(key: string): Promise<Head | null> {
    try {
      const r = await this.client.send(new HeadObjectCommand({ Bucket: this.s.bucket, Key: this.key(key) }))
      return { size: Number(r.ContentLength ?? 0), sha256: r.Metadata?.sha256, crc32: r.Metadata?.crc32 }
    } catch (err: any) {
      if (err?.$metadata?.httpStatusCode === 404 || err?.name === 'NotFound') return null
      throw s3Error(err, `HEAD ${key}`)
    }
  }

  async get(key: string, signal?: AbortSignal): Promise<Readable> {
    try {
      const r = await this.client.send(new GetObjectCommand({ Bucket: this.s.bucket, Key: this.key(key) }), { abortSignal: signal })
      const body = r.Body as Readable
      // a connection reset while the body streams is as passing as one before it (listened to before any consumer)
      body.on('error', (err: any) => {
        if (err && typeof err === 'object' && isTransientS3(err)) err.transient = true
      })
      return body
    } catch (err) {
      throw s3Error(err, `GET ${key}`)
    }
  }

  async delete(key: string): Promise<void> {
    try {
      await this.client.send(new DeleteObjectCommand({ Bucket: this.s.bucket, Key: this.key(key) }))
    } catch (err) {
      throw s3Error(err, `DELETE ${key}`)
    }
  }

  async *list(prefix: string): AsyncIterable<string> {
    const full = `${this.key(prefix)}/`
    const strip = this.s.prefix ? this.s.prefix.length + 1 : 0
    let token: string | undefined
    do {
      let page
      try {
        page = await this.client.send(new ListObjectsV2Command({ Bucket: this.s.bucket, Prefix: full, ContinuationToken: token, MaxKeys: 1000 }))
      } catch (err) {
        throw s3Error(err, `LIST ${prefix}`)
      }
      for (const o of page.Contents ?? []) if (o.Key) yield o.Key.slice(strip)
      token = page.IsTruncated ? page.NextContinuationToken : undefined
    } while (token)
  }

  /** multipart uploads a killed process never completed hold storage until aborted */
  async sweep(prefix: string): Promise<void> {
    let keyMarker: string | undefined
    let uploadIdMarker: string | undefined
    for (;;) {
      let page
      try {
        page = await this.client.send(new ListMultipartUploadsCommand({ Bucket: this.s.bucket, Prefix: `${this.key(prefix)}/`, KeyMarker: keyMarker, UploadIdMarker: uploadIdMarker }))
      } catch {
        return // servers without the call (s3rver) keep their parts; nothing else depends on it
      }
      for (const u of page.Uploads ?? []) await this.client.send(new AbortMultipartUploadCommand({ Bucket: this.s.bucket, Key: u.Key!, UploadId: u.UploadId! })).catch(() => {})
      if (!page.IsTruncated) return
      keyMarker = page.NextKeyMarker
      uploadIdMarker = page.NextUploadIdMarker
    }
  }

  async deletePrefix(prefix: string): Promise<void> {
    let batch: string[] = []
    const flush = async () => {
      if (!batch.length) return
      try {
        await this.client.send(new DeleteObjectsCommand({ Bucket: this.s.bucket, Delete: { Objects: batch.map((k) => ({ Key: this.key(k) })), Quiet: true } }))
      } catch {
        // some servers want Content-MD5 on multi-delete; one by one always works
        for (const k of batch) await this.delete(k)
      }
      batch = []
    }
    for await (const key of this.list(prefix)) {
      batch.push(key)
      if (batch.length === 500) await flush()
    }
    await flush()
  }

  async close(): Promise<void> {
    this.client.destroy()
  }
}
