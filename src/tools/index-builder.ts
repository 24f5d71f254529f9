// Streams a corpus into an IndexStore, segment by segment, from wherever the index stopped: a fresh
// build, an interrupted build resumed, or rows appended to the corpus since the last build.

import { createHash } from "node:crypto";
import { open, stat } from "node:fs/promises";
import {
  addFieldLengths,
  analyzeDocument,
  type Bm25Mode,
  emptyFieldStats,
  MODE_FIELDS,
  PostingsBuilder,
  TermCache,
} from "./bm25.js";
import { CorpusError, DEFAULT_MAX_ROW_BYTES, readCorpus } from "./corpus.js";
import { isGzip } from "./corpus-formats.js";
import { INDEX_FORMAT, type IndexManifest, IndexStore } from "./index-store.js";
import { normalizeUrl } from "./urls.js";

export interface BuildProgress {
  docs: number;
  /** Bytes of the corpus file read (compressed bytes for a `.gz` file). */
  bytes: number;
  totalBytes: number;
  skipped: number;
}

export interface BuildOptions {
  /** `fail` (default): stop at the first bad row. `skip`: leave bad rows out, counted in the manifest. */
  badRows?: "fail" | "skip";
  maxRowBytes?: number;
  /** Postings held in memory before a segment is written: bounds the build's memory. */
  segmentPostings?: number;
  onProgress?: (p: BuildProgress) => void;
}

const DEFAULT_SEGMENT_POSTINGS = 8_000_000;
const SKIP_EXAMPLES = 20;

export interface SourceState {
  path: string;
  size: number;
  mtimeMs: number;
}

async function hashRange(path: string, start: number, end: number): Promise<string> {
  const handle = await open(path, "r");
  try {
    const buf = Buffer.alloc(Math.max(0, end - start));
    const { bytesRead } = await handle.read(buf, 0, buf.length, start);
    return createHash("sha256").update(buf.subarray(0, bytesRead)).digest("hex");
  } finally {
    await handle.close();
  }
}

export async function sourceState(path: string): Promise<SourceState> {
  const st = await stat(path);
  return { path, size: st.size, mtimeMs: st.mtimeMs };
}

/**
 * Hashes of the first 64 KiB and the last 4 KiB before `byte`: cheap to check, and unlikely to
 * survive an edit of the indexed rows. Only for plain files: in a `.gz`, `byte` is uncompressed.
 */
async function prefixHashes(path: string, byte: number): Promise<{ head: string; tail: string }> {
  if (isGzip(path)) return { head: "", tail: "" };
  const [head, tail] = await Promise.all([
    hashRange(path, 0, Math.min(byte, 64 * 1024)),
    hashRange(path, Math.max(0, byte - 4096), byte),
  ]);
  return { head, tail };
}

/** Whether an index stopped at `manifest` can go on over the corpus as it is now. */
export async function canContinue(manifest: IndexManifest, source: SourceState): Promise<boolean> {
  const { corpus, indexed } = manifest;
  if (manifest.format !== INDEX_FORMAT || corpus.path !== source.path) return false;
  if (isGzip(source.path)) return corpus.size === source.size && corpus.mtimeMs === source.mtimeMs;
  if (source.size < indexed.byte) return false;
  const now = await prefixHashes(source.path, indexed.byte);
  return now.head === indexed.head && now.tail === indexed.tail;
}

/** A manifest for a store that has nothing in it yet, to be scored by `bm25`. */
export function emptyManifest(source: SourceState, bm25: Bm25Mode): IndexManifest {
  return {
    format: INDEX_FORMAT,
    corpus: source,
    indexed: { byte: 0, line: 0, head: "", tail: "" },
    docCount: 0,
    bm25,
    fields: emptyFieldStats(bm25),
    segments: 0,
    skipped: { count: 0, examples: [] },
    complete: false,
    engine: { name: "sqlite", version: IndexStore.engineVersion() },
    builtAt: new Date().toISOString(),
    buildMs: 0,
  };
}

/**
 * Indexes the corpus rows after `from.indexed` into `store`, one transaction per segment, and
 * returns the manifest of the finished index. Memory is bounded by `segmentPostings` and the
 * longest row, whatever the corpus size.
 */
export async function indexRows(
  store: IndexStore,
  from: IndexManifest,
  source: SourceState,
  opts: BuildOptions = {},
): Promise<IndexManifest> {
  const started = performance.now();
  const terms = new TermCache();
  const segmentPostings = opts.segmentPostings ?? DEFAULT_SEGMENT_POSTINGS;
  const m: IndexManifest = {
    ...from,
    corpus: source,
    indexed: { ...from.indexed },
    skipped: { count: from.skipped.count, examples: [...from.skipped.examples] },
    fields: from.fields.map((f) => ({ ...f })),
    engine: { name: "sqlite", version: IndexStore.engineVersion() },
  };
  let readBytes = 0;
  let writer = store.begin();
  const nFields = MODE_FIELDS[m.bm25].length;
  const newFields = () =>
    Array.from({ length: nFields }, () => ({ postings: new PostingsBuilder(), lengths: [] as number[] }));
  let fields = newFields();
  let first = m.docCount;
  const postingsHeld = () => fields.reduce((n, f) => n + f.postings.count, 0);

  const progress = () =>
    opts.onProgress?.({
      docs: m.docCount,
      bytes: readBytes,
      totalBytes: source.size,
      skipped: m.skipped.count,
    });
  const skip = (message: string) => {
    if (opts.badRows !== "skip") throw new CorpusError(message);
    m.skipped.count += 1;
    if (m.skipped.examples.length < SKIP_EXAMPLES) m.skipped.examples.push(message);
  };
  const commit = async (complete: boolean) => {
    m.segments += 1;
    Object.assign(m.indexed, await prefixHashes(source.path, m.indexed.byte));
    m.complete = complete;
    m.buildMs = from.buildMs + Math.round(performance.now() - started);
    if (complete) m.builtAt = new Date().toISOString();
    writer.commit(
      m.segments - 1,
      fields.map((f) => ({ postings: f.postings.entries(), lengths: Uint32Array.from(f.lengths) })),
      first,
      m,
    );
  };

  progress();
  try {
    const rows = readCorpus(source.path, {
      from: m.indexed,
      maxRowBytes: opts.maxRowBytes ?? DEFAULT_MAX_ROW_BYTES,
      onRead: (bytes) => {
        readBytes = bytes;
      },
    });
    for await (const row of rows) {
      if ("error" in row) {
        skip(row.error);
      } else {
        const { doc } = row;
        const url = doc.url ? normalizeUrl(doc.url) : null;
        const takenOn = writer.addDoc(m.docCount, doc, url, row.line);
        if (takenOn !== undefined) {
          skip(`${source.path}:${row.line}: field "id": duplicate id "${doc.id}" (first on line ${takenOn})`);
        } else {
          const analyzed = analyzeDocument(m.bm25, doc.title, doc.text, terms);
          analyzed.forEach(({ counts, length }, f) => {
            fields[f].postings.add(m.docCount, counts);
            fields[f].lengths.push(length);
          });
          addFieldLengths(m.fields, m.docCount, analyzed);
          m.docCount += 1;
          if (m.docCount % 1000 === 0) progress();
        }
      }
      m.indexed.byte = row.end;
      m.indexed.line = row.line;
      if (postingsHeld() >= segmentPostings) {
        await commit(false);
        writer = store.begin();
        fields = newFields();
        first = m.docCount;
      }
    }
    await commit(true);
  } finally {
    writer.rollback();
  }
  readBytes = source.size;
  progress();
  return m;
}
