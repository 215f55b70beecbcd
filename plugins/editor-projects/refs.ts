import { createServiceRef } from '../../core/index.js'
import type { EditorProjectService } from './service.js'

/** The editor-projects plugin's services, for plugins that list `editor-projects` in their dependsOn. */
export const editorProjectServices = {
  /** sequence names and media of editing-suite project files stored as assets */
  service: createServiceRef<EditorProjectService>('editor-projects.service'),
} as const
