// The on-disk index: one SQLite file (through better-sqlite3) holding the documents, their lengths,
// and per term and segment a posting list as one blob. Each build step (a segment) is one
// transaction, so a killed build leaves the file as it was after its last whole segment.

import Database from "better-sqlite3";
import { z } from "zod";
import { decodePostings, encodePostings, type Postings } from "./bm25.js";
import type { CorpusDoc } from "./corpus.js";

/** Bump when the schema, the postings encoding or the term rules (terms.ts) change: old indexes are rebuilt. */
export const INDEX_FORMAT = 2;

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
  totalLength: z.number().nonnegative(),
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
  CREATE TABLE IF NOT EXISTS postings (term TEXT NOT NULL, seg INTEGER NOT NULL, data BLOB NOT NULL);
  CREATE INDEX IF NOT EXISTS postings_term ON postings (term, seg);
  CREATE TABLE IF NOT EXISTS lengths (seg INTEGER PRIMARY KEY, first INTEGER NOT NULL, data BLOB NOT NULL);
`;

type DocRow = { id: string; url: string | null; title: string; text: string };

export class IndexStore {
  private readonly getManifest;
  private readonly getPostings;
  private readonly getDoc;
  private readonly getByUrl;

  private constructor(private readonly db: Database.Database) {
    this.getManifest = db.prepare<[], string>("SELECT value FROM meta WHERE key = 'manifest'").pluck();
    this.getPostings = db
      .prepare<[string], Buffer>("SELECT data FROM postings WHERE term = ? ORDER BY seg")
      .pluck();
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

  postings(term: string): Postings[] {
    return this.getPostings.all(term).map(decodePostings);
  }

  /** Every document's length in terms, by position (4 bytes a document). */
  lengths(docCount: number): Uint32Array {
    const out = new Uint32Array(docCount);
    for (const row of this.db
      .prepare<[], { first: number; data: Buffer }>("SELECT first, data FROM lengths")
      .iterate()) {
      out.set(new Uint32Array(new Uint8Array(row.data).buffer), row.first);
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
    this.insertPostings = db.prepare("INSERT INTO postings (term, seg, data) VALUES (?, ?, ?)");
    this.insertLengths = db.prepare("INSERT INTO lengths (seg, first, data) VALUES (?, ?, ?)");
    this.setManifest = db.prepare("INSERT OR REPLACE INTO meta (key, value) VALUES ('manifest', ?)");
  }

  /** Adds a document at `pos`; when its id is taken, adds nothing and returns the line that took it. */
  addDoc(pos: number, doc: CorpusDoc, urlKey: string | null, line: number): number | undefined {
    const { changes } = this.insertDoc.run(pos, doc.id, doc.url ?? null, urlKey, doc.title, doc.text, line);
    return changes === 0 ? this.lineOfId.get(doc.id) : undefined;
  }

  commit(
    segment: number,
    postings: Iterable<[string, Postings]>,
    lengths: { first: number; data: Uint32Array },
    manifest: IndexManifest,
  ): void {
    for (const [term, list] of postings) this.insertPostings.run(term, segment, encodePostings(list));
    const { data } = lengths;
    this.insertLengths.run(
      segment,
      lengths.first,
      Buffer.from(data.buffer, data.byteOffset, data.byteLength),
    );
    this.setManifest.run(JSON.stringify(manifest));
    this.db.exec("COMMIT");
  }

  rollback(): void {
    if (this.db.inTransaction) this.db.exec("ROLLBACK");
  }
}
