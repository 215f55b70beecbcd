/**
 * `mamkit/testing`: what a plugin's tests need to run the real server (test/plugins/*, and a
 * partner plugin's own tests): a server on SQLite and PostgreSQL with an admin and a plain user,
 * requests, problem assertions, job waits with one configurable timeout, projects and rights set
 * up through the API, uploads and a mail catcher.
 *
 *   import { onEachDatabase, assertProblem } from 'mamkit/testing'
 *   onEachDatabase(t, 'notes', async (t, s) => { … }, { extraPlugins: [notesPlugin] })
 *
 * Node-tap (and smtp-server for startMailCatcher) are development dependencies of the tests that
 * use this entry; the server itself never imports it.
 */
export {
  startTestServer,
  onEachDatabase,
  databaseKinds,
  scratchDatabase,
  request,
  requestWithBody,
  assertProblem,
  type Asserts,
  type DbKind,
  type Reply,
  type RequestOptions,
  type TestServer,
  type TestServerOptions,
  type TestUser,
} from './server.js'
export { testTimeouts, waitFor, waitForJob, waitForJobs, type WaitForJobOptions } from './waiting.js'
export { login, createProject, teamWith, grant, readerAndStranger, upload, idsByName, settled, waitForAsset, type TestProject } from './fixtures.js'
export { startMailCatcher, parseMail, type CaughtMail, type MailCatcher } from './mail.js'
