import { PassThrough } from 'node:stream'
import path from 'node:path'
import type ExcelJS from 'exceljs'
import { Type } from 'typebox'
import { coreServices, type RegisterApi } from '../../core/index.js'
import { identityServices } from '../identity/index.js'
import { PROJECT } from './service.js'

const XLSX_TYPE = 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet'
const BATCH = 1000

export const ReportInput = Type.Object(
  {
    name: Type.Optional(Type.String({ maxLength: 200 })),
    library: Type.Optional(Type.Boolean()),
    frozen: Type.Optional(Type.Boolean()),
    storage: Type.Optional(Type.String({ maxLength: 64 })),
  },
  { additionalProperties: false },
)

/** the sheet's columns (bench/routes.ts builds its raw report with the same) */
export const REPORT_COLUMNS: Array<Partial<ExcelJS.Column>> = [
  { header: 'ID', key: 'id', width: 8 },
  { header: 'Name', key: 'name', width: 32 },
  { header: 'Alternative name', key: 'alternative_name', width: 24 },
  { header: 'Storage', key: 'storage', width: 14 },
  { header: 'Path', key: 'path', width: 48 },
  { header: 'Template', key: 'template', width: 24 },
  { header: 'Library', key: 'library', width: 9 },
  { header: 'Frozen', key: 'frozen', width: 9 },
  { header: 'Frozen by', key: 'frozen_by', width: 16 },
  { header: 'Size (bytes)', key: 'size', width: 16, style: { numFmt: '#,##0' } },
  { header: 'Quota (bytes)', key: 'quota', width: 16, style: { numFmt: '#,##0' } },
  { header: 'Encoding priority', key: 'encoding_priority', width: 10 },
  { header: 'Created by', key: 'created_by', width: 16 },
  { header: 'Created at', key: 'created_at', width: 20, style: { numFmt: 'yyyy-mm-dd hh:mm:ss' } },
  { header: 'Updated at', key: 'updated_at', width: 20, style: { numFmt: 'yyyy-mm-dd hh:mm:ss' } },
]

const date = (v: unknown) => (v === null || v === undefined ? null : new Date(v as string | number))
const bytes = (v: unknown) => (v === null || v === undefined ? null : Number(v))

/** GET /projects_report (§4.20): the projects the caller can read as an .xlsx sheet, one row each. */
export function registerProjectReport({ routes }: RegisterApi) {
  routes.get('/projects_report', { access: 'authenticated', input: ReportInput, summary: '.xlsx report of the project list (filters: name, library, frozen, storage)' }, async (ctx) => {
    const knex = ctx.resolve(coreServices.knex)
    const storages = ctx.resolve(coreServices.storages)
    const { name, library, frozen, storage } = ctx.input
    const base = () => {
      let q = knex('projects as p')
        .leftJoin('templates as t', 't.id', 'p.template_id')
        .leftJoin('users as cu', 'cu.id', 'p.created_by_id')
        .leftJoin('users as fu', 'fu.id', 'p.frozen_by_id')
        .where('p.deleted', false)
      // the same match as GET /projects: any case, % _ \\ literal
      if (name) q = q.whereRaw(`lower(p.name) like ? escape '\\'`, [`%${name.toLowerCase().replace(/[\\%_]/g, (c: string) => `\\${c}`)}%`])
      if (library !== undefined) q = q.where('p.is_library_project', library)
      if (frozen !== undefined) q = frozen ? q.whereNotNull('p.frozen_at') : q.whereNull('p.frozen_at')
      if (storage) q = q.where('p.storage', storage)
      if (!ctx.user.isAdmin) q = q.whereIn('p.id', ctx.resolve(identityServices.accessRights).readableIds(ctx.user, PROJECT.type))
      return q.select(
        'p.id', 'p.name', 'p.alternative_name', 'p.storage', 'p.folder', 'p.is_library_project', 'p.frozen_at', 'p.size', 'p.quota',
        'p.encoding_priority', 'p.created_at', 'p.updated_at', 't.name as template', 'cu.username as created_by', 'fu.username as frozen_by',
      )
    }
    const rootOf = (name: string) => {
      try {
        return storages.get(name).root
      } catch {
        return null // a storage removed from the configuration: the row keeps its relative folder
      }
    }

    const out = new PassThrough()
    const chunks: Buffer[] = []
    out.on('data', (c: Buffer) => chunks.push(c))
    const ended = new Promise((resolve, reject) => out.on('end', resolve).on('error', reject))
    // loaded on the first report, not at start-up (~1 s of module loading on a loaded machine)
    const { default: Excel } = await import('exceljs')
    const workbook = new Excel.stream.xlsx.WorkbookWriter({ stream: out, useStyles: true, useSharedStrings: false })
    workbook.creator = 'mamkit'
    workbook.created = new Date()
    const sheet = workbook.addWorksheet('Projects', { views: [{ state: 'frozen', ySplit: 1 }] })
    sheet.columns = REPORT_COLUMNS
    sheet.getRow(1).font = { bold: true }
    sheet.getRow(1).commit()
    // keyset pages in the sheet's order, so memory stays flat however many projects there are
    let last: { name: string; id: number } | null = null
    for (;;) {
      let q = base().orderBy([{ column: 'p.name' }, { column: 'p.id' }]).limit(BATCH)
      if (last) {
        const { name: n, id } = last
        q = q.where((b) => b.where('p.name', '>', n).orWhere((b2) => b2.where('p.name', n).andWhere('p.id', '>', id)))
      }
      const rows = await q
      for (const r of rows) {
        const root = rootOf(r.storage)
        sheet
          .addRow({
            id: Number(r.id),
            name: r.name,
            alternative_name: r.alternative_name,
            storage: r.storage,
            // absolute server paths are for administrators (SECURITY.md)
            path: root && ctx.user.isAdmin ? path.join(root, r.folder) : r.folder,
            template: r.template,
            library: Boolean(r.is_library_project),
            frozen: r.frozen_at !== null,
            frozen_by: r.frozen_by,
            size: bytes(r.size),
            quota: bytes(r.quota),
            encoding_priority: Number(r.encoding_priority),
            created_by: r.created_by,
            created_at: date(r.created_at),
            updated_at: date(r.updated_at),
          })
          .commit()
      }
      if (rows.length < BATCH) break
      last = { name: rows[rows.length - 1].name, id: Number(rows[rows.length - 1].id) }
    }
    sheet.autoFilter = { from: { row: 1, column: 1 }, to: { row: 1, column: REPORT_COLUMNS.length } }
    sheet.commit()
    await workbook.commit()
    await ended
    const day = new Date().toISOString().slice(0, 10)
    ctx.type = XLSX_TYPE
    ctx.set('Content-Disposition', `attachment; filename="projects-${day}.xlsx"`)
    return Buffer.concat(chunks)
  })
}
