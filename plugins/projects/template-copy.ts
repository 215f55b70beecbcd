import { copyFile, lstat, readdir, readFile, writeFile } from 'node:fs/promises'
import { gunzipSync, gzipSync } from 'node:zlib'
import path from 'node:path'
import { invalidParam, makeDirs } from '../../core/index.js'
import { applySubstitutions, type SubstitutionContext, type SubstitutionPattern, type TemplateType } from '../templates/index.js'

export interface CopyPlan {
  patterns: SubstitutionPattern[]
  context: SubstitutionContext
  type: Pick<TemplateType, 'substitute_in' | 'text_files'>
  /** false: files that exist in the target are kept (addtemplate merges without overwriting) */
  overwrite: boolean
  /** the request parameter named when a substituted name is too long (default `name`) */
  param?: string
}

const MAX_NAME_BYTES = 255

const globToRegExp = (glob: string) => new RegExp(`^${glob.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.')}$`, 'i')

/**
 * Copies a template's folder tree into a project folder, replacing tokens in folder names, file
 * names and, for the text files the template type names, in their content (.prproj files are
 * gzip-compressed XML and are substituted inside). Symlinks in templates are not followed.
 * Returns the number of bytes written.
 */
export async function copyTemplateTree(from: string, to: string, plan: CopyPlan): Promise<number> {
  const names = plan.type.substitute_in
  const textGlobs = plan.type.substitute_in.includes('text_files') ? plan.type.text_files.map(globToRegExp) : []
  const rename = (name: string, kind: 'folder_names' | 'file_names') => {
    const renamed = names.includes(kind) ? applySubstitutions(name, plan.patterns, plan.context) : name
    // a pattern must never turn a name into a path, nor into "." or ".." (a project named ".." would write beside itself)
    const safe = renamed.replace(/[/\\\0]/g, '_') || name
    if (Buffer.byteLength(safe) > MAX_NAME_BYTES)
      throw invalidParam(plan.param ?? 'name', `makes the template name "${name}" longer than ${MAX_NAME_BYTES} bytes`)
    return safe === '.' || safe === '..' ? safe.replace(/\./g, '_') : safe
  }
  let written = 0
  const walk = async (src: string, dst: string) => {
    await makeDirs(dst)
    for (const entry of await readdir(src, { withFileTypes: true })) {
      const source = path.join(src, entry.name)
      if (entry.isDirectory()) {
        await walk(source, path.join(dst, rename(entry.name, 'folder_names')))
        continue
      }
      if (!entry.isFile()) continue
      const target = path.join(dst, rename(entry.name, 'file_names'))
      if (!plan.overwrite && (await lstat(target).then(() => true, () => false))) continue
      if (textGlobs.some((g) => g.test(entry.name))) {
        const content = await substituteContent(await readFile(source), plan)
        await writeFile(target, content)
        written += content.length
      } else {
        await copyFile(source, target)
        written += (await lstat(target)).size
      }
    }
  }
  await walk(from, to)
  return written
}

async function substituteContent(raw: Buffer, plan: CopyPlan): Promise<Buffer> {
  const gzipped = raw[0] === 0x1f && raw[1] === 0x8b
  const text = (gzipped ? gunzipSync(raw) : raw).toString('utf8')
  const out = Buffer.from(applySubstitutions(text, plan.patterns, plan.context), 'utf8')
  return gzipped ? gzipSync(out) : out
}
