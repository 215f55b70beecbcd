/**
 * Plugins and the examples use only the public entry points (issue 9, finding 6): the core through
 * `core/index.ts` (the `mamkit` package entry), other plugins through their `index.ts` or `refs.ts`.
 * A deep import ties a plugin to a core internal that may change in any release, and a plugin's
 * internals to another's. Reads the TypeScript sources, so it holds for type-only imports too.
 */
import t from 'tap'
import { readdir, readFile } from 'node:fs/promises'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

const ROOT = fileURLToPath(new URL('../../../', import.meta.url))

/** the package's entry points (package.json "exports"), as repository paths */
const PUBLIC_ENTRIES = ['core/index.js', 'core/testing/index.js', 'plugins/index.js', 'host/index.js']

/**
 * Why `target` (a repository path, `.js` as written in the import) may not be imported from `from`,
 * or null when it may; "the rule" below pins it down.
 */
function violation(from: string, target: string): string | null {
  const [area, plugin] = from.split('/')
  if (area === 'plugins') {
    if (target.startsWith('core/')) return target === 'core/index.js' ? null : `a core internal (import it from 'core/index.js', the mamkit entry)`
    if (target.startsWith('plugins/')) {
      const parts = target.split('/')
      if (from === 'plugins/index.ts') return parts.length === 3 && parts[2] === 'index.js' ? null : 'a plugin internal'
      if (parts[1] === plugin) return null // its own modules
      if (parts.length === 3 && (parts[2] === 'index.js' || parts[2] === 'refs.js')) return null
      return `an internal of plugin "${parts[1]}" (import it from plugins/${parts[1]}/index.js or refs.js; export it there if it is meant for other plugins)`
    }
    return 'outside plugins/ and the core entry'
  }
  if (area === 'examples') {
    if (target.startsWith('examples/')) return target.split('/')[1] === plugin ? null : 'another example'
    return PUBLIC_ENTRIES.includes(target) && target !== 'core/testing/index.js' ? null : `not a public entry (${PUBLIC_ENTRIES.join(', ')})`
  }
  return null
}

async function sources(dir: string): Promise<string[]> {
  const out: string[] = []
  for (const entry of await readdir(path.join(ROOT, dir), { withFileTypes: true })) {
    const rel = `${dir}/${entry.name}`
    if (entry.isDirectory()) out.push(...(await sources(rel)))
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) out.push(rel)
  }
  return out
}

/** every relative module specifier of a file: imports, re-exports, `import type`, dynamic import() */
function specifiers(file: string, text: string): string[] {
  const src = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true)
  const found: string[] = []
  const visit = (node: ts.Node) => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) found.push(node.moduleSpecifier.text)
    else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword && node.arguments[0] && ts.isStringLiteralLike(node.arguments[0])) found.push(node.arguments[0].text)
    else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) found.push(node.argument.literal.text)
    ts.forEachChild(node, visit)
  }
  visit(src)
  return found.filter((s) => s.startsWith('.'))
}

const METHODS = new Set(['get', 'post', 'put', 'patch', 'delete'])

/** `routes.get(path, { input: Type.Object(…) }, …)`: schemas written inside a route declaration (finding 10) */
function inlineSchemas(file: string, text: string): string[] {
  const src = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true)
  const found: string[] = []
  const visit = (node: ts.Node) => {
    if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) && METHODS.has(node.expression.name.text)) {
      const target = node.expression.expression
      const options = node.arguments[1]
      if ((ts.isIdentifier(target) ? target.text : ts.isPropertyAccessExpression(target) ? target.name.text : '') === 'routes' && options && ts.isObjectLiteralExpression(options)) {
        for (const prop of options.properties) {
          if (!ts.isPropertyAssignment(prop) || !ts.isIdentifier(prop.name) || !['params', 'input', 'response'].includes(prop.name.text)) continue
          if (!ts.isIdentifier(prop.initializer) && !ts.isPropertyAccessExpression(prop.initializer)) {
            const { line } = src.getLineAndCharacterOfPosition(prop.getStart())
            found.push(`${file}:${line + 1}: ${prop.name.text} of ${node.arguments[0]?.getText()} is written inline; name it (a const beside the routes or in schemas.ts)`)
          }
        }
      }
    }
    ts.forEachChild(node, visit)
  }
  visit(src)
  return found
}

t.test('the rule', async (t) => {
  t.equal(violation('plugins/assets/routes.ts', 'core/index.js'), null)
  t.match(violation('plugins/assets/routes.ts', 'core/http/context.js'), /core internal/)
  t.match(violation('plugins/assets/routes.ts', 'core/testing/index.js'), /core internal/, 'plugin code does not use the test kit')
  t.equal(violation('plugins/assets/routes.ts', 'plugins/assets/service.js'), null, 'its own modules')
  t.equal(violation('plugins/assets/routes.ts', 'plugins/projects/index.js'), null)
  t.equal(violation('plugins/assets/routes.ts', 'plugins/projects/refs.js'), null)
  t.match(violation('plugins/assets/routes.ts', 'plugins/projects/service.js'), /internal of plugin "projects"/)
  t.match(violation('plugins/assets/routes.ts', 'host/index.js'), /outside/)
  t.equal(violation('plugins/index.ts', 'plugins/assets/index.js'), null)
  t.match(violation('plugins/index.ts', 'plugins/assets/refs.js'), /plugin internal/)
  t.equal(violation('examples/embed-koa/server.ts', 'host/index.js'), null)
  t.match(violation('examples/partner-plugin/plugin.ts', 'core/errors.js'), /not a public entry/)
  t.match(violation('examples/partner-plugin/plugin.ts', 'plugins/assets/index.js'), /not a public entry/)
})

t.test('plugins/ and examples/ import only public entry points', async (t) => {
  const files = [...(await sources('plugins')), ...(await sources('examples'))]
  t.ok(files.length > 100, `${files.length} source files read`)
  const found: string[] = []
  for (const file of files) {
    const text = await readFile(path.join(ROOT, file), 'utf8')
    for (const spec of specifiers(file, text)) {
      const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), spec))
      const why = violation(file, target)
      if (why) found.push(`${file}: '${spec}' is ${why}`)
    }
  }
  t.same(found, [], 'no deep imports')
})

t.test('route declarations name their schemas', async (t) => {
  t.same(inlineSchemas('x.ts', "api.routes.get('/a', { access: 'public', input: Type.Object({}) }, h)"), ["x.ts:1: input of '/a' is written inline; name it (a const beside the routes or in schemas.ts)"], 'the check finds one')
  t.same(inlineSchemas('x.ts', "routes.get('/a', { access: 'public', params: IdParams, input: schemas.Input }, h)"), [])
  const found: string[] = []
  for (const file of [...(await sources('plugins')), ...(await sources('examples'))]) found.push(...inlineSchemas(file, await readFile(path.join(ROOT, file), 'utf8')))
  t.same(found, [], 'no inline schemas in route declarations')
})
