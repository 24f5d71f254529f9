// The on-disk index: one SQLite file (through better-sqlite3) holding the documents, their lengths,
// and per term and segment a posting list as one blob. Each build step (a segment) is one
// transaction, so a killed build leaves the file as it was after its last whole segment.

import Database from "better-sqlite3";
import { z } from "zod";
import { Bm25Mode, decodePostings, encodePostings, type Postings } from "./bm25.js";
import type { CorpusDoc } from "./corpus.js";

/**
 * Bump when the schema, the postings encoding or the term rules (terms.ts) change: old indexes are
 * rebuilt. 3: postings and lengths per field, and the BM25 mode in the manifest.
 */
export const INDEX_FORMAT = 3;

export const IndexManifest = z.object({
  format: z.number().int(),
  corpus: z.object({
    path: z.string(),
    size: z.number(),
    mtimeMs: z.number(),
  }),
  /**
   * How far the corpus is indexed: the next row starts after `byte` (uncompressed) and `line`.
   * `head` and `tail` hash the first 64 KiB and the last 4 KiB before `byte`: while both match,
   * the indexed rows are still there and what follows them can be indexed on top.
   */
  indexed: z.object({ byte: z.number(), line: z.number(), head: z.string(), tail: z.string() }),
  docCount: z.number().int().nonnegative(),
  /** How this index ranks (bm25.ts): chosen when it is first built, kept by every later update. */
  bm25: Bm25Mode,
  /** Per field of the mode (MODE_FIELDS), in order: lengths summed, and minisearch's running mean. */
  fields: z.array(z.object({ totalLength: z.number().nonnegative(), avgLength: z.number().nonnegative() })),
  segments: z.number().int().nonnegative(),
  /** Rows left out (bad JSON, missing fields, duplicate ids, …): how many, and the first messages. */
  skipped: z.object({ count: z.number().int().nonnegative(), examples: z.array(z.string()) }),
  /** Set only once the whole corpus is indexed: an interrupted build never looks finished. */
  complete: z.boolean(),
  engine: z.object({ name: z.literal("sqlite"), version: z.string() }),
  builtAt: z.string(),
  buildMs: z.number(),
});
export type IndexManifest = z.infer<typeof IndexManifest>;

export const INDEX_FILE = "index.sqlite";

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
  CREATE TABLE IF NOT EXISTS docs (
    pos INTEGER PRIMARY KEY, id TEXT NOT NULL, url TEXT, url_key TEXT,
    title TEXT NOT NULL, text TEXT NOT NULL, line INTEGER NOT NULL
  );
  CREATE UNIQUE INDEX IF NOT EXISTS docs_id ON docs (id);
  CREATE INDEX IF NOT EXISTS docs_url ON docs (url_key) WHERE url_key IS NOT NULL;
  CREATE TABLE IF NOT EXISTS postings (
    term TEXT NOT NULL, field INTEGER NOT NULL, seg INTEGER NOT NULL, data BLOB NOT NULL
  );
  CREATE INDEX IF NOT EXISTS postings_term ON postings (term, field, seg);
  CREATE TABLE IF NOT EXISTS lengths (
    seg INTEGER NOT NULL, field INTEGER NOT NULL, first INTEGER NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (seg, field)
  );
`;

type DocRow = { id: string; url: string | null; title: string; text: string };

export class IndexStore {
  private readonly getManifest;
  private readonly getPostings;
  private readonly getDoc;
  private readonly getByUrl;

  private constructor(private readonly db: Database.Database) {
    this.getManifest = db.prepare<[], string>("SELECT value FROM meta WHERE key = 'manifest'").pluck();
    this.getPostings = db.prepare<[string], { field: number; data: Buffer }>(
      "SELECT field, data FROM postings WHERE term = ? ORDER BY field, seg",
    );
    this.getDoc = db.prepare<[number], DocRow>("SELECT id, url, title, text FROM docs WHERE pos = ?");
    this.getByUrl = db
      .prepare<[string], number>("SELECT pos FROM docs WHERE url_key = ? ORDER BY pos LIMIT 1")
      .pluck();
  }

  /**
   * Opens (creating when missing) the index file. Always writable, even only to search: a build
   * killed inside a transaction leaves a journal that SQLite must roll back on the next open.
   */
  static open(path: string): IndexStore {
    const db = new Database(path);
    // Without fsync a killed process still leaves a consistent file (the journal is rolled back on
    // the next open); only a crash of the whole machine could damage it, and then it is rebuilt.
    db.pragma("synchronous = OFF");
    // A bounded page cache (64 MiB), and no memory-mapped I/O: mapped pages of a file of many GB would
    // count in the process's memory as it reads them.
    db.pragma("cache_size = -65536");
    db.exec(SCHEMA);
    return new IndexStore(db);
  }

  static engineVersion(): string {
    const db = new Database(":memory:");
    try {
      return db.prepare<[], string>("SELECT sqlite_version()").pluck().get() ?? "unknown";
    } finally {
      db.close();
    }
  }

  manifest(): IndexManifest | null {
    const json = this.getManifest.get();
    if (json === undefined) return null;
    const parsed = IndexManifest.safeParse(JSON.parse(json));
    return parsed.success ? parsed.data : null;
  }

  close(): void {
    this.db.close();
  }

  /** Starts a segment: its documents and postings become visible together, at `commitSegment`. */
  begin(): SegmentWriter {
    this.db.exec("BEGIN");
    return new SegmentWriter(this.db);
  }

  /** A term's posting lists per field (`fields` of them), each field's one list per segment. */
  postings(term: string, fields: number): Postings[][] {
    const out: Postings[][] = Array.from({ length: fields }, () => []);
    for (const { field, data } of this.getPostings.all(term)) out[field]?.push(decodePostings(data));
    return out;
  }

  /** Every document's length in each of `fields` fields, by position (4 bytes a document and field). */
  lengths(docCount: number, fields: number): Uint32Array[] {
    const out = Array.from({ length: fields }, () => new Uint32Array(docCount));
    for (const row of this.db
      .prepare<[], { field: number; first: number; data: Buffer }>("SELECT field, first, data FROM lengths")
      .iterate()) {
      out[row.field]?.set(new Uint32Array(new Uint8Array(row.data).buffer), row.first);
    }
    return out;
  }

  doc(pos: number): CorpusDoc {
    const row = this.getDoc.get(pos);
    if (!row) throw new Error(`index has no document at position ${pos}`);
    return { id: row.id, title: row.title, text: row.text, ...(row.url ? { url: row.url } : {}) };
  }

  positionOfUrl(urlKey: string): number | undefined {
    return this.getByUrl.get(urlKey);
  }
}

/** Writes one segment inside the transaction `IndexStore.begin` opened. */
export class SegmentWriter {
  private readonly insertDoc;
  private readonly lineOfId;
  private readonly insertPostings;
  private readonly insertLengths;
  private readonly setManifest;

  constructor(private readonly db: Database.Database) {
    this.insertDoc = db.prepare(
      "INSERT INTO docs (pos, id, url, url_key, title, text, line) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
    );
    this.lineOfId = db.prepare<[string], number>("SELECT line FROM docs WHERE id = ?").pluck();
    this.insertPostings = db.prepare("INSERT INTO postings (term, field, seg, data) VALUES (?, ?, ?, ?)");
    this.insertLengths = db.prepare("INSERT INTO lengths (seg, field, first, data) VALUES (?, ?, ?, ?)");
    this.setManifest = db.prepare("INSERT OR REPLACE INTO meta (key, value) VALUES ('manifest', ?)");
  }

  /** Adds a document at `pos`; when its id is taken, adds nothing and returns the line that took it. */
  addDoc(pos: number, doc: CorpusDoc, urlKey: string | null, line: number): number | undefined {
    const { changes } = this.insertDoc.run(pos, doc.id, doc.url ?? null, urlKey, doc.title, doc.text, line);
    return changes === 0 ? this.lineOfId.get(doc.id) : undefined;
  }

  /** Writes the segment's postings and lengths, field by field, then the manifest, and commits. */
  commit(
    segment: number,
    fields: ReadonlyArray<{ postings: Iterable<[string, Postings]>; lengths: Uint32Array }>,
    first: number,
    manifest: IndexManifest,
  ): void {
    fields.forEach(({ postings, lengths }, field) => {
      for (const [term, list] of postings)
        this.insertPostings.run(term, field, segment, encodePostings(list));
      const bytes = Buffer.from(lengths.buffer, lengths.byteOffset, lengths.byteLength);
      this.insertLengths.run(segment, field, first, bytes);
    });
    this.setManifest.run(JSON.stringify(manifest));
    this.db.exec("COMMIT");
  }

  rollback(): void {
    if (this.db.inTransaction) this.db.exec("ROLLBACK");
  }
}
