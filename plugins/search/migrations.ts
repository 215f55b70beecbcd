import { type Knex, type Migration } from '../../core/index.js'
import { TAG_BUCKET_BITS } from './query.js'
/**
 * The search index: one document per asset and per project, kept up to date by triggers in the
 * transaction that changes the row (an asset renamed, analysed or moved, a project renamed, a custom
 * value set or cleared), whichever plugin writes it. PostgreSQL: a weighted `tsvector` with a GIN
 * index; SQLite: an FTS5 table whose rowid is the document's id. Words are lower case and split at
 * every character that is not a letter or digit, the same on both (`interview_01.mov` → interview 01 mov).
 * Which technical properties are indexed is the table `search_properties` (the plugin's setting).
 */

// ---- PostgreSQL -------------------------------------------------------------------------------

/**
 * PL/pgSQL caches a generic plan of each statement per connection after five calls, made with the
 * table sizes of that moment. A pool connection that wrote the first assets of an empty database kept
 * sequential scans of `search_documents` and `assets` for the life of the connection (nothing
 * invalidates the plan without an ANALYZE), so each insert scanned the index table and inserts fell
 * from ~400/s to ~50/s by 20,000 assets (bench/README.md). The document functions plan each call anew
 * (a plan costs tens of microseconds; `CREATE OR REPLACE` drops the setting, so it is in the text).
 */
const CUSTOM_PLANS = 'SET plan_cache_mode = force_custom_plan'

/**
 * 0005: each custom value and indexed property of a document as one lexeme of its own (`fields`, a
 * second tsvector with its own GIN index): `B:client=acme corp` (a custom value: the field's words,
 * `=`, the value's words) and `C:reel name=a001` (a property). A `field:value` filter is then a prefix
 * match on one lexeme (`'B:client=acme':*`), a narrow range of GIN entries, where the phrase in the
 * weighted document (`'client':B <-> 'acme':*B`) made GIN intersect the posting lists of the field's
 * words, which every document with a value of that field holds (`client`: a third of a million; `reel`
 * and `name`: all of them), and recheck each candidate's tsvector. Cut at 480 characters (a lexeme
 * takes at most 2,047 bytes); a longer filter falls back to the phrase (service.ts).
 */
const PG_FIELD_LEXEME = `CREATE FUNCTION mamkit_field_lexeme(part text, field text, value text) RETURNS text IMMUTABLE LANGUAGE sql AS $$
   SELECT left(part || ':' || btrim(mamkit_words(field)) || '=' || btrim(mamkit_words(value)), 480) $$`
/** the `fields` of the asset `a`: its custom values and its indexed technical properties */
const PG_ASSET_FIELDS = `array_to_tsvector(ARRAY(
         SELECT mamkit_field_lexeme('B', f.name, v.text_value) FROM custom_metadata_values v JOIN custom_metadata_fields f ON f.id = v.custom_metadata_field_id
           WHERE v.owner_type = 'asset' AND v.owner_id = a.id AND btrim(mamkit_words(v.text_value)) <> ''
         UNION SELECT mamkit_field_lexeme('C', j.key, j.value) FROM json_each_text(a.metadata) j
           WHERE j.key IN (SELECT name FROM search_properties) AND btrim(mamkit_words(j.value)) <> ''))`
/** the `fields` of the project `p`: its custom values */
const PG_PROJECT_FIELDS = `array_to_tsvector(ARRAY(
         SELECT mamkit_field_lexeme('B', f.name, v.text_value) FROM custom_metadata_values v JOIN custom_metadata_fields f ON f.id = v.custom_metadata_field_id
           WHERE v.owner_type = 'project' AND v.owner_id = p.id AND btrim(mamkit_words(v.text_value)) <> ''))`

/**
 * The function that writes assets' documents. `spoken`: with the texts other plugins give an asset
 * (`search_texts`: transcript sentences), weight `D`. Migration 0001 made it without them, 0002 with.
 */
const pgAssetsFunction = (spoken: boolean, fields = false, tags = false) => `CREATE OR REPLACE FUNCTION mamkit_search_assets(ids integer[]) RETURNS void LANGUAGE plpgsql ${CUSTOM_PLANS} AS $$
   BEGIN
     DELETE FROM search_documents WHERE kind = 'asset' AND object_id = ANY(ids);
     INSERT INTO search_documents (kind, object_id, project_id, asset_type, folder, created_at, ${fields ? 'fields, ' : ''}tsv)
     SELECT 'asset', a.id, a.project_id, a.type, a.folder, a.created_at,${fields ? `\n       ${PG_ASSET_FIELDS},` : ''}
       setweight(to_tsvector('simple', mamkit_words(a.name || ' ' || a.path)), 'A')
       || setweight(to_tsvector('simple', mamkit_words((SELECT string_agg(f.name || ' ' || v.text_value, ' ') FROM custom_metadata_values v JOIN custom_metadata_fields f ON f.id = v.custom_metadata_field_id WHERE v.owner_type = 'asset' AND v.owner_id = a.id))), 'B')
       || setweight(to_tsvector('simple', mamkit_words((SELECT string_agg(j.key || ' ' || j.value, ' ') FROM json_each_text(a.metadata) j WHERE j.key IN (SELECT name FROM search_properties)))), 'C')${
         spoken ? `
       || setweight(to_tsvector('simple', mamkit_words((SELECT string_agg(t.text, ' ' ORDER BY t.source_id, t.start_ms, t.id) FROM search_texts t WHERE t.asset_id = a.id))), 'D')` : ''
       }${tags ? `
       || mamkit_search_tags(a.id, a.project_id)` : ''}
     FROM assets a WHERE a.id = ANY(ids);
   END $$`

/** the function that writes projects' documents; `fields`: with the field lexemes (0005) */
const pgProjectsFunction = (fields: boolean, tags = false) => `CREATE OR REPLACE FUNCTION mamkit_search_projects(ids integer[]) RETURNS void LANGUAGE plpgsql ${CUSTOM_PLANS} AS $$
   BEGIN
     DELETE FROM search_documents WHERE kind = 'project' AND object_id = ANY(ids);
     INSERT INTO search_documents (kind, object_id, project_id, asset_type, folder, created_at, ${fields ? 'fields, ' : ''}tsv)
     SELECT 'project', p.id, p.id, NULL, NULL, p.created_at,${fields ? `\n       ${PG_PROJECT_FIELDS},` : ''}
       setweight(to_tsvector('simple', mamkit_words(p.name)), 'A')
       || setweight(to_tsvector('simple', mamkit_words((SELECT string_agg(f.name || ' ' || v.text_value, ' ') FROM custom_metadata_values v JOIN custom_metadata_fields f ON f.id = v.custom_metadata_field_id WHERE v.owner_type = 'project' AND v.owner_id = p.id))), 'B')
       || setweight(to_tsvector('simple', mamkit_words(coalesce(p.alternative_name, '') || ' ' || coalesce(p.description, ''))), 'C')${tags ? `
       || mamkit_search_tags(p.id, p.id)` : ''}
     FROM projects p WHERE p.id = ANY(ids);
   END $$`

const PG = [
  `CREATE TABLE search_properties (name varchar(100) PRIMARY KEY)`,
  `CREATE TABLE search_documents (
     id serial PRIMARY KEY,
     kind varchar(10) NOT NULL,
     object_id integer NOT NULL,
     project_id integer NOT NULL,
     asset_type varchar(10),
     folder text,
     created_at timestamptz NOT NULL,
     tsv tsvector NOT NULL,
     UNIQUE (kind, object_id))`,
  `CREATE INDEX search_documents_tsv ON search_documents USING gin (tsv)`,
  `CREATE INDEX search_documents_project ON search_documents (project_id, kind, object_id)`,
  `CREATE FUNCTION mamkit_words(t text) RETURNS text IMMUTABLE LANGUAGE sql AS $$ SELECT regexp_replace(lower(coalesce(t, '')), '[^[:alnum:]]+', ' ', 'g') $$`,
  pgAssetsFunction(false),
  pgProjectsFunction(false).replace('CREATE OR REPLACE', 'CREATE'),
  `CREATE FUNCTION mamkit_search_asset_row() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN
     IF TG_OP = 'DELETE' THEN DELETE FROM search_documents WHERE kind = 'asset' AND object_id = OLD.id; RETURN NULL; END IF;
     PERFORM mamkit_search_assets(ARRAY[NEW.id]); RETURN NULL;
   END $$`,
  `CREATE TRIGGER search_assets_insert AFTER INSERT ON assets FOR EACH ROW EXECUTE FUNCTION mamkit_search_asset_row()`,
  `CREATE TRIGGER search_assets_update AFTER UPDATE ON assets FOR EACH ROW
     WHEN (OLD.name IS DISTINCT FROM NEW.name OR OLD.path IS DISTINCT FROM NEW.path OR OLD.type IS DISTINCT FROM NEW.type
       OR OLD.project_id IS DISTINCT FROM NEW.project_id OR OLD.metadata::text IS DISTINCT FROM NEW.metadata::text)
     EXECUTE FUNCTION mamkit_search_asset_row()`,
  `CREATE TRIGGER search_assets_delete AFTER DELETE ON assets FOR EACH ROW EXECUTE FUNCTION mamkit_search_asset_row()`,
  `CREATE FUNCTION mamkit_search_project_row() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN
     IF TG_OP = 'DELETE' THEN DELETE FROM search_documents WHERE kind = 'project' AND object_id = OLD.id; RETURN NULL; END IF;
     PERFORM mamkit_search_projects(ARRAY[NEW.id]); RETURN NULL;
   END $$`,
  `CREATE TRIGGER search_projects_insert AFTER INSERT ON projects FOR EACH ROW EXECUTE FUNCTION mamkit_search_project_row()`,
  `CREATE TRIGGER search_projects_update AFTER UPDATE ON projects FOR EACH ROW
     WHEN (OLD.name IS DISTINCT FROM NEW.name OR OLD.description IS DISTINCT FROM NEW.description OR OLD.alternative_name IS DISTINCT FROM NEW.alternative_name)
     EXECUTE FUNCTION mamkit_search_project_row()`,
  `CREATE TRIGGER search_projects_delete AFTER DELETE ON projects FOR EACH ROW EXECUTE FUNCTION mamkit_search_project_row()`,
  // values change in bulk (10,000 assets in one statement): one refresh per statement over the owners it touched
  `CREATE FUNCTION mamkit_search_values() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN
     PERFORM mamkit_search_assets(ARRAY(SELECT DISTINCT owner_id FROM changed_values WHERE owner_type = 'asset'));
     PERFORM mamkit_search_projects(ARRAY(SELECT DISTINCT owner_id FROM changed_values WHERE owner_type = 'project'));
     RETURN NULL;
   END $$`,
  `CREATE FUNCTION mamkit_search_field_renamed() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN
     PERFORM mamkit_search_assets(ARRAY(SELECT owner_id FROM custom_metadata_values WHERE custom_metadata_field_id = NEW.id AND owner_type = 'asset'));
     PERFORM mamkit_search_projects(ARRAY(SELECT owner_id FROM custom_metadata_values WHERE custom_metadata_field_id = NEW.id AND owner_type = 'project'));
     RETURN NULL;
   END $$`,
  `CREATE TRIGGER search_fields_rename AFTER UPDATE ON custom_metadata_fields FOR EACH ROW WHEN (OLD.name IS DISTINCT FROM NEW.name) EXECUTE FUNCTION mamkit_search_field_renamed()`,
  `CREATE TRIGGER search_values_insert AFTER INSERT ON custom_metadata_values REFERENCING NEW TABLE AS changed_values FOR EACH STATEMENT EXECUTE FUNCTION mamkit_search_values()`,
  `CREATE TRIGGER search_values_update AFTER UPDATE ON custom_metadata_values REFERENCING NEW TABLE AS changed_values FOR EACH STATEMENT EXECUTE FUNCTION mamkit_search_values()`,
  `CREATE TRIGGER search_values_delete AFTER DELETE ON custom_metadata_values REFERENCING OLD TABLE AS changed_values FOR EACH STATEMENT EXECUTE FUNCTION mamkit_search_values()`,
]

/**
 * 0003: the functions plan each call anew (CUSTOM_PLANS), and inserts and deletes of assets refresh
 * their documents once per statement over the rows they touched (an ingest of 250 rows: one call
 * with 250 ids, not 250 calls). Updates stay per row: their WHEN clause skips the updates that do not
 * change a document's words (states, proxies), which a statement trigger cannot do.
 */
const PG_STATEMENT_TRIGGERS = [
  `ALTER FUNCTION mamkit_search_assets(integer[]) ${CUSTOM_PLANS}`,
  `ALTER FUNCTION mamkit_search_projects(integer[]) ${CUSTOM_PLANS}`,
  `CREATE FUNCTION mamkit_search_assets_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN
     PERFORM mamkit_search_assets(ARRAY(SELECT id FROM inserted_assets)); RETURN NULL;
   END $$`,
  `CREATE FUNCTION mamkit_search_assets_deleted() RETURNS trigger LANGUAGE plpgsql ${CUSTOM_PLANS} AS $$
   BEGIN
     DELETE FROM search_documents WHERE kind = 'asset' AND object_id IN (SELECT id FROM deleted_assets); RETURN NULL;
   END $$`,
  `DROP TRIGGER search_assets_insert ON assets`,
  `DROP TRIGGER search_assets_delete ON assets`,
  `CREATE TRIGGER search_assets_insert AFTER INSERT ON assets REFERENCING NEW TABLE AS inserted_assets FOR EACH STATEMENT EXECUTE FUNCTION mamkit_search_assets_inserted()`,
  `CREATE TRIGGER search_assets_delete AFTER DELETE ON assets REFERENCING OLD TABLE AS deleted_assets FOR EACH STATEMENT EXECUTE FUNCTION mamkit_search_assets_deleted()`,
]

/**
 * Above this many assets in one statement on custom values (a bulk update: up to 10,000), their
 * documents are not rebuilt in the statement but marked dirty in its transaction (`search_dirty`)
 * and rebuilt right after commit by the sweeper (sweep.ts): the write commits without the index's
 * ~1.4 s for 10,000 documents, and a crash cannot lose the refresh (the marks commit with the values).
 * Smaller statements (one asset's update_metadata, bulk updates of up to 1,000 assets, which run
 * in the request) keep refreshing in the statement, so what a client just wrote is found at once.
 */
export const DEFER_ABOVE = 1000

/** 0004: dirty marks for bulk value changes on PostgreSQL (see DEFER_ABOVE) */
const PG_DIRTY = [
  `CREATE TABLE search_dirty (kind varchar(10) NOT NULL, object_id integer NOT NULL, PRIMARY KEY (kind, object_id))`,
  `CREATE OR REPLACE FUNCTION mamkit_search_values() RETURNS trigger LANGUAGE plpgsql ${CUSTOM_PLANS} AS $$
   DECLARE assets integer[] := ARRAY(SELECT DISTINCT owner_id FROM changed_values WHERE owner_type = 'asset');
   BEGIN
     IF cardinality(assets) > ${DEFER_ABOVE} THEN
       INSERT INTO search_dirty (kind, object_id) SELECT 'asset', unnest(assets) ON CONFLICT DO NOTHING;
     ELSE
       PERFORM mamkit_search_assets(assets);
     END IF;
     PERFORM mamkit_search_projects(ARRAY(SELECT DISTINCT owner_id FROM changed_values WHERE owner_type = 'project'));
     RETURN NULL;
   END $$`,
]

/**
 * 0005: the field lexemes (PG_FIELD_LEXEME above), filled for the documents that exist in one pass per
 * batch of ids, without rebuilding their words.
 */
const PG_FIELDS = [
  `ALTER TABLE search_documents ADD COLUMN fields tsvector NOT NULL DEFAULT ''`,
  PG_FIELD_LEXEME,
  pgAssetsFunction(true, true),
  pgProjectsFunction(true),
]
const PG_FIELDS_INDEX = `CREATE INDEX search_documents_fields ON search_documents USING gin (fields)`

/**
 * 0008: the lexicon of the words' index, every lexeme a document's `tsv` holds (or held: a word no document
 * holds any more stays, which costs a search an index lookup of nothing, never a wrong answer). A word's
 * prefix (`kanertorner`) is looked up here and searched as its exact lexemes (service.ts, prefixLexemes):
 * GIN turns a prefix into a bitmap of every document holding a matching lexeme before it ANDs anything
 * (`'kanertorner':*`: 24,750 entries at a million assets), while exact lexemes ANDed with others are
 * skipped through. Written by the statement that writes documents, so a word is in the lexicon as soon as
 * a document with it is visible. No unique key, on purpose: `ON CONFLICT` would make a transaction that
 * writes a new word wait for another one writing the same word (and two of them could deadlock on two
 * such words); a lexeme two transactions add at once is there twice, which the lookup's `DISTINCT` folds.
 * `COLLATE "C"`: a prefix is a byte range, as tsquery compares lexemes.
 */
const PG_LEXICON = [
  `CREATE TABLE search_lexemes (lexeme text COLLATE "C" NOT NULL)`,
  `INSERT INTO search_lexemes (lexeme) SELECT DISTINCT unnest(tsvector_to_array(tsv)) FROM search_documents`,
  `CREATE INDEX search_lexemes_lexeme ON search_lexemes (lexeme)`,
  `CREATE FUNCTION mamkit_search_lexicon() RETURNS trigger LANGUAGE plpgsql ${CUSTOM_PLANS} AS $$
   BEGIN
     -- each distinct word probed in the index (LATERAL … LIMIT 1): as NOT EXISTS the planner hashed the whole
     -- lexicon (a million rows) to look up a thousand documents' words, 220 ms per statement
     INSERT INTO search_lexemes (lexeme)
       SELECT w.lexeme FROM (SELECT DISTINCT unnest(tsvector_to_array(tsv)) AS lexeme FROM written_documents) w
       LEFT JOIN LATERAL (SELECT true AS known FROM search_lexemes s WHERE s.lexeme = w.lexeme LIMIT 1) s ON true
       WHERE s.known IS NULL;
     RETURN NULL;
   END $$`,
  // a trigger with transition tables takes one event and no column list: one for inserts (how documents are written), one for updates
  `CREATE TRIGGER search_lexicon_insert AFTER INSERT ON search_documents REFERENCING NEW TABLE AS written_documents FOR EACH STATEMENT EXECUTE FUNCTION mamkit_search_lexicon()`,
  `CREATE TRIGGER search_lexicon_update AFTER UPDATE ON search_documents REFERENCING NEW TABLE AS written_documents FOR EACH STATEMENT EXECUTE FUNCTION mamkit_search_lexicon()`,
]

/**
 * 0009: two tags in every document's `tsv`, which no word can be (words are letters and digits only):
 * `~b<n>`, the bucket of its object id (`object_id >> TAG_BUCKET_BITS`: 65,536 ids), and `~p<id>`, its
 * project. ANDed with a term's words in the one GIN scan, they let GIN skip to the newest ids, or to the
 * projects a user may read, before any row is read from the heap (service.ts, `open`): a broad field filter
 * (`client:client kanertorner`) read ~10,000 candidate rows to keep the newest 1,000. They hold no position
 * and are in no term, so ranks and phrases are unchanged. Written by the document functions from now on;
 * the documents that exist get theirs in batches, the word index dropped and built anew around it (as 0005).
 *
 * Also: the lexicon's trigger (0008) plans each call anew, and a lexicon autovacuum had not analyzed yet (a
 * new database's first ingest) was planned as a sequential scan per word: 2.09 billion rows read by 275,646
 * scans in the first 60,000 assets, inserts down to 647/s. Without sequential scans the planner has only the
 * lexicon's index to probe.
 */
const PG_TAGS = [
  `ALTER FUNCTION mamkit_search_lexicon() SET enable_seqscan = off`,
  `CREATE FUNCTION mamkit_search_tags(object_id integer, project_id integer) RETURNS tsvector IMMUTABLE LANGUAGE sql AS $$
   SELECT array_to_tsvector(array_remove(ARRAY['~b' || (object_id >> ${TAG_BUCKET_BITS}), '~p' || project_id], NULL)) $$`,
  pgAssetsFunction(true, true, true),
  pgProjectsFunction(true, true),
]

// ---- SQLite -----------------------------------------------------------------------------------

/**
 * 0006, SQLite: each custom value and indexed property of a document as `=b= field = value` / `=c= key =
 * value` in a second FTS5 table (`search_fields_fts`, rowid the document's id), whose tokenizer keeps `=`
 * in tokens (`tokenchars '='`) and where every `=` of the text itself is a space: the markers `=b=`,
 * `=c=` and `=` are tokens no word can be. A `field:value` filter is then the phrase `"=b= client = acme
 * co" *`, which holds only where a value of that field starts with those words (the last a prefix):
 * PostgreSQL's field lexemes (0005) on FTS5's own word rule, so both databases answer `field:value` alike.
 */
const SQLITE_FIELDS_FTS = `CREATE VIRTUAL TABLE search_fields_fts USING fts5(fields, tokenize = "unicode61 remove_diacritics 0 tokenchars '='")`
const sqliteFieldsOfValues = (ownerType: string, owner: string) =>
  `coalesce((SELECT group_concat('=b= ' || replace(f.name, '=', ' ') || ' = ' || replace(v.text_value, '=', ' '), ' ') FROM custom_metadata_values v JOIN custom_metadata_fields f ON f.id = v.custom_metadata_field_id WHERE v.owner_type = '${ownerType}' AND v.owner_id = ${owner}), '')`
/** the field texts of the documents of kind `kind` that `where` selects (`a` the asset / `p` the project), into search_fields_fts */
const sqliteFields = (kind: 'asset' | 'project', where: string) => {
  const [table, alias] = kind === 'asset' ? ['assets', 'a'] : ['projects', 'p']
  const text =
    kind === 'asset'
      ? `${sqliteFieldsOfValues('asset', 'a.id')} || ' ' ||
      coalesce((SELECT group_concat('=c= ' || replace(j.key, '=', ' ') || ' = ' || replace(j.value, '=', ' '), ' ') FROM json_each(a.metadata) j WHERE j.key IN (SELECT name FROM search_properties)), '')`
      : sqliteFieldsOfValues('project', 'p.id')
  return `
  DELETE FROM search_fields_fts WHERE rowid IN (SELECT d.id FROM search_documents d JOIN ${table} ${alias} ON ${alias}.id = d.object_id WHERE d.kind = '${kind}' AND ${where});
  INSERT INTO search_fields_fts (rowid, fields)
    SELECT d.id, ${text}
    FROM ${table} ${alias} JOIN search_documents d ON d.kind = '${kind}' AND d.object_id = ${alias}.id WHERE ${where};`
}

/** the words of the assets `where` selects (`a` is the asset), written into both tables (and the field texts: `fields`, 0006) */
const sqliteAssets = (where: string, spoken = true, fields = true) => `
  DELETE FROM search_fts WHERE rowid IN (SELECT d.id FROM search_documents d JOIN assets a ON a.id = d.object_id WHERE d.kind = 'asset' AND ${where});
  INSERT INTO search_documents (kind, object_id, project_id, asset_type, folder, created_at)
    SELECT 'asset', a.id, a.project_id, a.type, a.folder, a.created_at FROM assets a WHERE ${where}
    ON CONFLICT (kind, object_id) DO UPDATE SET project_id = excluded.project_id, asset_type = excluded.asset_type, folder = excluded.folder;
  INSERT INTO search_fts (rowid, name, custom, props${spoken ? ', spoken' : ''})
    SELECT d.id, a.name || ' ' || a.path,
      coalesce((SELECT group_concat(f.name || ' ' || v.text_value, ' ') FROM custom_metadata_values v JOIN custom_metadata_fields f ON f.id = v.custom_metadata_field_id WHERE v.owner_type = 'asset' AND v.owner_id = a.id), ''),
      coalesce((SELECT group_concat(j.key || ' ' || j.value, ' ') FROM json_each(a.metadata) j WHERE j.key IN (SELECT name FROM search_properties)), '')${
        spoken ? `,
      coalesce((SELECT group_concat(t.text, ' ') FROM (SELECT text FROM search_texts WHERE asset_id = a.id ORDER BY source_id, start_ms, id) t), '')` : ''
      }
    FROM assets a JOIN search_documents d ON d.kind = 'asset' AND d.object_id = a.id WHERE ${where};${fields ? sqliteFields('asset', where) : ''}`

const sqliteProjects = (where: string, fields = true) => `
  DELETE FROM search_fts WHERE rowid IN (SELECT d.id FROM search_documents d JOIN projects p ON p.id = d.object_id WHERE d.kind = 'project' AND ${where});
  INSERT INTO search_documents (kind, object_id, project_id, asset_type, folder, created_at)
    SELECT 'project', p.id, p.id, NULL, NULL, p.created_at FROM projects p WHERE ${where}
    ON CONFLICT (kind, object_id) DO NOTHING;
  INSERT INTO search_fts (rowid, name, custom, props)
    SELECT d.id, p.name,
      coalesce((SELECT group_concat(f.name || ' ' || v.text_value, ' ') FROM custom_metadata_values v JOIN custom_metadata_fields f ON f.id = v.custom_metadata_field_id WHERE v.owner_type = 'project' AND v.owner_id = p.id), ''),
      coalesce(p.alternative_name, '') || ' ' || coalesce(p.description, '')
    FROM projects p JOIN search_documents d ON d.kind = 'project' AND d.object_id = p.id WHERE ${where};${fields ? sqliteFields('project', where) : ''}`

const sqliteRemove = (kind: string, id: string, fields = true) => `
  DELETE FROM search_fts WHERE rowid IN (SELECT id FROM search_documents WHERE kind = '${kind}' AND object_id = ${id});${
    fields ? `
  DELETE FROM search_fields_fts WHERE rowid IN (SELECT id FROM search_documents WHERE kind = '${kind}' AND object_id = ${id});` : ''
  }
  DELETE FROM search_documents WHERE kind = '${kind}' AND object_id = ${id};`

/** the triggers that write assets' documents (they name the FTS columns, so 0002 makes them anew) */
const sqliteAssetTriggers = (spoken: boolean, fields = false) => [
  `CREATE TRIGGER search_assets_insert AFTER INSERT ON assets BEGIN ${sqliteAssets('a.id = NEW.id', spoken, fields)} END`,
  `CREATE TRIGGER search_assets_update AFTER UPDATE ON assets
     WHEN OLD.name IS NOT NEW.name OR OLD.path IS NOT NEW.path OR OLD.type IS NOT NEW.type OR OLD.project_id IS NOT NEW.project_id OR OLD.metadata IS NOT NEW.metadata
     BEGIN ${sqliteAssets('a.id = NEW.id', spoken, fields)} END`,
  `CREATE TRIGGER search_fields_rename AFTER UPDATE ON custom_metadata_fields WHEN OLD.name IS NOT NEW.name BEGIN
     ${sqliteAssets(`a.id IN (SELECT owner_id FROM custom_metadata_values WHERE custom_metadata_field_id = NEW.id AND owner_type = 'asset')`, spoken, fields)}
     ${sqliteProjects(`p.id IN (SELECT owner_id FROM custom_metadata_values WHERE custom_metadata_field_id = NEW.id AND owner_type = 'project')`, fields)}
   END`,
  ...(['INSERT', 'UPDATE', 'DELETE'] as const).map((op) => {
    const row = op === 'DELETE' ? 'OLD' : 'NEW'
    return `CREATE TRIGGER search_values_${op.toLowerCase()}_asset AFTER ${op} ON custom_metadata_values WHEN ${row}.owner_type = 'asset' BEGIN ${sqliteAssets(`a.id = ${row}.owner_id`, spoken, fields)} END`
  }),
]
/** the triggers that write projects' documents and remove assets' (0006 makes them anew with the field texts) */
const sqliteProjectTriggers = (fields: boolean) => [
  `CREATE TRIGGER search_assets_delete AFTER DELETE ON assets BEGIN ${sqliteRemove('asset', 'OLD.id', fields)} END`,
  `CREATE TRIGGER search_projects_insert AFTER INSERT ON projects BEGIN ${sqliteProjects('p.id = NEW.id', fields)} END`,
  `CREATE TRIGGER search_projects_update AFTER UPDATE ON projects
     WHEN OLD.name IS NOT NEW.name OR OLD.description IS NOT NEW.description OR OLD.alternative_name IS NOT NEW.alternative_name
     BEGIN ${sqliteProjects('p.id = NEW.id', fields)} END`,
  `CREATE TRIGGER search_projects_delete AFTER DELETE ON projects BEGIN ${sqliteRemove('project', 'OLD.id', fields)} END`,
  ...(['INSERT', 'UPDATE', 'DELETE'] as const).map((op) => {
    const row = op === 'DELETE' ? 'OLD' : 'NEW'
    return `CREATE TRIGGER search_values_${op.toLowerCase()}_project AFTER ${op} ON custom_metadata_values WHEN ${row}.owner_type = 'project' BEGIN ${sqliteProjects(`p.id = ${row}.owner_id`, fields)} END`
  }),
]
const SQLITE_PROJECT_TRIGGERS = ['search_assets_delete', 'search_projects_insert', 'search_projects_update', 'search_projects_delete', 'search_values_insert_project', 'search_values_update_project', 'search_values_delete_project']
const SQLITE_ASSET_TRIGGERS = ['search_assets_insert', 'search_assets_update', 'search_fields_rename', 'search_values_insert_asset', 'search_values_update_asset', 'search_values_delete_asset']
const FTS = (spoken: boolean) => `CREATE VIRTUAL TABLE search_fts USING fts5(name, custom, props${spoken ? ', spoken' : ''}, tokenize = 'unicode61 remove_diacritics 0')`

const SQLITE = [
  `CREATE TABLE search_properties (name varchar(100) PRIMARY KEY)`,
  `CREATE TABLE search_documents (
     id integer PRIMARY KEY AUTOINCREMENT,
     kind varchar(10) NOT NULL,
     object_id integer NOT NULL,
     project_id integer NOT NULL,
     asset_type varchar(10),
     folder text,
     created_at datetime NOT NULL,
     UNIQUE (kind, object_id))`,
  `CREATE INDEX search_documents_project ON search_documents (project_id, kind, object_id)`,
  // columns weighted by bm25 at query time: name and path, custom values, technical properties / description
  FTS(false),
  ...sqliteAssetTriggers(false),
  ...sqliteProjectTriggers(false),
]

/**
 * PostgreSQL, a migration's rewrite of the documents that exist: each statement (bound to a batch `d.id > ? AND
 * d.id <= ?`) over batches of 50,000 ids. An update moves each row, so the word index is dropped and built anew
 * after (one build, not an insert of every document's words again), in memory at once: built in 64 MB parts
 * (the default), its posting trees came out so that GIN took `client` (333,000 documents at a million) for
 * rarer than `kanertorner` (24,776) and walked it, 3.8 → 14.5 ms for their AND.
 */
async function rewriteDocuments(knex: Knex, statements: string[]): Promise<void> {
  await knex.raw('DROP INDEX search_documents_tsv')
  const [{ hi }] = (await knex.raw(`SELECT coalesce(max(id), 0) AS hi FROM search_documents`)).rows
  for (let lo = 0; lo <= Number(hi); lo += 50_000) for (const sql of statements) await knex.raw(sql, [lo, lo + 50_000])
  await knex.raw(`SET LOCAL maintenance_work_mem = '512MB'`)
  await knex.raw(`CREATE INDEX search_documents_tsv ON search_documents USING gin (tsv)`)
}

/** rebuilds the documents of every asset and project, in batches of ids (after the property list changed) */
export async function reindex(knex: Knex, dialect: string, kinds: Array<'asset' | 'project'> = ['asset', 'project'], signal?: AbortSignal, spoken = true, fields = true): Promise<number> {
  let n = 0
  for (const kind of kinds) {
    const table = kind === 'asset' ? 'assets' : 'projects'
    let after = 0
    for (;;) {
      if (signal?.aborted) return n
      const ids = (await knex(table).where('id', '>', after).orderBy('id').limit(2000).select('id')).map((r: any) => Number(r.id))
      if (!ids.length) break
      const [lo, hi] = [ids[0], ids[ids.length - 1]]
      if (dialect === 'postgresql') await knex.raw(`SELECT mamkit_search_${table}(?::integer[])`, [ids])
      else
        await knex.transaction(async (trx) => {
          const sql = kind === 'asset' ? sqliteAssets(`a.id BETWEEN ${lo} AND ${hi}`, spoken, fields) : sqliteProjects(`p.id BETWEEN ${lo} AND ${hi}`, fields)
          for (const statement of sql.split(';').map((s) => s.trim()).filter(Boolean)) await trx.raw(statement)
        })
      n += ids.length
      after = hi
    }
  }
  return n
}

/** rewrites the documents of some assets inside the caller's transaction (their texts changed) */
export async function refreshAssets(trx: Knex, dialect: string, ids: number[]): Promise<void> {
  if (!ids.length) return
  if (dialect === 'postgresql') await trx.raw('SELECT mamkit_search_assets(?::integer[])', [ids])
  else for (const statement of sqliteAssets(`a.id IN (${ids.map((id) => Number(id)).join(', ')})`).split(';').map((s) => s.trim()).filter(Boolean)) await trx.raw(statement)
}

export const DEFAULT_PROPERTIES = ['video_codec', 'audio_codec', 'width', 'height', 'start_timecode', 'reel_name', 'clip_name', 'camera_make', 'camera_model']

export const migrations: Migration[] = [
  {
    name: '0001-search-index',
    async up(knex, dialect) {
      for (const statement of dialect === 'postgresql' ? PG : SQLITE) await knex.raw(statement)
      await knex('search_properties').insert(DEFAULT_PROPERTIES.map((name) => ({ name })))
      // documents for what exists already
      await reindex(knex, dialect, ['asset', 'project'], undefined, false, false)
    },
  },
  {
    // texts other plugins give assets (transcript sentences, with their time), part of the asset's document
    name: '0002-search-texts',
    async up(knex, dialect) {
      await knex.schema.createTable('search_texts', (t) => {
        t.increments('id')
        t.integer('asset_id').notNullable().references('id').inTable('assets').onDelete('CASCADE')
        t.string('source', 40).notNullable()
        t.integer('source_id').notNullable()
        t.integer('ref_id').notNullable()
        t.integer('start_ms')
        t.text('text').notNullable()
        t.index(['asset_id', 'source', 'source_id'])
      })
      if (dialect === 'postgresql') await knex.raw(pgAssetsFunction(true))
      else {
        // an FTS5 table takes no new column: made anew with a `spoken` column, with the triggers that name its columns
        for (const name of SQLITE_ASSET_TRIGGERS) await knex.raw(`DROP TRIGGER IF EXISTS ${name}`)
        await knex.raw('DROP TABLE search_fts')
        await knex.raw(FTS(true))
        for (const statement of sqliteAssetTriggers(true)) await knex.raw(statement)
        await knex('search_documents').delete()
        await reindex(knex, dialect, ['asset', 'project'], undefined, true, false)
      }
    },
  },
  {
    name: '0003-search-statement-triggers',
    async up(knex, dialect) {
      if (dialect === 'postgresql') for (const statement of PG_STATEMENT_TRIGGERS) await knex.raw(statement)
    },
  },
  {
    // SQLite keeps its per-row triggers (one writer; the 2 s goal of a bulk update is PostgreSQL's)
    name: '0004-search-dirty',
    async up(knex, dialect) {
      if (dialect === 'postgresql') for (const statement of PG_DIRTY) await knex.raw(statement)
    },
  },
  {
    // PostgreSQL: field:value against one lexeme per value (PG_FIELD_LEXEME); SQLite's FTS5 column filter stays
    name: '0005-search-field-lexemes',
    async up(knex, dialect) {
      if (dialect !== 'postgresql') return
      for (const statement of PG_FIELDS) await knex.raw(statement)
      await rewriteDocuments(knex, [
        `UPDATE search_documents d SET fields = ${PG_ASSET_FIELDS} FROM assets a WHERE d.kind = 'asset' AND a.id = d.object_id AND d.id > ? AND d.id <= ?`,
        `UPDATE search_documents d SET fields = ${PG_PROJECT_FIELDS} FROM projects p WHERE d.kind = 'project' AND p.id = d.object_id AND d.id > ? AND d.id <= ?`,
      ])
      await knex.raw(PG_FIELDS_INDEX)
    },
  },
  {
    // SQLite: field:value on the field texts (SQLITE_FIELDS_FTS), as PostgreSQL on its field lexemes (0005)
    name: '0006-search-field-texts',
    async up(knex, dialect) {
      if (dialect === 'postgresql') return
      await knex.raw(SQLITE_FIELDS_FTS)
      for (const name of [...SQLITE_ASSET_TRIGGERS, ...SQLITE_PROJECT_TRIGGERS]) await knex.raw(`DROP TRIGGER IF EXISTS ${name}`)
      for (const statement of [...sqliteAssetTriggers(true, true), ...sqliteProjectTriggers(true)]) await knex.raw(statement)
      for (const kind of ['asset', 'project'] as const) {
        const sql = sqliteFields(kind, 'true')
        for (const statement of sql.split(';').map((s) => s.trim()).filter(Boolean)) await knex.raw(statement)
      }
    },
  },
  {
    // PostgreSQL: a user's walk of the readable documents' ids, newest first, from the index alone (service.ts, readableWalk);
    // IF NOT EXISTS: the bench's kept million had it made by hand while it was measured
    name: '0007-search-readable-walk',
    async up(knex, dialect) {
      if (dialect === 'postgresql') await knex.raw('CREATE INDEX IF NOT EXISTS search_documents_kind_object_project ON search_documents (kind, object_id) INCLUDE (project_id)')
    },
  },
  {
    // PostgreSQL: a word's prefix searched as its exact lexemes (PG_LEXICON)
    name: '0008-search-lexicon',
    async up(knex, dialect) {
      if (dialect === 'postgresql') for (const statement of PG_LEXICON) await knex.raw(statement)
    },
  },
  {
    // PostgreSQL: id buckets and projects as tags of the word index (PG_TAGS)
    name: '0009-search-tags',
    async up(knex, dialect) {
      if (dialect !== 'postgresql') return
      for (const statement of PG_TAGS) await knex.raw(statement)
      await rewriteDocuments(knex, [`UPDATE search_documents d SET tsv = tsv || mamkit_search_tags(object_id, project_id) WHERE d.id > ? AND d.id <= ?`])
      await knex.raw('ANALYZE search_documents')
    },
  },
]
