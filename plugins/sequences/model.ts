import type { Rate } from './time.js'

/**
 * A sequence as every reader produces and every writer consumes it, whatever the file format:
 * frames at the sequence's rate throughout. The database rows of a preditor sequence load into
 * this shape and an import stores it.
 */
export interface SequenceDoc {
  name: string
  rate: Rate
  dropFrame: boolean
  /** the sequence's start timecode in frames since midnight (01:00:00:00 → 90000 at 25) */
  start: number
  width?: number | null
  height?: number | null
  clips: SequenceClip[]
  markers: SequenceMarker[]
}

export type TrackKind = 'video' | 'audio'

export interface SequenceClip {
  kind: TrackKind
  /** 1-based: V1, V2 … / A1, A2 … */
  track: number
  /** where it starts on the sequence, frames from the sequence's start */
  record: number
  /** the used part of the source, frames from the source's first frame; `sourceOut` is exclusive */
  sourceIn: number
  sourceOut: number
  /** the source's start timecode (frames since midnight); null when the file does not say (EDL): then `sourceIn`/`sourceOut` are timecode frames */
  sourceStart: number | null
  name: string
  reel?: string | null
  /** what the file names as the media: a `file://` URL or a path */
  url?: string | null
  /** the MAM asset it conforms to; null for an offline clip */
  assetId?: number | null
}

export interface SequenceMarker {
  /** frames from the sequence's start */
  frame: number
  /** frames; 0 for a point marker */
  duration: number
  name: string
  comment: string
  color: string
}

export const clipLength = (c: Pick<SequenceClip, 'sourceIn' | 'sourceOut'>) => c.sourceOut - c.sourceIn
export const clipEnd = (c: SequenceClip) => c.record + clipLength(c)
/** `V1`, `A2` */
export const trackName = (c: Pick<SequenceClip, 'kind' | 'track'>) => `${c.kind === 'video' ? 'V' : 'A'}${c.track}`
export const sequenceLength = (doc: SequenceDoc) => doc.clips.reduce((n, c) => Math.max(n, clipEnd(c)), doc.markers.reduce((n, m) => Math.max(n, m.frame + m.duration), 0))

/** clips in timeline order: track kind (video first), track, record */
export const ordered = (clips: SequenceClip[]) => [...clips].sort((a, b) => (a.kind === b.kind ? 0 : a.kind === 'video' ? -1 : 1) || a.track - b.track || a.record - b.record)

/** a file name of a URL or path, decoded (`file://localhost/D%3a/media/a.mov` → `a.mov`) */
export function fileNameOf(url: string | null | undefined): string | null {
  const p = pathOfUrl(url)
  if (!p) return null
  const name = p.split(/[\\/]/).filter(Boolean).pop()
  return name || null
}

/** the path part of a `file://` URL (decoded, `/`-separated) or a plain path as written */
export function pathOfUrl(url: string | null | undefined): string | null {
  if (!url) return null
  let p = url.trim()
  const m = /^file:\/\/([^/]*)(\/.*)$/i.exec(p)
  if (m) {
    try {
      p = decodeURIComponent(m[2])
    } catch {
      p = m[2]
    }
  }
  return p.replace(/\\/g, '/')
}

/** an absolute path as a `file://` URL, each segment percent-encoded */
export const fileUrl = (absolute: string) => `file://${absolute.split('/').map((s) => encodeURIComponent(s)).join('/')}`
