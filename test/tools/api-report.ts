/**
 * The API report: every export of the public entry points (package.json "exports") with its
 * declared shape, as the TypeScript checker sees it, in one committed file (core/api-report.api.md).
 * A change of the partner contract then shows in review as a diff of that file, the way
 * api-extractor's reports do; test/core/api-report.test.ts fails while the file is stale.
 *
 *   npm run api-report          # rewrite core/api-report.api.md from the sources
 *
 * Only exported names are listed, with the types of their public members; a type they mention by
 * name is listed when it is exported too (an unexported one shows as its name).
 */
import { readFile, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

export const ROOT = fileURLToPath(new URL('../../../', import.meta.url))
export const REPORT = path.join(ROOT, 'core/api-report.api.md')

/** package entry → source file, in package.json order */
export const ENTRIES: Array<[string, string]> = [
  ['mamkit', 'core/index.ts'],
  ['mamkit/testing', 'core/testing/index.ts'],
  ['mamkit/plugins', 'plugins/index.ts'],
  ['mamkit/host', 'host/index.ts'],
]

const FORMAT = ts.TypeFormatFlags.NoTruncation | ts.TypeFormatFlags.UseSingleQuotesForStringLiteralType | ts.TypeFormatFlags.WriteArrayAsGenericType

function compilerOptions(): ts.CompilerOptions {
  const configPath = path.join(ROOT, 'tsconfig.json')
  const { config } = ts.readConfigFile(configPath, ts.sys.readFile)
  const { options } = ts.parseJsonConfigFileContent(config, ts.sys, ROOT)
  return { ...options, noEmit: true, declaration: false, sourceMap: false }
}

const isPublicMember = (d: ts.Declaration) => {
  const flags = ts.getCombinedModifierFlags(d)
  if (flags & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) return false
  const name = ts.getNameOfDeclaration(d)
  return !(name && ts.isPrivateIdentifier(name))
}

function typeParams(decl: ts.Declaration | undefined): string {
  const params = decl && 'typeParameters' in decl ? (decl as { typeParameters?: ts.NodeArray<ts.TypeParameterDeclaration> }).typeParameters : undefined
  return params?.length ? `<${params.map((p) => p.getText()).join(', ')}>` : ''
}

function members(checker: ts.TypeChecker, type: ts.Type, at: ts.Node, indent: string): string[] {
  const out: string[] = []
  for (const prop of checker.getPropertiesOfType(type)) {
    const decl = prop.valueDeclaration ?? prop.declarations?.[0]
    if (decl && !isPublicMember(decl)) continue
    // what a class inherits from a library (Error's stack, captureStackTrace) is not ours to report
    if (decl?.getSourceFile().fileName.includes('/node_modules/')) continue
    const optional = prop.flags & ts.SymbolFlags.Optional ? '?' : ''
    const readonly = decl && ts.getCombinedModifierFlags(decl) & ts.ModifierFlags.Readonly ? 'readonly ' : ''
    const propType = checker.getTypeOfSymbolAtLocation(prop, at)
    const signatures = prop.flags & ts.SymbolFlags.Method ? propType.getCallSignatures() : []
    if (signatures.length) for (const sig of signatures) out.push(`${indent}${prop.name}${optional}${checker.signatureToString(sig, at, FORMAT)}`)
    else out.push(`${indent}${readonly}${prop.name}${optional}: ${checker.typeToString(propType, at, FORMAT)}`)
  }
  for (const sig of type.getCallSignatures()) out.push(`${indent}${checker.signatureToString(sig, at, FORMAT)}`)
  for (const info of checker.getIndexInfosOfType(type)) out.push(`${indent}[key: ${checker.typeToString(info.keyType)}]: ${checker.typeToString(info.type, at, FORMAT)}`)
  return out
}

function describe(checker: ts.TypeChecker, name: string, exported: ts.Symbol, at: ts.Node): string {
  const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported
  const decl = symbol.valueDeclaration ?? symbol.declarations?.[0]
  // another package's API (typebox, knex, MikroORM) is that package's report, not ours
  const home = decl?.getSourceFile().fileName
  if (home?.includes('/node_modules/')) return `${name}: re-exported from ${home.replace(/^.*\/node_modules\/((@[^/]+\/)?[^/]+)\/.*$/, '$1')}`
  const parts: string[] = []
  if (symbol.flags & ts.SymbolFlags.Class) {
    const classType = checker.getDeclaredTypeOfSymbol(symbol) as ts.InterfaceType
    const base = classType.getBaseTypes?.()?.map((b) => checker.typeToString(b, at, FORMAT)) ?? []
    const statics = checker.getTypeOfSymbolAtLocation(symbol, at)
    const lines = [
      ...statics.getConstructSignatures().map((sig) => `  constructor${checker.signatureToString(sig, at, FORMAT).replace(/: [^:]*$/, '')}`),
      ...members(checker, statics, at, '  static ').filter((l) => !/^ {2}static prototype[:?]/.test(l)),
      ...members(checker, classType, at, '  '),
    ]
    parts.push(`class ${name}${typeParams(decl)}${base.length ? ` extends ${base.join(', ')}` : ''} {\n${lines.join('\n')}\n}`)
  } else if (symbol.flags & ts.SymbolFlags.Interface) {
    const type = checker.getDeclaredTypeOfSymbol(symbol)
    parts.push(`interface ${name}${typeParams(decl)} {\n${members(checker, type, at, '  ').join('\n')}\n}`)
  } else if (symbol.flags & ts.SymbolFlags.TypeAlias) {
    const aliasDecl = symbol.declarations!.find(ts.isTypeAliasDeclaration)!
    parts.push(`type ${name}${typeParams(aliasDecl)} = ${checker.typeToString(checker.getTypeFromTypeNode(aliasDecl.type), at, FORMAT | ts.TypeFormatFlags.InTypeAlias)}`)
  } else if (symbol.flags & ts.SymbolFlags.Function) {
    for (const sig of checker.getTypeOfSymbolAtLocation(symbol, at).getCallSignatures()) parts.push(`function ${name}${checker.signatureToString(sig, at, FORMAT)}`)
  } else if (symbol.flags & ts.SymbolFlags.Variable) {
    parts.push(`const ${name}: ${checker.typeToString(checker.getTypeOfSymbolAtLocation(symbol, at), at, FORMAT)}`)
  } else if (symbol.flags & ts.SymbolFlags.Enum) {
    parts.push(`enum ${name}`)
  }
  // a value and a type under one name (TypeBox schemas: `const X` and `type X = Static<typeof X>`)
  if (symbol.flags & ts.SymbolFlags.Variable && symbol.flags & ts.SymbolFlags.TypeAlias) parts.reverse()
  if (parts.length === 0) parts.push(`/* ${name}: ${ts.SymbolFlags[symbol.flags] ?? symbol.flags} */`)
  return parts.join('\n')
}

/** the report's text, from the sources under ROOT */
export function apiReport(): string {
  const files = ENTRIES.map(([, file]) => path.join(ROOT, file))
  const program = ts.createProgram(files, compilerOptions())
  const checker = program.getTypeChecker()
  const sections = [
    '# mamkit API report',
    '',
    'Generated by `npm run api-report` (test/tools/api-report.ts) from the public entry points; do not edit.',
    'test/core/api-report.test.ts fails when this file differs from the sources: a change of the partner',
    'contract shows here in review.',
  ]
  for (const [entry, file] of ENTRIES) {
    const source = program.getSourceFile(path.join(ROOT, file))
    if (!source) throw new Error(`${file} not found`)
    const moduleSymbol = checker.getSymbolAtLocation(source)
    if (!moduleSymbol) throw new Error(`${file} is not a module`)
    const exports = checker.getExportsOfModule(moduleSymbol).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    sections.push('', `## ${entry} (${file})`, '', '```ts')
    // names without their module (`import("…/core/plugin/services").ServiceRef` → `ServiceRef`): shorter, and stable across checkouts
    for (const symbol of exports) sections.push(describe(checker, symbol.name, symbol, source).replace(/import\("[^"]*"\)\./g, '').replace(/import\("[^"]*\/node_modules\/(?:@types\/)?((?:@[^/"]+\/)?[^/"]+)[^"]*"\)/g, 'import("$1")'))
    sections.push('```')
  }
  return sections.join('\n') + '\n'
}

/** `node dist/test/tools/api-report.js` rewrites the report; `--check` only compares */
if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const text = apiReport()
  if (process.argv.includes('--check')) {
    const committed = await readFile(REPORT, 'utf8').catch(() => '')
    if (committed !== text) {
      console.error(`${path.relative(ROOT, REPORT)} is stale: run npm run api-report and commit it`)
      process.exit(1)
    }
  } else {
    await writeFile(REPORT, text)
    console.log(`wrote ${path.relative(ROOT, REPORT)} (${text.split('\n').length} lines)`)
  }
}
