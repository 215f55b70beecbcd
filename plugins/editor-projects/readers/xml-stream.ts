/**
 * A small streaming XML tokenizer. Project files reach hundreds of megabytes once unzipped
 * (Premiere keeps every preset, keyframe and base64 blob inline), so they are scanned chunk by
 * chunk and never held as one string or tree: memory stays at the largest single token (capped).
 * It is deliberately lenient where editing suites are sloppy: Resolve writes tag names such as
 * `ListMgt::LmVersionTable` (not well-formed XML), which are plain names here.
 */

export interface XmlHandler {
  /** an element starts; `empty` for `<a/>` (no `close` follows) */
  open(name: string, attrs: Record<string, string>, empty: boolean): void
  /** an element ends */
  close(name: string): void
  /** character data, raw (entities not decoded: call `decodeEntities` on what you keep); may come in pieces */
  text(raw: string, cdata: boolean): void
}


import { ProjectFileError } from './types.js'

const NAMED: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" }

export function decodeEntities(raw: string): string {
  if (!raw.includes('&')) return raw
  return raw.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|[a-zA-Z]+);/g, (all, ref: string) => {
    if (ref[0] !== '#') return NAMED[ref] ?? all
    const code = ref[1] === 'x' || ref[1] === 'X' ? parseInt(ref.slice(2), 16) : parseInt(ref.slice(1), 10)
    return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : all
  })
}

const ATTRIBUTE = /([^\s=/>]+)\s*=\s*("([^"]*)"|'([^']*)')/g

export class XmlStream {
  private buffer = ''
  private depth = 0

  constructor(
    private readonly handler: XmlHandler,
    /** the longest single tag, comment or text run kept whole (a guard against garbage input) */
    private readonly maxToken = 64 * 1024 * 1024,
  ) {}

  write(chunk: string) {
    this.buffer += chunk
    this.drain(false)
  }

  end() {
    this.drain(true)
    if (this.buffer.trim()) throw new ProjectFileError('the XML ends inside a tag, comment or section')
    if (this.depth !== 0) throw new ProjectFileError('the XML ends before its elements are closed (the file is cut short)')
  }

  /** elements currently open (0 at the end of a complete document) */
  get openElements() {
    return this.depth
  }

  private drain(final: boolean) {
    let pos = 0
    const b = this.buffer
    for (;;) {
      const lt = b.indexOf('<', pos)
      if (lt < 0) {
        // keep a possibly cut entity (`&am`) for the next chunk
        const amp = b.lastIndexOf('&')
        const cut = !final && amp >= pos && b.indexOf(';', amp) < 0 ? amp : b.length
        if (cut > pos) this.handler.text(b.slice(pos, cut), false)
        pos = cut
        break
      }
      if (lt > pos) this.handler.text(b.slice(pos, lt), false)
      pos = lt
      const end = this.token(b, lt)
      if (end < 0) break
      pos = end
    }
    this.buffer = b.slice(pos)
    if (this.buffer.length > this.maxToken) throw new ProjectFileError(`an XML token is longer than ${this.maxToken} characters`)
  }

  /** handles the construct at `lt`; returns the index after it, or -1 when it is not complete yet */
  private token(b: string, lt: number): number {
    if (b.startsWith('<!--', lt)) {
      const e = b.indexOf('-->', lt + 4)
      return e < 0 ? -1 : e + 3
    }
    if (b.startsWith('<![CDATA[', lt)) {
      const e = b.indexOf(']]>', lt + 9)
      if (e < 0) return -1
      this.handler.text(b.slice(lt + 9, e), true)
      return e + 3
    }
    if (b.startsWith('<?', lt)) {
      const e = b.indexOf('?>', lt + 2)
      return e < 0 ? -1 : e + 2
    }
    if (b.startsWith('<!', lt)) {
      // DOCTYPE, possibly with an internal subset in brackets
      let inSubset = false
      for (let i = lt + 2; i < b.length; i++) {
        const c = b[i]
        if (c === '[') inSubset = true
        else if (c === ']') inSubset = false
        else if (c === '>' && !inSubset) return i + 1
      }
      return -1
    }
    // a start or end tag: find its '>' outside quotes
    let quote = ''
    let i = lt + 1
    for (; i < b.length; i++) {
      const c = b[i]
      if (quote) {
        if (c === quote) quote = ''
      } else if (c === '"' || c === "'") quote = c
      else if (c === '>') break
    }
    if (i >= b.length) return -1
    const inner = b.slice(lt + 1, i)
    if (inner[0] === '/') {
      this.depth--
      this.handler.close(inner.slice(1).trim())
      return i + 1
    }
    const empty = inner.endsWith('/')
    const body = empty ? inner.slice(0, -1) : inner
    const nameEnd = body.search(/\s/)
    const name = nameEnd < 0 ? body : body.slice(0, nameEnd)
    if (!name) throw new ProjectFileError('the XML has an element without a name')
    const attrs: Record<string, string> = {}
    if (nameEnd >= 0) {
      ATTRIBUTE.lastIndex = 0
      const rest = body.slice(nameEnd)
      for (let m = ATTRIBUTE.exec(rest); m; m = ATTRIBUTE.exec(rest)) attrs[m[1]] = decodeEntities(m[3] ?? m[4] ?? '')
    }
    if (!empty) this.depth++
    this.handler.open(name, attrs, empty)
    return i + 1
  }
}

/**
 * A handler helper that knows the path of open element names and collects the text of the
 * elements a reader asks for (`collect` returns true), so readers stay declarative.
 */
export abstract class PathHandler implements XmlHandler {
  protected readonly path: string[] = []
  private collecting = -1
  private collected: string[] = []

  /** whether to gather the text of the element just opened (at `this.path`) */
  protected abstract collect(): boolean
  protected onOpen(_attrs: Record<string, string>, _empty: boolean): void {}
  /** the element at `this.path` closes; `text` is its decoded text when it was collected */
  protected onClose(_text: string | undefined): void {}

  open(name: string, attrs: Record<string, string>, empty: boolean) {
    this.path.push(name)
    this.onOpen(attrs, empty)
    if (empty) {
      if (this.collecting < 0 && this.collect()) this.onClose('')
      else this.onClose(undefined)
      this.path.pop()
      return
    }
    if (this.collecting < 0 && this.collect()) {
      this.collecting = this.path.length
      this.collected = []
    }
  }

  close(_name: string) {
    let text: string | undefined
    if (this.collecting === this.path.length) {
      text = decodeEntities(this.collected.join('')).trim()
      this.collecting = -1
      this.collected = []
    }
    this.onClose(text)
    this.path.pop()
  }

  text(raw: string, cdata: boolean) {
    if (this.collecting >= 0) this.collected.push(cdata ? raw.replace(/&/g, '&amp;').replace(/</g, '&lt;') : raw)
  }

  protected at(...tail: string[]) {
    if (tail.length > this.path.length) return false
    for (let i = 1; i <= tail.length; i++) if (tail[tail.length - i] !== '*' && tail[tail.length - i] !== this.path[this.path.length - i]) return false
    return true
  }
}
