import { ProjectFileError, UnsupportedProjectFile, readProjectFile, type ProjectReading, type ReadLimits } from './readers/index.js'

export interface ReadTask {
  /** the original's descriptor path, opened and checked by the job on the main thread */
  file: string
  name: string
  size: number
  limits: ReadLimits
}

export type ReadResult = { reading: ProjectReading } | { refused: { message: string; status: number } }

/**
 * Runs in a piscina worker thread: parses one project file. A refusal (malformed, too large) is
 * returned, not thrown, so its status survives the thread boundary.
 */
export default async function readInWorker(task: ReadTask): Promise<ReadResult> {
  try {
    return { reading: await readProjectFile(task.file, task.name, task.size, task.limits) }
  } catch (err) {
    if (err instanceof ProjectFileError || err instanceof UnsupportedProjectFile) return { refused: { message: err.message, status: err.status } }
    throw err
  }
}
