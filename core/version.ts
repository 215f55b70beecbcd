import { readFileSync } from 'node:fs'

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }

export const SERVER_VERSION = pkg.version
/** the release of the API this server implements (spec §9) */
export const API_RELEASE = '7.0.5'
