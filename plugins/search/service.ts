import type { AccessRightService } from '../identity/index.js'
import { refreshAssets } from './migrations.js'
import { FIELD_LEXEME_ROWS, PREFIX_LEXEMES, TAG_BUCKET_BITS, fieldLexeme, ftsAny, ftsField, ftsFieldText, ftsQuery, parseTerm, tsLexeme, tsquery, tsqueryAny, tsqueryField, tsqueryFieldCandidates, tsqueryBuckets, tsqueryProjects, wordsOf, type FieldFilter, type ParsedTerm } from './query.js'

import { column, escapeLike, invalid, type Dialect, type Knex, type ParamError, type Principal } from '../../core/index.js'
export interface SearchFilters {
  project_id?: number
  type?: 'video' | 'audio' | 'image' | 'other'
  folder?: string
  status_flag?: number
  created_after?: string
  created_before?: string
}

export interface SearchOptions extends SearchFilters {
  term: string
  per_page: number
  page?: number
  /** keyset cursors: results after these keys (deep pages); `'ended'`: that list has no more rows */
  afterAsset?: SearchKey | 'ended'
  afterProject?: SearchKey | 'ended'
}

/**
 * Where a list stopped, as it is ordered: ranking window by window (newest matches first, at most
 * `rankWindow` matches per window), within a window by rank (descending), then by id (descending,
 * newest first among equal ranks). The rank is the database's own value (PostgreSQL `real`, SQLite
 * `double`), carried unrounded so the next page starts exactly after the last row; the window's
 * bounds are carried as they were fixed on the page that opened it, so later pages rank the same set.
 */
export interface SearchKey {
  rank: number
  id: number
  window: RankWindow
}

/**
 * The matches ranked together: ids in `[floor, top)` (`top` null: no upper bound, the first window;
 * `floor` 0: no lower bound, every remaining match). A window is opened as the `rankWindow` newest
 * matches below `top` (a cheap ordered scan), so a frequent word ranks a thousand rows, not every one.
 */
export interface RankWindow {
  top: number | null
  floor: number
}

export interface Match {
  field: string
  snippet: string
  /** a transcript match: where in the asset (seconds and `HH:MM:SS.mmm`), in which transcript and sentence */
  time?: number
  timecode?: string
  transcription_id?: number
  sentence_id?: number
}

/** a piece of text for an asset's document (`setAssetTexts`) */
export interface AssetText {
  /** the giver's row (a sentence's id) */
  ref_id: number
  /** where in the asset it is said, in milliseconds */
  start_ms: number | null
  text: string
}

export interface SearchResult {
  assets: Array<Record<string, unknown>>
  projects: Array<Record<string, unknown>>
  /** the cursor of the next page, when one of the lists was full (a list that ended has no key) */
  next: { a?: SearchKey; p?: SearchKey } | null
}


/**
 * A term's indexed tests (PostgreSQL), for the planner's estimates. `words`: the word index is among them, with
 * no phrase (so id buckets can narrow it, firstTier); `projects`: a reader's project tags, which the statements add.
 */
interface Tests {
  sql: string
  bindings: unknown[]
  words: boolean
  projects: string | null
}

const SNIPPET = 80
/** a window whose ids span at most this many times its size is read by id range, not through the word index */
const NARROW = 50

/**
 * One search over the index the triggers keep (migrations.ts): PostgreSQL's tsvector with a GIN
 * index, or SQLite's FTS5. The access filter, the field filters and the keyset are part of the one
 * SQL statement per list, so a page holds only rows the user may read and is never cut short.
 */
export class SearchService {
  constructor(
    private readonly knex: Knex,
    private readonly dialect: Dialect,
    private readonly rights: AccessRightService,
    private readonly properties: () => string[],
    /** how many matches are ranked together (the `rankWindow` setting, read on each search) */
    private readonly rankWindow: () => number = () => 1000,
  ) {}

  /**
   * Replaces the texts `source` gives an asset under `sourceId` (a transcript's sentences) and rewrites
   * the asset's document, in the caller's transaction (`db`): the index changes with the change. An
   * empty list removes them.
   */
  async setAssetTexts(db: Knex, assetId: number, source: string, sourceId: number, texts: AssetText[]): Promise<void> {
    await db('search_texts').where({ asset_id: assetId, source, source_id: sourceId }).delete()
    const rows = texts.filter((t) => t.text.trim()).map((t) => ({ asset_id: assetId, source, source_id: sourceId, ref_id: t.ref_id, start_ms: t.start_ms, text: t.text }))
    for (let i = 0; i < rows.length; i += 500) await db('search_texts').insert(rows.slice(i, i + 500))
    await refreshAssets(db, this.dialect, [assetId])
  }

  async search(principal: Principal, options: SearchOptions): Promise<SearchResult> {
    const term = parseTerm(options.term)
    const [filters, lexemes, readable] = await Promise.all([this.fieldFilters(term), this.prefixLexemes(term.words), this.readableProjects(principal)])
    const errors: ParamError[] = []
    const date = (param: 'created_after' | 'created_before') => {
      const raw = options[param]
      if (raw === undefined) return undefined
      const ms = /^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$/.test(raw) ? Date.parse(raw) : NaN
      if (!Number.isFinite(ms)) errors.push({ param, message: 'is not a date (YYYY-MM-DD or ISO 8601)' })
      return new Date(ms)
    }
    const after = date('created_after')
    const before = date('created_before')
    if (errors.length) throw invalid(errors)
    // asset-only filters leave projects out
    const assetOnly = options.type !== undefined || options.folder !== undefined || filters.some((f) => f.kind === 'property')
    const offset = ((options.page ?? 1) - 1) * options.per_page
    const list = (kind: 'asset' | 'project', key: SearchKey | 'ended' | undefined) =>
      key === 'ended' ? Promise.resolve([]) : this.ids(kind, principal, readable, term, filters, lexemes, { ...options, after, before }, key, offset)
    const [assetRows, projectRows] = await Promise.all([list('asset', options.afterAsset), assetOnly ? Promise.resolve([]) : list('project', options.afterProject)])
    // the details of both lists side by side (each fetch is a round trip of its own on the pool)
    const [assets, projects] = await Promise.all([this.describeAssets(assetRows.map((r) => r.id), term, filters), this.describeProjects(projectRows.map((r) => r.id), term, filters)])
    const full = assetRows.length === options.per_page || projectRows.length === options.per_page
    return {
      assets: assetRows.map((r): Record<string, unknown> => ({ ...assets.get(r.id), rank: shownRank(r.rank) })).filter((a) => a.id !== undefined),
      projects: projectRows.map((r): Record<string, unknown> => ({ ...projects.get(r.id), rank: shownRank(r.rank) })).filter((p) => p.id !== undefined),
      next: full
        ? {
            a: assetRows.length === options.per_page ? assetRows[assetRows.length - 1] : undefined,
            p: projectRows.length === options.per_page ? projectRows[projectRows.length - 1] : undefined,
          }
        : null,
    }
  }

  /** `field:value` names a custom field (any case) or a whitelisted technical property; anything else is a 422 */
  private async fieldFilters(term: ParsedTerm): Promise<FieldFilter[]> {
    if (!term.fields.length) return []
    const names = [...new Set(term.fields.map((f) => f.field.toLowerCase()))]
    const rows = await this.knex('custom_metadata_fields').whereIn(this.knex.raw('lower(name)') as any, names).select('name')
    const props = new Set(this.properties())
    const errors: ParamError[] = []
    const out: FieldFilter[] = []
    for (const { field, value } of term.fields) {
      const isCustom = rows.some((r: any) => String(r.name).toLowerCase() === field.toLowerCase())
      const words = [...wordsOf(field), ...wordsOf(value)]
      if (!wordsOf(value).length) errors.push({ param: 'term', message: `gives ${field}: a value without letters or digits` })
      else if (isCustom) out.push({ kind: 'custom', name: field.toLowerCase(), value: value.toLowerCase(), words })
      else if (props.has(field)) out.push({ kind: 'property', key: field, value: value.toLowerCase(), words })
      else errors.push({ param: 'term', message: `names ${field}:, which is neither a custom metadata field nor a searchable property (${[...props].join(', ')})` })
    }
    if (errors.length) throw invalid(errors)
    if (this.dialect === 'postgresql') for (const f of out) f.indexed = await this.narrowLexeme(f)
    return out
  }

  /**
   * PostgreSQL: the lexemes of the index that each word of the term is a prefix of, from the lexicon
   * (migration 0008), for a word with at most PREFIX_LEXEMES of them; the others stay prefixes. GIN
   * answers a prefix with a bitmap of every document that holds a matching lexeme before it ANDs anything
   * (`kanertorner`: 24,750 documents at a million assets), and skips through exact lexemes ANDed with
   * others (`client:client kanertorner`: the word index's part 20 → 4 ms). Read anew on each search, not kept: a word written a moment ago is found at once. (A
   * document committed between this statement and the list's is matched on the lexicon read here, as if
   * it had committed a moment later.) A word of no lexeme stays a prefix too: the index finds it empty. So
   * does a frequent word of several lexemes (in ≥ frequentShare of the documents by the planner's estimate):
   * its window is found by walking the ids and testing each document, where one prefix lookup in the
   * document's lexemes beats one lookup per lexeme (`diga`, 8 lexemes: +2–4 ms over 9,000 documents).
   */
  private async prefixLexemes(words: string[]): Promise<Map<string, string[]>> {
    const out = new Map<string, string[]>()
    if (this.dialect !== 'postgresql' || !words.length) return out
    // one round trip: each word's lexemes in the order of the index, one more than the most it takes
    const one = `(SELECT DISTINCT ?::text AS word, lexeme FROM search_lexemes WHERE lexeme LIKE ? ESCAPE '\\' ORDER BY lexeme LIMIT ${PREFIX_LEXEMES + 1})`
    const rows = (await this.knex.raw(words.map(() => one).join(' UNION ALL '), words.flatMap((w) => [w, `${escapeLike(w)}%`]))).rows as Array<{ word: string; lexeme: string }>
    for (const r of rows) out.set(r.word, [...(out.get(r.word) ?? []), r.lexeme])
    for (const [word, lexemes] of out) if (lexemes.length > PREFIX_LEXEMES || (lexemes.length > 1 && (await this.frequent(word)))) out.delete(word)
    return out
  }

  /** whether the planner puts a word's prefix in ≥ frequentShare of the documents */
  private async frequent(word: string): Promise<boolean> {
    const all = await this.estimate(`SELECT 1 FROM search_documents`, [])
    return (await this.estimate(`SELECT 1 FROM search_documents WHERE tsv @@ to_tsquery('simple', ?)`, [tsquery([word], [])])) >= this.frequentShare * all
  }

  /** the planner's estimates (estimate(): how many documents hold a field lexeme prefix, a word test…) and few()'s counts, for a minute */
  private readonly estimates = new Map<string, { at: number; rows: number }>()

  /**
   * PostgreSQL: whether a filter is tested through `fields`' GIN index: when it is narrow, its lexeme prefix
   * held by at most FIELD_LEXEME_ROWS documents by the planner's estimate (a bitmap's cost grows with its
   * entries). A broad one (`client:client` when every value starts with "client": 333,000 documents at a
   * million assets, a ~50 ms bitmap) finds its candidates by the field's words in the words' index
   * (tsqueryFieldCandidates), whose AND with the term's other words GIN skips through, and `fields` rechecks
   * them: the same answer either way.
   */
  private async narrowLexeme(f: FieldFilter): Promise<boolean> {
    return (await this.estimate(`SELECT 1 FROM search_documents WHERE fields @@ ?::tsquery`, [`${tsLexeme(fieldLexeme(f))}:*`])) <= this.fieldLexemeRows
  }

  /** FIELD_LEXEME_ROWS; the tests set it to 0 to take the broad path on a small database */
  fieldLexemeRows = FIELD_LEXEME_ROWS

  /**
   * One list's page: the matching documents the user may read, by relevance. PostgreSQL ranks with
   * `ts_rank_cd` (cover density) over the weighted tsvector (A name and path 1.0, B custom values 0.4,
   * C properties or description 0.2, D spoken 0.1); SQLite with FTS5's `bm25` and column weights in the
   * same order (10, 5, 1, 0.5; negated, so higher is better on both).
   *
   * Ranking every match of a frequent word before the first page cost seconds at a million assets
   * (every match scored and sorted). So matches are ranked in windows, newest first: the first window
   * is the `rankWindow` newest matches (found by walking the object ids backwards, which stops early
   * when matches are many), ranked among themselves; the next window the `rankWindow` matches below it,
   * and so on. When a term has at most `rankWindow` matches (a rare word, the common case), the one
   * window holds them all and the order is the exact relevance order. Within a window, equal ranks go
   * newest first (id descending), so the order (window, rank, id) is total and a keyset continues it.
   */
  private async ids(
    kind: 'asset' | 'project',
    principal: Principal,
    readable: number[] | null,
    term: ParsedTerm,
    filters: FieldFilter[],
    lexemes: ReadonlyMap<string, string[]>,
    o: SearchFilters & { after?: Date; before?: Date; per_page: number },
    key: SearchKey | undefined,
    offset: number,
  ): Promise<SearchKey[]> {
    const { matches, rank, rankOf, tests } = this.matching(kind, principal, readable, term, filters, lexemes, o)
    const size = this.rankWindow()
    const pg = this.dialect === 'postgresql'
    // the ids' upper end, for the width of the first window
    const newest = async () => Number((await this.knex('search_documents').where('kind', kind).max({ id: 'object_id' }))[0]?.id ?? 0) + 1
    /** a window's rows after `after`, by rank */
    const ranked = async (window: RankWindow, after: SearchKey | undefined, limit: number) => {
      // a window of many matches close together (a frequent word): reading its id range and testing each
      // document beats the word index, whose bitmap for a frequent prefix (a GIN scan of 138,000 entries at
      // a million assets: ~200 ms) PostgreSQL's estimates do not see; a sparse or the last window uses the index
      const end = window.floor > 0 ? (window.top ?? (await newest())) : 0
      const narrow = window.floor > 0 && end - window.floor <= NARROW * size
      // a window with a floor is a range of ids: its buckets' tags narrow the word index to it (PG_TAGS)
      // (the first window, top null: one empty bucket above the newest id, as firstTier)
      const q = matches(!narrow, window.floor > 0 ? tsqueryBuckets(window.floor, window.top ?? end + (1 << TAG_BUCKET_BITS)) : null)
      if (window.top !== null) q.where('d.object_id', '<', window.top)
      if (window.floor > 0) q.where('d.object_id', '>=', window.floor)
      // ranked inside, ordered and cut outside: the keyset compares the rank the inner query computed
      let page = this.knex.queryBuilder().from(q.select('d.object_id as id', this.knex.raw('? as rank', [rank]) as any).as('m'))
      if (after !== undefined) {
        const at = pg ? '?::real' : '?'
        page = page.whereRaw(`(m.rank < ${at} OR (m.rank = ${at} AND m.id < ?))`, [after.rank, after.rank, after.id])
      }
      return (await page.orderBy([{ column: 'm.rank', order: 'desc' }, { column: 'm.id', order: 'desc' }]).limit(limit).select('m.id', 'm.rank')) as any[]
    }
    /** opens the window of the `size` newest matches below `top`: its bounds and its first rows */
    const open = async (top: number | null, limit: number): Promise<{ window: RankWindow; rows: any[] }> => {
      // SQLite: one window of every match (bm25 needs its MATCH in the ranking statement, so a window's
      // floor would cost a second pass over the FTS index: measured slower than ranking every match)
      if (!pg) {
        const window = { top, floor: 0 }
        return { window, rows: await ranked(window, undefined, limit) }
      }
      // PostgreSQL, one statement: the newest matches (a backward walk of the ids for a frequent word, the
      // word index for a rare one, as the planner sees fit), ranked among themselves, with the window's floor.
      // A reader's plan may keep every candidate in a Materialize that it rescans once per readable project
      // (`client:client kanertorner`: 10,000 candidates × 11): with their tsvectors (~250 bytes each) it spilled
      // to disk (work_mem 4 MB). So a reader's candidates carry their row's address (ctid, stable within the
      // statement) and the tsvectors are read again for the window's rows only; an administrator's plan has no
      // access join to rescan, and the walk no Materialize, so they keep the tsvector (reading 1,000 rows again
      // costs them ~1 ms)
      // a kind of few documents (the projects' list) has each tested: a pass over the word index of every
      // document cost ~9 ms for `client:client kanertorner` to find none of 100 projects, testing them 0.1 ms
      const indexed = !(await this.few(kind))
      const walk = await this.readableWalk(kind, principal, readable, tests)
      const byAddress = !walk && !principal.isAdmin
      const payload = ['d.object_id as id', byAddress ? 'd.ctid as t' : 'd.tsv']
      const newestFirst = (q: Knex.QueryBuilder) => (top === null ? q : q.where('d.object_id', '<', top)).orderBy('d.object_id', 'desc').limit(size).select(payload)
      const tier = !walk && indexed ? await this.firstTier(kind, tests, top, newest) : null
      const q = walk
        ? this.knex.with('c', walk(matches, top))
        : tier
          ? // the newest buckets first; the ids below them only when those held fewer than a window (`rest`: a one-time filter skips its scan)
            this.knex
              .with('newest', newestFirst(matches(true, tier.buckets)))
              .with('rest', newestFirst(matches(true).where('d.object_id', '<', tier.below).whereRaw('(SELECT count(*) FROM newest) < ?', [size])))
              .with('c', this.knex.from(this.knex.raw('(SELECT * FROM newest UNION ALL SELECT * FROM rest) AS u')).orderBy('u.id', 'desc').limit(size).select('u.*'))
          : this.knex.with('c', newestFirst(matches(indexed)))
      q.from('c')
      if (byAddress) q.joinRaw('JOIN search_documents AS r ON r.ctid = c.t')
      const rows = await q
        .select('c.id', this.knex.raw('? as rank', [rankOf(byAddress ? 'r.tsv' : 'c.tsv')]), this.knex.raw('(SELECT CASE WHEN count(*) < ? THEN 0 ELSE min(id) END FROM c) as floor', [size]))
        .orderBy([{ column: 'rank', order: 'desc' }, { column: 'c.id', order: 'desc' }])
        .limit(limit)
      // no row: no match below top, the last window
      return { window: { top, floor: rows.length ? Number(rows[0].floor) : 0 }, rows }
    }
    const want = offset + o.per_page
    const out: SearchKey[] = []
    let window: RankWindow | undefined = key?.window
    let after: SearchKey | undefined = key
    let below: number | null = null
    for (;;) {
      let rows: any[]
      if (window) rows = await ranked(window, after, want - out.length)
      else ({ window, rows } = await open(below, want - out.length))
      const w: RankWindow = window
      out.push(...rows.map((r: any) => ({ id: Number(r.id), rank: Number(r.rank), window: w })))
      // the last window, or the page is full: done; else this window is used up and the next starts below it
      if (out.length >= want || w.floor === 0) break
      below = w.floor
      window = undefined
      after = undefined
    }
    return out.slice(offset)
  }

  /** the planner's row estimates of some statements (EXPLAIN), each kept a minute */
  private async estimate(sql: string, bindings: unknown[]): Promise<number> {
    return this.kept(`${sql}\n${JSON.stringify(bindings)}`, async () => Number((await this.knex.raw(`EXPLAIN (FORMAT JSON) ${sql}`, bindings as any[])).rows[0]['QUERY PLAN'][0].Plan['Plan Rows']))
  }

  /** a number about the index (an estimate, a bounded count), kept a minute */
  private async kept(key: string, get: () => Promise<number>): Promise<number> {
    let known = this.estimates.get(key)
    if (!known || Date.now() - known.at > 60_000) {
      const rows = await get()
      if (this.estimates.size > 1000) this.estimates.clear()
      this.estimates.set(key, (known = { at: Date.now(), rows }))
    }
    return known.rows
  }

  /**
   * Whether a kind has at most fewDocuments documents, counted up to one more (an index-only walk of at most
   * 1,001 entries, kept a minute), not estimated: a table never analyzed is estimated at 0.5 % of its rows, and
   * testing each of 150,000 documents taken for few would cost far more than the word index
   */
  private async few(kind: 'asset' | 'project'): Promise<boolean> {
    const limit = this.fewDocuments + 1
    const count = async () => Number((await this.knex.raw(`SELECT count(*) AS n FROM (SELECT 1 FROM search_documents WHERE kind = ? LIMIT ?) x`, [kind, limit])).rows[0].n)
    return (await this.kept(`few ${kind} ${limit}`, count)) <= this.fewDocuments
  }

  /** a kind with at most this many documents (few) has each tested when a window opens, not the word index; the tests set it to 0 and back */
  fewDocuments = 1000
  /** a term the planner estimates in this share of a kind's documents or more is frequent (readableWalk); the tests lower it */
  frequentShare = 0.05
  /** the readable walk is for a kind with at least this many documents (planner's estimate); the tests lower it */
  walkDocuments = 100_000
  /** a user who may read at most this share of a kind's documents (planner's estimate) walks their ids first (readableWalk); the tests raise it */
  readableShare = 0.15
  /** a user of at most this many readable projects walks them one by one, merged (readableWalk) */
  mergedProjects = 32
  /** firstTier's buckets are to hold this many windows of matches by the estimate (one twice too high still fills a window); 0: no buckets. The tests change it */
  tierWindows = 2

  /**
   * PostgreSQL: the projects a user (not an administrator) may read and that are not deleted, for the word
   * index's project tags (matching) and the readable walk; null for an administrator and on SQLite. Read in
   * its own statement beside the term's lookups: a right granted between it and the list's statement is
   * seen by the next request (one revoked is not: the list's own access filter applies as ever).
   */
  private async readableProjects(principal: Principal): Promise<number[] | null> {
    if (this.dialect !== 'postgresql' || principal.isAdmin) return null
    return (await this.knex('projects').where('deleted', false).whereIn('id', this.rights.readableIds(principal, 'project')).select('id')).map((r: any) => Number(r.id))
  }

  /**
   * PostgreSQL, the first window of a term that is neither rare nor frequent: the buckets of the newest ids
   * (PG_TAGS) expected to hold tierWindows windows of matches, by the planner's estimate of the term (its
   * indexed tests, a reader's project tags included) spread evenly over the ids. GIN skips to those buckets'
   * documents, so the heap is read for about that many rows, not for every match: `client:client
   * kanertorner` at a million assets, 10,003 candidate rows → ~2,800. `open` reads the ids below them only
   * when the buckets held less than a window (an estimate too high): one more pass of the word index. Null
   * (the plain statement) for a term estimated in so few documents that the buckets would be all of them,
   * and for a frequent one (≥ frequentShare), whose newest matches the planner finds by walking the ids.
   * `end` (the newest id, read fresh: a stale one would leave newer buckets out) gets one empty bucket more
   * above it, for a document committed between that read and the list's statement.
   */
  private async firstTier(
    kind: 'asset' | 'project',
    tests: Tests | null,
    top: number | null,
    newest: () => Promise<number>,
  ): Promise<{ buckets: string; below: number } | null> {
    if (!tests?.words) return null
    const projects = tests.projects ? { sql: ` AND d.tsv @@ ?::tsquery`, bindings: [tests.projects] } : { sql: '', bindings: [] }
    const [estimated, all] = await Promise.all([
      this.estimate(`SELECT 1 FROM search_documents d WHERE d.kind = ? AND ${tests.sql}${projects.sql}`, [kind, ...tests.bindings, ...projects.bindings]),
      this.estimate(`SELECT 1 FROM search_documents WHERE kind = ?`, [kind]),
    ])
    // buckets below the newest id would be all of them: at most tierWindows windows of matches in all
    if (this.tierWindows <= 0 || estimated <= this.tierWindows * this.rankWindow() || estimated >= this.frequentShare * all) return null
    const end = top ?? (await newest())
    const below = (Math.floor(end - (this.tierWindows * this.rankWindow() * end) / estimated) >> TAG_BUCKET_BITS) << TAG_BUCKET_BITS
    const buckets = below > 0 ? tsqueryBuckets(below, top ?? end + (1 << TAG_BUCKET_BITS)) : null
    return buckets ? { buckets, below } : null
  }

  /**
   * PostgreSQL, a user's window of a frequent word: the newest matches in the projects the user may read.
   * The planner walks the ids backwards and tests the words on each document, then the access filter: for
   * `diga` (10 % of a million) as the reader of 10 % of the projects, 94,000 documents read and tested
   * (67,000 buffers) for 1,000 readable matches. Instead (two steps): the ids of the readable projects'
   * documents come newest first from an index-only scan of `(kind, object_id) INCLUDE (project_id)`
   * (migration 0007; 94,000 index entries in ~360 pages), and only those (9,400) are fetched and tested,
   * one index probe each (LATERAL … OFFSET 0, which keeps the planner from merging the two walks). Taken
   * when the term is frequent (its words and field filters in ≥ frequentShare of the kind's documents by
   * the planner's estimate: the walk probes about rankWindow / share readable documents, 20,000 at 5 %,
   * where a rarer term is better served by its indexes) and the user reads a small share of the documents
   * (≤ readableShare: a probe per readable document costs ~5 times a step of the plain walk). Null: the
   * one statement as it is. The same candidates either way: every filter of `matches` applies to the
   * probed document.
   *
   * A user of at most mergedProjects readable projects walks each project's documents instead, newest first
   * (the `(project_id, kind, object_id)` index, one backward scan per project, each testing the documents it
   * reads), merged by id (UNION ALL under the window's ORDER BY … LIMIT: a Merge Append that reads each
   * project only as far as the window reaches). A document costs one heap read there, where the walk above
   * costs an index probe, the visibility map's page for every index entry (which alternates where rewritten
   * documents sit apart from the others: 63,000 buffers for 94,000 entries on a seeded million) and the
   * heap: `diga` as the reader of 10 projects, 105,000 → 9,700 buffers. A project with no match below the
   * window is read to its end before the merge can go on (at most the user's readable documents, which the
   * walk's condition keeps under readableShare); more projects make a statement of one branch each, so
   * above mergedProjects the walk above.
   */
  private async readableWalk(
    kind: 'asset' | 'project',
    principal: Principal,
    readable: number[] | null,
    tests: Tests | null,
  ): Promise<((matches: (indexed?: boolean) => Knex.QueryBuilder, top: number | null) => Knex.QueryBuilder) | null> {
    if (this.dialect !== 'postgresql' || !readable || !tests) return null
    const all = await this.estimate(`SELECT 1 FROM search_documents WHERE kind = ?`, [kind])
    // a small index (the projects' list, a young database) gains nothing worth three estimates and a round trip
    if (all < this.walkDocuments) return null
    if ((await this.estimate(`SELECT 1 FROM search_documents d WHERE d.kind = ? AND ${tests.sql}`, [kind, ...tests.bindings])) < this.frequentShare * all) return null
    const mine = await this.estimate(`SELECT 1 FROM search_documents WHERE kind = ? AND project_id = ANY(?::int[])`, [kind, readable])
    if (mine > this.readableShare * all) return null
    const size = this.rankWindow()
    if (readable.length > 0 && readable.length <= this.mergedProjects)
      return (matches, top) => {
        // `IS TRUE` tests (matches(false)): each project's scan tests what it reads, the word index is not asked
        const project = (id: number) => {
          const q = matches(false).where('d.project_id', id).orderBy('d.object_id', 'desc').limit(size).select('d.object_id as id', 'd.tsv')
          return top === null ? q : q.where('d.object_id', '<', top)
        }
        return this.knex
          .from(this.knex.raw(`(${readable.map(() => '(?)').join(' UNION ALL ')}) AS u`, readable.map(project)))
          .orderBy('u.id', 'desc')
          .limit(size)
          .select('u.id', 'u.tsv')
      }
    return (matches, top) => {
      const probe = matches().whereRaw('d.object_id = x.object_id').select('d.tsv')
      const q = this.knex
        .from('search_documents as x')
        .joinRaw('CROSS JOIN LATERAL (? OFFSET 0) AS m', [probe as any])
        .where('x.kind', kind)
        .whereRaw('x.project_id = ANY(?::int[])', [readable])
      if (top !== null) q.where('x.object_id', '<', top)
      return q.orderBy('x.object_id', 'desc').limit(size).select('x.object_id as id', 'm.tsv')
    }
  }

  /**
   * The documents of one kind that match the term and filters and that the user may read (a builder
   * made anew on each call, joined to FTS5 on SQLite), and the expression of their rank.
   */
  private matching(
    kind: 'asset' | 'project',
    principal: Principal,
    readable: number[] | null,
    term: ParsedTerm,
    filters: FieldFilter[],
    lexemes: ReadonlyMap<string, string[]>,
    o: SearchFilters & { after?: Date; before?: Date },
  ): { matches: (indexed?: boolean, buckets?: string | null) => Knex.QueryBuilder; rank: Knex.Raw; rankOf: (tsv: string) => Knex.Raw; tests: Tests | null } {
    const k = this.knex
    const pg = this.dialect === 'postgresql'
    // field:value is a phrase in the field's part of the document ("client acme…"), so the index answers it too
    const fieldParts = filters.map((f) => (pg ? tsqueryField(f.words, f.kind === 'custom' ? 'B' : 'C') : ftsField(f.words, f.kind === 'custom' ? 'custom' : 'props')))
    const free = pg ? tsquery(term.words, term.phrases) : ftsQuery(term.words, term.phrases)
    const positive = [free, ...fieldParts].filter(Boolean).join(pg ? ' & ' : ' AND ') || null
    const negative = pg ? tsqueryAny(term.excluded) : ftsAny(term.excluded)
    // field:value holds where a value of the field starts with the words (the last a prefix), on both
    // databases alike. PostgreSQL: a narrow filter is tested on its field lexeme alone (`fields`' GIN, 0005),
    // a range of GIN entries where the phrase intersected the posting lists of the field's own words (in
    // every document that has the field); a broad one finds candidates by the field's words but the value's
    // last (exact lexemes: tsqueryFieldCandidates), and its lexeme rechecks them (`IS TRUE`: not through the
    // index). SQLite: the phrase in FTS5 for the rank, and the field texts (search_fields_fts, 0006) for the
    // start of the value. The rank stays that of `positive` over the words, so the order is the same on every path.
    const wordsOfDocument = (expanded?: ReadonlyMap<string, string[]>) => [tsquery(term.words, term.phrases, expanded), ...filters.filter((f) => !f.indexed).map(tsqueryFieldCandidates)].filter(Boolean).join(' & ') || null
    // PostgreSQL: for the word index, the words' prefixes as their exact lexemes where the lexicon gave them (prefixLexemes);
    // a document tested on its own (`IS TRUE`) keeps the prefix: one lookup in its lexemes, not one per lexeme (the same answer)
    const wordsPart = pg ? wordsOfDocument(lexemes) : positive
    const wordsTest = pg ? wordsOfDocument() : positive
    const fieldLexemes = (indexed: boolean) => filters.filter((f) => !!f.indexed === indexed).map((f) => `${tsLexeme(fieldLexeme(f))}:*`).join(' & ') || null
    const fieldsPart = pg ? fieldLexemes(true) : null
    const fieldsCheck = pg ? fieldLexemes(false) : filters.map(ftsFieldText).join(' AND ') || null
    // PostgreSQL: a real (float4); the keyset compares it as one (`?::real`), since a float4 read into JS and sent back as a double would not equal itself
    // PostgreSQL: the rank of a tsvector column (`d.tsv`, a window's copy `c.tsv`, or a reader's window row `r.tsv`)
    const rankOf = (tsv: string): Knex.Raw => (positive ? k.raw(`ts_rank_cd('{0.1, 0.2, 0.4, 1.0}', ${tsv}, to_tsquery('simple', ?))`, [positive]) : k.raw('0::real'))
    const rank: Knex.Raw = pg ? rankOf('d.tsv') : positive ? k.raw('-bm25(search_fts, 10.0, 5.0, 1.0, 0.5)') : k.raw('0.0')
    // PostgreSQL: a reader's projects as tags (PG_TAGS), ANDed with the words in the word index's scan, so GIN skips
    // the documents of other projects before the heap is read (the access filter below still decides)
    const projects = pg && wordsPart && readable ? tsqueryProjects(readable) : null
    // indexed false (PostgreSQL): the word test as `IS TRUE`, which the GIN index cannot answer, so an id range is read instead;
    // `buckets`: the id buckets' tags the word index narrows to (firstTier)
    const matches = (indexed = true, buckets: string | null = null) => {
      let q = k('search_documents as d').where('d.kind', kind)
      // the projects that are not deleted and, for a user, readable (the access filter is part of the statement: the
      // limit counts only readable rows). PostgreSQL, a user's: a test of each candidate against the set of those
      // projects (`IS TRUE` keeps the planner from making it a join, so the set is hashed once). Joined to `projects`,
      // the planner (under-estimating the word index's rows) rescanned a reader's candidates once per project
      // (`client:client kanertorner`: 135,000 rows); as a semi-join it ran the word index once per project (`diga`
      // at 100,000 assets: 10 prefix scans, 26 ms; tested on each candidate: 9 ms)
      if (pg && !principal.isAdmin) q = q.whereRaw('(d.project_id IN ?) IS TRUE', [this.rights.scope(k('projects as p').where('p.deleted', false).select('p.id'), principal, 'project', 'p.id')])
      else q = this.rights.scope(q.join('projects as p', 'p.id', 'd.project_id').where('p.deleted', false), principal, 'project', 'd.project_id')
      if (pg) {
        if (wordsPart) q = indexed ? q.whereRaw(`d.tsv @@ to_tsquery('simple', ?)`, [wordsPart]) : q.whereRaw(`(d.tsv @@ to_tsquery('simple', ?)) IS TRUE`, [wordsTest])
        // tags as tsquery literals, separate conditions: each a scan key of its own, which GIN advances to the words' matches
        for (const tags of indexed && wordsPart ? [projects, buckets] : []) if (tags) q = q.whereRaw(`d.tsv @@ ?::tsquery`, [tags])
        // a tsquery literal (not to_tsquery, which would split the lexeme at its spaces and signs)
        if (fieldsPart) q = q.whereRaw(indexed ? `d.fields @@ ?::tsquery` : `(d.fields @@ ?::tsquery) IS TRUE`, [fieldsPart])
        if (fieldsCheck) q = q.whereRaw(`(d.fields @@ ?::tsquery) IS TRUE`, [fieldsCheck])
      } else {
        if (positive) q = q.join('search_fts as f', 'f.rowid', 'd.id').whereRaw('search_fts MATCH ?', [positive])
        if (fieldsCheck) q = q.whereIn('d.id', k('search_fields_fts').whereRaw('search_fields_fts MATCH ?', [fieldsCheck]).select('rowid'))
      }
      if (negative) {
        if (pg) q = q.whereRaw(`NOT d.tsv @@ to_tsquery('simple', ?)`, [negative])
        else q = q.whereNotIn('d.id', k('search_fts').whereRaw('search_fts MATCH ?', [negative]).select('rowid'))
      }
      if (o.project_id !== undefined) q = q.where('d.project_id', o.project_id)
      if (kind === 'asset' && o.type !== undefined) q = q.where('d.asset_type', o.type)
      if (kind === 'asset' && o.folder !== undefined) {
        const folder = o.folder.replace(/^\/+|\/+$/g, '')
        if (folder) q = q.where((w) => w.where('d.folder', folder).orWhereRaw(`d.folder like ? escape '\\'`, [`${escapeLike(folder)}/%`]))
      }
      if (o.status_flag !== undefined) q = q.whereExists(k('project_status_flags as sf').whereRaw('sf.project_id = d.project_id').where('sf.status_flag_id', o.status_flag).select(k.raw('1')))
      if (o.after) q = q.where('d.created_at', '>=', o.after)
      if (o.before) q = q.where('d.created_at', '<', o.before)
      return q
    }
    // PostgreSQL: the term's indexed tests, for the planner's estimate of how many documents hold it (readableWalk)
    const parts = [wordsPart && { sql: `d.tsv @@ to_tsquery('simple', ?)`, binding: wordsPart }, fieldsPart && { sql: `d.fields @@ ?::tsquery`, binding: fieldsPart }].filter((x): x is { sql: string; binding: string } => !!x)
    // a phrase's estimate is its words' (the planner does not see the order), too high for firstTier to size its buckets
    const tests = pg && parts.length ? { sql: parts.map((x) => x.sql).join(' AND '), bindings: parts.map((x) => x.binding), words: !!wordsPart && !wordsPart.includes('<->'), projects } : null
    return { matches, rank, rankOf, tests }
  }

  private async valuesOf(kind: 'asset' | 'project', ids: number[]): Promise<Map<number, Array<{ field: string; text: string }>>> {
    const out = new Map<number, Array<{ field: string; text: string }>>()
    if (!ids.length) return out
    const rows = await this.knex('custom_metadata_values as v')
      .join('custom_metadata_fields as f', 'f.id', 'v.custom_metadata_field_id')
      .where('v.owner_type', kind)
      .whereIn('v.owner_id', ids)
      .select('v.owner_id', 'f.name', 'v.text_value')
    for (const r of rows) out.set(Number(r.owner_id), [...(out.get(Number(r.owner_id)) ?? []), { field: r.name, text: r.text_value }])
    return out
  }

  private async describeAssets(ids: number[], term: ParsedTerm, filters: FieldFilter[]): Promise<Map<number, Record<string, unknown>>> {
    const out = new Map<number, Record<string, unknown>>()
    if (!ids.length) return out
    // three independent fetches by the page's ids: sent together, the request waits for the slowest, not the sum
    const [rows, values, spoken] = await Promise.all([
      this.knex('assets as a').join('projects as p', 'p.id', 'a.project_id').whereIn('a.id', ids).select('a.id', 'a.name', 'a.path', 'a.folder', 'a.type', 'a.project_id', 'a.metadata', 'a.created_at', 'p.name as project_name'),
      this.valuesOf('asset', ids),
      this.spokenMatches(ids, term),
    ])
    const props = this.properties()
    for (const r of rows) {
      const meta = column.json<Record<string, unknown>>(r.metadata, {})
      const sources = [
        { field: 'name', text: r.name as string },
        { field: 'path', text: r.path as string },
        ...(values.get(Number(r.id)) ?? []).map((v) => ({ field: `custom:${v.field}`, text: v.text })),
        ...props.filter((p) => meta[p] !== undefined && meta[p] !== null).map((p) => ({ field: `property:${p}`, text: String(meta[p]) })),
      ]
      out.set(Number(r.id), {
        id: Number(r.id),
        name: r.name,
        path: r.path,
        folder: r.folder,
        type: r.type,
        project_id: Number(r.project_id),
        project_name: r.project_name,
        created_at: column.date(r.created_at)?.toISOString() ?? null,
        matched: [...matches(sources, term, filters), ...(spoken.get(Number(r.id)) ?? [])],
      })
    }
    return out
  }

  /**
   * The first transcript sentence (in time) of each asset that holds the term's words or a phrase, with
   * its time. The index said the asset matches; this finds where. Only sentences that contain the first
   * word are read (a LIKE narrows them; the words are then compared as the index splits them).
   */
  private async spokenMatches(ids: number[], term: ParsedTerm): Promise<Map<number, Match[]>> {
    const out = new Map<number, Match[]>()
    const wanted = [...term.words.map((w) => [w]), ...term.phrases]
    if (!ids.length || !wanted.length) return out
    const probe = wanted[0][0]
    const rows = await this.knex('search_texts')
      .whereIn('asset_id', ids)
      .whereRaw(`lower(text) like ? escape '\\'`, [`%${escapeLike(probe)}%`])
      .orderBy([{ column: 'asset_id' }, { column: 'start_ms' }, { column: 'id' }])
      .limit(ids.length * 200)
      .select('asset_id', 'source', 'source_id', 'ref_id', 'start_ms', 'text')
    for (const r of rows) {
      const assetId = Number(r.asset_id)
      if (out.has(assetId)) continue
      const [hit] = matches([{ field: r.source, text: r.text }], term, [])
      if (!hit) continue
      const ms = r.start_ms === null ? null : Number(r.start_ms)
      out.set(assetId, [{ ...hit, ...(ms === null ? {} : { time: ms / 1000, timecode: timecodeOf(ms) }), transcription_id: Number(r.source_id), sentence_id: Number(r.ref_id) }])
    }
    return out
  }

  private async describeProjects(ids: number[], term: ParsedTerm, filters: FieldFilter[]): Promise<Map<number, Record<string, unknown>>> {
    const out = new Map<number, Record<string, unknown>>()
    if (!ids.length) return out
    const [rows, values] = await Promise.all([this.knex('projects').whereIn('id', ids).select('id', 'name', 'alternative_name', 'description', 'created_at'), this.valuesOf('project', ids)])
    for (const r of rows) {
      const sources = [
        { field: 'name', text: r.name as string },
        ...(values.get(Number(r.id)) ?? []).map((v) => ({ field: `custom:${v.field}`, text: v.text })),
        { field: 'alternative_name', text: (r.alternative_name ?? '') as string },
        { field: 'description', text: (r.description ?? '') as string },
      ]
      out.set(Number(r.id), {
        id: Number(r.id),
        name: r.name,
        alternative_name: r.alternative_name ?? null,
        description: r.description ?? null,
        created_at: column.date(r.created_at)?.toISOString() ?? null,
        matched: matches(sources, term, filters),
      })
    }
    return out
  }
}

/** which fields of a result hold the words, phrases and field filters, with a piece of text around the first hit */
export function matches(sources: Array<{ field: string; text: string }>, term: ParsedTerm, filters: FieldFilter[]): Match[] {
  const out: Match[] = []
  const wanted = [...term.words.map((w) => [w]), ...term.phrases]
  for (const s of sources) {
    if (!s.text) continue
    const words = wordsOf(s.text)
    const hit = wanted.some((p) => words.some((_, i) => p.every((w, j) => (j === p.length - 1 && p.length === 1 ? words[i + j]?.startsWith(w) : words[i + j] === w))))
    const filtered = filters.some((f) =>
      f.kind === 'custom' ? s.field.toLowerCase() === `custom:${f.name}` && wordsOf(s.text).join(' ').startsWith(wordsOf(f.value).join(' ')) : s.field === `property:${f.key}` && wordsOf(s.text).join(' ').startsWith(wordsOf(f.value).join(' ')),
    )
    if (hit || filtered) out.push({ field: s.field, snippet: snippet(s.text, wanted[0]?.[0] ?? '') })
  }
  return out
}

/**
 * The rank as answers show it: four significant digits (SQLite's bm25 of a word in most documents is
 * around 1e-6, which fixed decimals would show as 0); the cursor keeps the exact value.
 */
const shownRank = (rank: number) => Number(rank.toPrecision(4))

/** `HH:MM:SS.mmm` of a time in milliseconds */
function timecodeOf(ms: number): string {
  const pad = (n: number, w = 2) => String(n).padStart(w, '0')
  return `${pad(Math.floor(ms / 3_600_000))}:${pad(Math.floor(ms / 60_000) % 60)}:${pad(Math.floor(ms / 1000) % 60)}.${pad(ms % 1000, 3)}`
}

function snippet(text: string, word: string): string {
  const flat = text.replace(/\s+/g, ' ')
  if (flat.length <= SNIPPET) return flat
  const at = word ? flat.toLowerCase().indexOf(word) : -1
  const start = Math.max(0, (at < 0 ? 0 : at) - 20)
  return `${start > 0 ? '…' : ''}${flat.slice(start, start + SNIPPET)}${start + SNIPPET < flat.length ? '…' : ''}`
}
