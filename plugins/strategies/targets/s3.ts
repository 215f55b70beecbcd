import { Readable } from 'node:stream'
import { AbortMultipartUploadCommand, CompleteMultipartUploadCommand, CopyObjectCommand, CreateMultipartUploadCommand, ListMultipartUploadsCommand, PutObjectCommand, UploadPartCopyCommand, DeleteObjectCommand, DeleteObjectsCommand, GetObjectCommand, HeadObjectCommand, ListObjectsV2Command, S3Client, type StorageClass } from '@aws-sdk/client-s3'
import { Upload } from '@aws-sdk/lib-storage'
import { Hasher, Hashing, type Head, type PutBatch, type Sums, type Target } from './types.js'

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
  /** objects larger than this get their checksums by a multipart copy (UploadPartCopy) instead of CopyObject; S3's limit (tests set less) */
  copyUpTo?: number
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
export const PART_SIZE = 8 * 1024 * 1024
/** the largest object one CopyObject may copy (S3's limit); larger ones are copied in parts of at most this */
const COPY_UP_TO = 5 * 1024 ** 3

/** a source of CopyObject / UploadPartCopy: `bucket/key`, each segment URL-encoded */
const copySource = (bucket: string, key: string) => `${bucket}/${key.split('/').map(encodeURIComponent).join('/')}`

/** our checksums as object metadata (`x-amz-meta-sha256`, `-crc32`, `-size`) */
const metadataOf = (sums: Sums) => ({ sha256: sums.sha256, crc32: sums.crc32, size: String(sums.size) })

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
  /** our checksums are set as metadata once the bytes are up (put): not needed before */
  readonly needsSumsFirst = false
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

  /**
   * One pass: the bytes are hashed (SHA-256 + CRC-32) as they go up, and our checksums stored as
   * metadata are always those of the bytes sent, set once they are all sent, never before: an
   * object carries our metadata only when its upload finished, so one without it (a crash between
   * the two steps) is never trusted (verify, the reuse of a rerun). `sums` (the source's, when
   * known) are not needed first: the caller compares them with the answer (a changed file).
   *
   * Up to PART_SIZE the bytes are read into one buffer, hashed, and sent in one PUT with the
   * metadata. Larger: a multipart upload (lib-storage, PART_SIZE parts, 4 in flight) without our
   * metadata, then the object copied onto itself with it (`MetadataDirective: REPLACE`, only if its
   * ETag is still the one of our upload; a server-side copy, ~50 ms per 64 MiB on RGW, which shares
   * the data), above 5 GiB by a multipart copy. Every part's bytes are checked by the server as
   * they arrive: the SDK signs each request with the SHA-256 of the very buffer sent (SigV4
   * `x-amz-content-sha256`), and S3 and RGW refuse a body that hashes otherwise.
   */
  async put(key: string, source: Readable, _sums?: Sums | null, signal?: AbortSignal): Promise<Sums> {
    signal?.throwIfAborted()
    const it = source[Symbol.asyncIterator]()
    const first: Buffer[] = []
    let length = 0
    let ended = false
    try {
      while (length <= PART_SIZE) {
        const { value, done } = await it.next()
        if (done) {
          ended = true
          break
        }
        const chunk = Buffer.isBuffer(value) ? value : Buffer.from(value)
        first.push(chunk)
        length += chunk.length
      }
    } catch (err) {
      await it.return?.()
      throw err
    }
    if (ended) return this.putOne(key, first.length === 1 ? first[0] : Buffer.concat(first, length), signal)
    const rest = Readable.from(
      (async function* () {
        yield* first
        for (;;) {
          const { value, done } = await it.next()
          if (done) return
          yield value as Buffer
        }
      })(),
      { objectMode: false },
    )
    return this.putParts(key, rest, signal)
  }

  /** the storage class objects are written in (none set: the bucket's default) */
  private get storageClass(): StorageClass | undefined {
    return (this.s.storageClass || undefined) as StorageClass | undefined
  }

  /** a small object: hashed, then sent with its metadata in one PUT (the same buffer) */
  private async putOne(key: string, body: Buffer, signal?: AbortSignal): Promise<Sums> {
    const hashing = new Hashing()
    hashing.update(body)
    const sums = hashing.sums()
    try {
      await this.client.send(
        new PutObjectCommand({ Bucket: this.s.bucket, Key: this.key(key), Body: body, ContentLength: body.length, StorageClass: this.storageClass, Metadata: metadataOf(sums) }),
        { abortSignal: signal },
      )
    } catch (err) {
      throw s3Error(err, `upload of ${key}`)
    }
    return sums
  }

  /** a large object: a multipart upload hashed on the way, then our metadata set by a copy onto itself */
  private async putParts(key: string, source: Readable, signal?: AbortSignal): Promise<Sums> {
    const hasher = new Hasher()
    source.on('error', (err) => hasher.destroy(err))
    const body = source.pipe(hasher)
    const upload = new Upload({
      client: this.client,
      queueSize: 4,
      partSize: PART_SIZE,
      leavePartsOnError: false,
      params: { Bucket: this.s.bucket, Key: this.key(key), Body: body, StorageClass: this.storageClass },
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
    signal?.throwIfAborted()
    const sums = hasher.sums()
    await this.setMetadata(key, sums, signal)
    return sums
  }

  /**
   * Our metadata on an object just uploaded without it: copied onto itself (REPLACE) while its ETag
   * is still our upload's (anything put there meanwhile fails the copy: 412), in one CopyObject up
   * to COPY_UP_TO, else a multipart copy in ranges of at most that.
   */
  private async setMetadata(key: string, sums: Sums, signal?: AbortSignal): Promise<void> {
    const Key = this.key(key)
    const CopySource = copySource(this.s.bucket, Key)
    const StorageClass = this.storageClass
    let etag: string | undefined
    try {
      const head = await this.client.send(new HeadObjectCommand({ Bucket: this.s.bucket, Key }), { abortSignal: signal })
      if (Number(head.ContentLength) !== sums.size) throw new MamError('conflict', `upload of ${key}: the object has ${head.ContentLength} bytes, ${sums.size} were sent`)
      etag = head.ETag
    } catch (err) {
      throw s3Error(err, `HEAD ${key}`)
    }
    const upTo = this.s.copyUpTo ?? COPY_UP_TO
    if (sums.size <= upTo) {
      try {
        await this.client.send(new CopyObjectCommand({ Bucket: this.s.bucket, Key, CopySource, CopySourceIfMatch: etag, MetadataDirective: 'REPLACE', Metadata: metadataOf(sums), StorageClass }), { abortSignal: signal })
      } catch (err) {
        throw s3Error(err, `copy of ${key} (its checksums)`)
      }
      return
    }
    let uploadId: string | undefined
    try {
      uploadId = (await this.client.send(new CreateMultipartUploadCommand({ Bucket: this.s.bucket, Key, Metadata: metadataOf(sums), StorageClass }), { abortSignal: signal })).UploadId
      const parts: Array<{ PartNumber: number; ETag?: string }> = []
      for (let at = 0, n = 1; at < sums.size; at += upTo, n++) {
        const r = await this.client.send(
          new UploadPartCopyCommand({ Bucket: this.s.bucket, Key, UploadId: uploadId, PartNumber: n, CopySource, CopySourceIfMatch: etag, CopySourceRange: `bytes=${at}-${Math.min(sums.size, at + upTo) - 1}` }),
          { abortSignal: signal },
        )
        parts.push({ PartNumber: n, ETag: r.CopyPartResult?.ETag })
      }
      await this.client.send(new CompleteMultipartUploadCommand({ Bucket: this.s.bucket, Key, UploadId: uploadId, MultipartUpload: { Parts: parts } }), { abortSignal: signal })
    } catch (err) {
      if (uploadId) await this.client.send(new AbortMultipartUploadCommand({ Bucket: this.s.bucket, Key, UploadId: uploadId })).catch(() => {})
      throw s3Error(err, `copy of ${key} (its checksums)`)
    }
  }

  /** an upload is durable when it is done: a batch is plain puts */
  batch(): PutBatch {
    return {
      put: (key, source, sums, signal) => this.put(key, source, sums, signal),
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
