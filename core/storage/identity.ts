import { lstat } from 'node:fs/promises'

/** what a file is, whatever its name: device and inode (as strings: inodes can pass 2^53) */
export interface FileIdentity {
  dev: string
  ino: string
  size: number
  mtime: Date
  isDirectory: boolean
}

/** the identity of what is at `p` (not following a symlink), or null when nothing is */
export async function identityOf(p: string): Promise<FileIdentity | null> {
  const info = await lstat(p, { bigint: true }).catch(() => null)
  if (!info) return null
  return { dev: info.dev.toString(), ino: info.ino.toString(), size: Number(info.size), mtime: new Date(Number(info.mtimeMs)), isDirectory: info.isDirectory() }
}

/** `found` is the file `known` describes (repairs decide by this where a moved file ended up) */
export const sameFile = (found: FileIdentity | null, known: { dev: string | null; ino: string | null }) => found !== null && found.dev === known.dev && found.ino === known.ino
