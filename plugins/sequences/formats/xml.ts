import { XMLParser } from 'fast-xml-parser'
import { SequenceFormatError } from './errors.js'

/** fast-xml-parser set up for editing-suite files: attributes with `@`, values as strings, the named elements always arrays */
export function parseXml(text: string, arrays: string[]): any {
  const parser = new XMLParser({
    ignoreAttributes: false,
    attributeNamePrefix: '@',
    parseTagValue: false,
    parseAttributeValue: false,
    trimValues: true,
    processEntities: true,
    isArray: (name) => arrays.includes(name),
  })
  try {
    return parser.parse(text)
  } catch (err) {
    throw new SequenceFormatError(`not well-formed XML: ${String((err as Error).message).slice(0, 200)}`)
  }
}

/** the text of an element that may have attributes (`{ '#text': … }`) or none */
export const textOf = (v: unknown): string => (v === undefined || v === null ? '' : typeof v === 'object' ? String((v as Record<string, unknown>)['#text'] ?? '') : String(v))
