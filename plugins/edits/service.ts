import { iso, MamError, conflict, invalidParam, notFound, quoted, deriveKey, unseal, seal, type EntityManager, type MamConfig, type MamContext } from '../../core/index.js'
import { Edit } from './entities.js'

/** what gets bound to a sealed password: it only decrypts on the row of the edit it was set for */
const passwordContext = (name: string) => `edit:${name}:smb-password`

/**
 * Edit workstations: registration, the sealed SMB password, and which edit a request acts on.
 * Resolved as `edits`; `smbPassword` is for plugins that set up the SMB share, never for responses.
 */
export class EditService {
  private readonly key: Buffer

  constructor(
    config: MamConfig,
    /** the folder of every edit's workspace, as the settings say now */
    readonly mountRoot: () => string,
  ) {
    this.key = deriveKey(config.secretKey, 'edits/smb-password')
  }

  async create(em: EntityManager, input: { name: string; password: string; comment?: string | null }): Promise<Edit> {
    if (await em.count(Edit, { name: input.name })) throw conflict(`An edit named "${input.name}" exists already`, { errors: [{ param: 'edit[name]', message: 'is taken' }] })
    const edit = em.create(Edit, { name: input.name, comment: input.comment ?? null, passwordSealed: seal(this.key, input.password, passwordContext(input.name)) })
    await em.flush()
    return edit
  }

  smbPassword(edit: Edit): string {
    return unseal(this.key, edit.passwordSealed, passwordContext(edit.name))
  }

  async byId(em: EntityManager, id: number): Promise<Edit> {
    const edit = await em.findOne(Edit, id)
    if (!edit) throw notFound('edit', id)
    return edit
  }

  /**
   * The edit a call acts on: the `edit` parameter (name, or id) or else the X-APP-EDIT header
   * (name). Neither: 400 naming both (wire.md); `optional` routes get null instead.
   */
  async fromRequest(ctx: MamContext, optional = false): Promise<Edit | null> {
    const param = ctx.input?.edit as string | number | undefined
    const header = ctx.app_client.edit
    if (param === undefined && !header) {
      if (optional) return null
      throw new MamError('bad_request', 'Name the edit this acts on: the `edit` parameter (name or id) or the X-APP-EDIT header', {
        errors: [
          { param: 'edit', message: 'or the X-APP-EDIT header is required' },
          { param: 'X-APP-EDIT', message: 'or the edit parameter is required' },
        ],
      })
    }
    const source = param !== undefined ? 'edit' : 'X-APP-EDIT'
    const value = String(param ?? header)
    let edit = await ctx.em.findOne(Edit, { name: value })
    if (!edit && source === 'edit' && /^[1-9]\d{0,9}$/.test(value)) edit = await ctx.em.findOne(Edit, Number(value))
    // named as sent, but cut short: the header can be thousands of characters
    if (!edit) throw invalidParam(source, `${quoted(source === 'edit' ? value : ctx.get('x-app-edit'), 100)} is not a registered edit`)
    return edit
  }

  serialize(edit: Edit) {
    return { id: edit.id, name: edit.name, comment: edit.comment, created_at: iso(edit.createdAt), updated_at: iso(edit.updatedAt) }
  }
}
