import path from 'node:path'

export const MAX_NAME_BYTES = 255

/** the longest prefix of `text` of at most `max` UTF-8 bytes, cut between characters */
function fitBytes(text: string, max: number): string {
  let out = ''
  for (const ch of text) {
    if (Buffer.byteLength(out + ch) > max) break
    out += ch
  }
  return out
}

/** `clip.mov`, `clip (2).mov`, `clip (3).mov` …, each within 255 bytes (the base is shortened for the counter) */
export function* candidateNames(name: string): Generator<string> {
  yield name
  let ext = path.extname(name)
  let base = name.slice(0, name.length - ext.length)
  if (Buffer.byteLength(ext) > MAX_NAME_BYTES / 2) [base, ext] = [name, '']
  for (let n = 2; ; n++) {
    const suffix = ` (${n})${ext}`
    yield fitBytes(base, MAX_NAME_BYTES - Buffer.byteLength(suffix)) + suffix
  }
}
