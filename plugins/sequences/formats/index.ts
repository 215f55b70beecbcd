import type { SequenceDoc } from '../model.js'
import type { Rate } from '../time.js'
import { readEdl, writeEdl } from './edl.js'
import { SequenceFormatError } from './errors.js'
import { readFcpxml, writeFcpxml } from './fcpxml.js'
import { readOtio, writeOtio } from './otio.js'
import { readXmeml, writeXmeml } from './xmeml.js'

export { SequenceFormatError }

/** `format=` of GET /preditor_sequences/:id/download; `aaf` is answered 501 (no writer yet) */
export const DOWNLOAD_FORMATS = ['xml', 'fcpxml', 'edl', 'otio', 'aaf'] as const
export type DownloadFormat = (typeof DOWNLOAD_FORMATS)[number]
/** what an import or a sequence report reads */
export const READ_FORMATS = ['edl', 'xml', 'fcpxml', 'otio'] as const
export type ReadFormat = (typeof READ_FORMATS)[number]

export const FILE_TYPES: Record<Exclude<DownloadFormat, 'aaf'>, { extension: string; type: string }> = {
  xml: { extension: 'xml', type: 'application/xml; charset=utf-8' },
  fcpxml: { extension: 'fcpxml', type: 'application/xml; charset=utf-8' },
  edl: { extension: 'edl', type: 'text/plain; charset=utf-8' },
  otio: { extension: 'otio', type: 'application/json; charset=utf-8' },
}

export function writeSequence(format: Exclude<DownloadFormat, 'aaf'>, doc: SequenceDoc): string {
  switch (format) {
    case 'xml':
      return writeXmeml(doc)
    case 'fcpxml':
      return writeFcpxml(doc)
    case 'edl':
      return writeEdl(doc).text
    case 'otio':
      return writeOtio(doc)
  }
}

/** the format of a sequence file from its content */
export function sniffSequence(text: string): ReadFormat | null {
  const head = text.slice(0, 4096).replace(/^\uFEFF/, '')
  if (/<fcpxml[\s>]/.test(head)) return 'fcpxml'
  if (/<xmeml[\s>]/.test(head)) return 'xml'
  if (/^\s*\{/.test(head) && /"OTIO_SCHEMA"\s*:\s*"Timeline\./.test(head)) return 'otio'
  if (/^\s*\d{3,6}\s+\S+\s+\S+\s+(C|D|W\d+)\s/m.test(head) || /^\s*TITLE:/m.test(head)) return 'edl'
  return null
}

/** reads a sequence file; `edlRate` is the frame rate of an EDL (the file does not carry one) */
export function readSequence(format: ReadFormat, text: string, edlRate: Rate): SequenceDoc {
  switch (format) {
    case 'edl':
      return readEdl(text, edlRate)
    case 'xml':
      return readXmeml(text)
    case 'fcpxml':
      return readFcpxml(text)
    case 'otio':
      return readOtio(text)
  }
}
