import { execFile } from 'node:child_process'
import { mkdtemp, open, readdir, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import { promisify } from 'node:util'

const run = promisify(execFile)

/**
 * A small tmpfs for the full-disk tests (issue 19): a disk that really fills, ENOSPC from the
 * kernel. Mounting needs root (CI runs as root); elsewhere the tests skip with the reason.
 */
export interface Tmpfs {
  dir: string
  /**
   * fills every byte and every inode left with files named `.filler-*`; `{ inodes: false }` leaves
   * the inodes, so folders and empty files can still be made and only writing bytes fails
   */
  fill(options?: { inodes?: boolean }): Promise<void>
  /** removes the fillers */
  free(): Promise<void>
  unmount(): Promise<void>
}

export async function mountTmpfs(sizeBytes: number, inodes = 2000): Promise<Tmpfs | string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'mamkit-tmpfs-'))
  try {
    await run('mount', ['-t', 'tmpfs', '-o', `size=${sizeBytes},nr_inodes=${inodes},mode=0777`, 'tmpfs', dir])
  } catch (err) {
    await rm(dir, { recursive: true, force: true })
    return `cannot mount a tmpfs here (${((err as Error).message.split('\n').find((l) => l.trim()) ?? '').slice(0, 200)}); run as root to test full disks`
  }
  let n = 0
  return {
    dir,
    async fill({ inodes: andInodes = true } = {}) {
      // bytes first, in shrinking chunks down to a page, then the inodes left
      const file = await open(path.join(dir, `.filler-${n++}`), 'w')
      try {
        for (let chunk = 1 << 20; chunk >= 512; ) {
          try {
            await file.write(Buffer.alloc(chunk))
          } catch (err) {
            if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err
            chunk >>= 1
          }
        }
      } finally {
        await file.close()
      }
      while (andInodes) {
        try {
          await writeFile(path.join(dir, `.filler-${n++}`), '', { flag: 'wx' })
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENOSPC') break
          throw err
        }
      }
    },
    async free() {
      for (const name of await readdir(dir)) if (name.startsWith('.filler-')) await rm(path.join(dir, name), { force: true })
    },
    async unmount() {
      await run('umount', ['-l', dir]).catch(() => {})
      await rm(dir, { recursive: true, force: true })
    },
  }
}
