/**
 * What search.ts and its companion tools (search-explain, search-phases, search-walk) share: the
 * seed's vocabulary and the terms timed against it, and a server started on a database that
 * `search.js --keep` left behind.
 */
import { mkdir } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { startTestServer, type TestServer } from '../test/helpers/index.js'

/** a deterministic pseudo-random sequence (the same data on both databases) */
export function rng(seed: number) {
  let x = seed
  return () => ((x = (x * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff)
}

const SYLLABLES = ['ka', 'ri', 'mo', 'te', 'lu', 'san', 'vor', 'pel', 'di', 'xen', 'qua', 'bo', 'ner', 'fi', 'gal', 'tor']
export function vocabulary(n: number, r: () => number): string[] {
  const out = new Set<string>()
  while (out.size < n) out.add(Array.from({ length: 2 + Math.floor(r() * 3) }, () => SYLLABLES[Math.floor(r() * SYLLABLES.length)]).join(''))
  return [...out]
}

/** the seed's 2,000 words, as search.ts draws them first from rng(42) */
export const seedWords = () => vocabulary(2000, rng(42))

/** the terms the bench times, by label, from the seed's words */
export const searchTerms = (words: string[]): Record<string, string> => ({
  'frequent prefix': words[0].slice(0, 4),
  'rare word': words[1900],
  phrase: `"${words[0]} ${words[1]}"`,
  'field:value': `client:client ${words[5]}`,
  'word + property': `${words[3]} reel_name:A01`,
})

/** the data dir `search.js --keep` keeps beside database `name` */
export const keptDataDir = (name: string) => path.join(tmpdir(), `mamkit-bench-${name}`)

/**
 * A server on the PostgreSQL database `reuse` kept by `search.js --keep`, with the data dir kept
 * beside it (its secret key seals rows of the database), and that database's URL.
 */
export async function startOnKept(reuse: string | undefined): Promise<{ server: TestServer; databaseUrl: string }> {
  const serverUrl = process.env.MAMKIT_BENCH_DATABASE_URL ?? process.env.MAMKIT_TEST_DATABASE_URL
  if (!serverUrl || !reuse) throw new Error('needs MAMKIT_BENCH_DATABASE_URL and --reuse <database kept by search.js --keep>')
  const url = new URL(serverUrl)
  url.pathname = `/${reuse}`
  const dataDir = keptDataDir(reuse)
  await mkdir(dataDir, { recursive: true })
  const server = await startTestServer({ db: 'postgresql', databaseUrl: url.toString(), dataDir })
  return { server, databaseUrl: url.toString() }
}
