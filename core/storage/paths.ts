import { realpath } from 'node:fs/promises'
import path from 'node:path'
import { MamError, invalidParam } from '../errors.js'

/**
 * The one module every client-supplied path goes through (SECURITY.md). A relative path from a
 * client is resolved inside a root; `..`, absolute paths, NUL bytes, overlong names and symlinks
 * that lead outside are refused. Containment is checked on resolved real paths, segment by segment,
 * never by string prefix.
 */

const MAX_SEGMENT_BYTES = 255
const MAX_PATH_BYTES = 4096

/** Checks a client path and returns its clean segments; throws 422 naming `param`. */
export function relativeSegments(input: string, param: string): string[] {
  if (typeof input !== 'string') throw invalidParam(param, 'must be a string')
  if (input.includes('\0')) throw invalidParam(param, 'must not contain NUL bytes')
  if (Buffer.byteLength(input) > MAX_PATH_BYTES) throw invalidParam(param, `must be at most ${MAX_PATH_BYTES} bytes`)
  if (path.isAbsolute(input) || /^[A-Za-z]:[\\/]/.test(input) || input.startsWith('\\'))
    throw invalidParam(param, 'must be a relative path')
  const segments = input.split(/[\\/]+/).filter((s) => s !== '' && s !== '.')
  for (const s of segments) {
    if (s === '..') throw invalidParam(param, 'must not contain ".." segments')
    if (Buffer.byteLength(s) > MAX_SEGMENT_BYTES) throw invalidParam(param, `has a name longer than ${MAX_SEGMENT_BYTES} bytes`)
  }
  return segments
}

/** true when `child` is `root` or lies below it (both absolute, resolved) */
export function isInside(root: string, child: string): boolean {
  const rel = path.relative(root, child)
  return rel === '' || (!rel.startsWith('..' + path.sep) && rel !== '..' && !path.isAbsolute(rel))
}

/**
 * Resolves a client path below `root`. The deepest existing ancestor is resolved with realpath, so
 * a symlink inside the tree that points outside it is refused even when the final name does not
 * exist yet (a write target).
 */
export async function resolveInside(root: string, input: string, param: string): Promise<string> {
  const segments = relativeSegments(input, param)
  const realRoot = await realpath(root)
  let existing = realRoot
  let i = 0
  for (; i < segments.length; i++) {
    const next = path.join(existing, segments[i])
    try {
      existing = await realpath(next)
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code
      if (code === 'ENOENT') break
      if (code === 'ENOTDIR') throw invalidParam(param, `goes through "${segments[i - 1] ?? segments[i]}", which is a file`)
      throw err
    }
    if (!isInside(realRoot, existing)) throw new MamError('forbidden', `${param} leads outside its storage`, { errors: [{ param, message: 'leads outside its storage' }] })
  }
  return path.join(existing, ...segments.slice(i))
}

/**
 * A single folder or file name derived from free text (a template or project name): separators,
 * control characters and names that mean something to the file system are replaced.
 */
export function safeName(text: string, fallback = 'unnamed'): string {
  let name = text
    .normalize('NFC')
    .replace(/[\u0000-\u001f\u007f/\\:*?"<>|]/g, '_')
    .replace(/^\.+/, (dots) => '_'.repeat(dots.length))
    .trim()
  while (Buffer.byteLength(name) > 200) name = name.slice(0, -1)
  return name || fallback
}
