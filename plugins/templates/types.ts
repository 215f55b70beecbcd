/**
 * The template types the server knows (GET /template_types). Each says what a project created from
 * it contains and where substitution patterns are applied; the projects plugin follows `substitute_in`.
 */
export interface TemplateType {
  id: string
  name: string
  description: string
  /** what the template folder is expected to hold */
  sets_up: string[]
  /** where tokens are replaced when a project is created */
  substitute_in: Array<'folder_names' | 'file_names' | 'text_files'>
  /** files whose text content gets substituted (globs on the file name) */
  text_files: string[]
}

export const TEMPLATE_TYPES: TemplateType[] = [
  {
    id: 'generic',
    name: 'Generic folder structure',
    description: 'A plain folder tree copied into every new project; tokens are replaced in folder and file names.',
    sets_up: ['folder tree', 'any files placed in the template folder'],
    substitute_in: ['folder_names', 'file_names'],
    text_files: [],
  },
  {
    id: 'avid_media_composer',
    name: 'Avid Media Composer project',
    description:
      'An Avid project folder: the .avp project file, its settings and bins (.avb), plus media folders. Tokens are replaced in names and in the text project settings files.',
    sets_up: ['<project>.avp project file', '<project> Settings.avs', 'bins (.avb)', 'Avid MediaFiles folders'],
    substitute_in: ['folder_names', 'file_names', 'text_files'],
    text_files: ['*.avs', '*.txt', '*.xml'],
  },
  {
    id: 'premiere_pro',
    name: 'Adobe Premiere Pro project',
    description:
      'A Premiere Pro project (.prproj, gzip-compressed XML) with its media, cache and auto-save folders. Tokens are replaced in names and inside the project XML.',
    sets_up: ['<project>.prproj project file', 'Adobe Premiere Pro Auto-Save', 'media and export folders'],
    substitute_in: ['folder_names', 'file_names', 'text_files'],
    text_files: ['*.prproj', '*.xml'],
  },
  {
    id: 'davinci_resolve',
    name: 'DaVinci Resolve project',
    description:
      'A DaVinci Resolve project export (.drp) with media, cache and render folders. Tokens are replaced in names; .drp archives are copied as they are.',
    sets_up: ['<project>.drp project export', 'CacheClip and render folders', 'media folders'],
    substitute_in: ['folder_names', 'file_names'],
    text_files: [],
  },
  {
    id: 'final_cut_pro',
    name: 'Final Cut Pro library',
    description: 'A Final Cut Pro library with an FCPXML event file; tokens are replaced in names and in the FCPXML.',
    sets_up: ['<project>.fcpbundle library folder', '*.fcpxml event descriptions'],
    substitute_in: ['folder_names', 'file_names', 'text_files'],
    text_files: ['*.fcpxml'],
  },
]

export const TEMPLATE_TYPE_IDS = TEMPLATE_TYPES.map((t) => t.id)
