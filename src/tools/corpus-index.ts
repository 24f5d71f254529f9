import { readFileSync } from "node:fs";
import { mkdir, readFile, rename, stat, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import MiniSearch, { type Options } from "minisearch";
import { z } from "zod";
import { type CorpusDoc, CorpusError, readCorpus, readCorpusRows } from "./corpus.js";
import type { SearchHit } from "./search-results.js";
import { bestSnippet } from "./snippet.js";
import { processTerm, termsOf, tokenize } from "./terms.js";

/** Bump when the persisted layout or the term rules (terms.ts) change: old indexes are rebuilt. */
const INDEX_FORMAT = 1;

const MANIFEST_FILE = "manifest.json";
const INDEX_FILE = "index.json";
const DOCS_FILE = "docs.json";

/** Written last, so a half-written index never looks valid. */
const Manifest = z.object({
  format: z.number().int(),
  corpus: z.object({ path: z.string(), size: z.number(), mtimeMs: z.number() }),
  docCount: z.number().int().nonnegative(),
  library: z.object({ name: z.literal("minisearch"), version: z.string() }),
  builtAt: z.string(),
  buildMs: z.number(),
});
export type IndexManifest = z.infer<typeof Manifest>;

/** Per document: corpus id, url (or null), byte offset and length of its row in the corpus. */
const DocRefs = z.array(z.tuple([z.string(), z.string().nullable(), z.number(), z.number()]));
type DocRef = z.infer<typeof DocRefs>[number];

interface IndexedFields {
  i: number;
  title: string;
  text: string;
}

const MINISEARCH_OPTIONS: Options<IndexedFields> = {
  idField: "i",
  fields: ["title", "text"],
  storeFields: [],
  tokenize,
  processTerm: (term) => processTerm(term),
  searchOptions: {
    // A query word in the title says more about a document than the same word in its body.
    boost: { title: 2 },
    bm25: { k: 1.2, b: 0.75, d: 0.5 },
    prefix: false,
    fuzzy: false,
    combineWith: "OR",
  },
};

export interface BuildProgress {
  docs: number;
  bytes: number;
  totalBytes: number;
}

export interface OpenIndexOptions {
  /** Where the index lives; default `<corpus>.index/`. */
  indexDir?: string;
  /** Rebuild even when the persisted index matches the corpus. */
  rebuild?: boolean;
  onProgress?: (p: BuildProgress) => void;
}

export const defaultIndexDir = (corpusPath: string): string => `${resolve(corpusPath)}.index`;

function libraryVersion(): string {
  let dir = dirname(createRequire(import.meta.url).resolve("minisearch"));
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as {
        name?: string;
        version?: string;
      };
      if (pkg.name === "minisearch" && pkg.version) return pkg.version;
    } catch {
      // no package.json at this level: keep walking up
    }
    const parent = dirname(dir);
    if (parent === dir) return "unknown";
    dir = parent;
  }
}

/** Canonical form of a URL for lookups: no fragment, no trailing slash, decoded path. */
export function normalizeUrl(url: string): string {
  try {
    const u = new URL(url.trim());
    let path = u.pathname.replace(/\/+$/, "");
    try {
      path = decodeURIComponent(path);
    } catch {
      // keep the encoded path when it is not valid percent-encoding
    }
    return `${u.protocol}//${u.host.toLowerCase()}${path}${u.search}`;
  } catch {
    return url.trim().replace(/\/+$/, "");
  }
}

async function writeAtomic(path: string, data: string): Promise<void> {
  await writeFile(`${path}.tmp`, data);
  await rename(`${path}.tmp`, path);
}

/** Positions of the `k` best documents for `query` by BM25, best first. */
const rankBm25 = (engine: MiniSearch<IndexedFields>, query: string, k: number): number[] =>
  engine
    .search(query)
    .slice(0, k)
    .map((r) => r.id as number);

/** Search results as the search tool shows them: each document with its most query-relevant snippet. */
function hitsFor(query: string, docs: readonly CorpusDoc[]): SearchHit[] {
  const queryTerms = new Set(termsOf(query));
  return docs.map((doc) => ({
    title: doc.title,
    ...(doc.url ? { url: doc.url } : {}),
    snippet: bestSnippet(doc.text, queryTerms),
  }));
}

/**
 * The same ranking and snippets as a `CorpusIndex`, over documents already in memory and never
 * persisted: for text generated on the fly, such as pretraining drills that show search results.
 */
export class MemoryIndex {
  private readonly engine = new MiniSearch<IndexedFields>(MINISEARCH_OPTIONS);

  constructor(private readonly docs: readonly CorpusDoc[]) {
    this.engine.addAll(docs.map((d, i) => ({ i, title: d.title, text: d.text })));
  }

  search(query: string, k: number): SearchHit[] {
    return hitsFor(
      query,
      rankBm25(this.engine, query, k).map((i) => this.docs[i]),
    );
  }
}

/**
 * A BM25 index over a JSONL corpus, persisted next to it. Document texts stay in the corpus file: the
 * index keeps each row's byte position and reads the few rows it needs for snippets.
 */
export class CorpusIndex {
  private readonly byUrl = new Map<string, number>();

  private constructor(
    readonly corpusPath: string,
    readonly manifest: IndexManifest,
    private readonly engine: MiniSearch<IndexedFields>,
    private readonly docs: DocRef[],
  ) {
    docs.forEach(([, url], i) => {
      if (url !== null) this.byUrl.set(normalizeUrl(url), i);
    });
  }

  get size(): number {
    return this.docs.length;
  }

  /**
   * Loads the persisted index when its manifest matches the corpus file (path, size, mtime, format,
   * library version); otherwise builds and persists it. `reused` says which happened.
   */
  static async open(
    corpusPath: string,
    opts: OpenIndexOptions = {},
  ): Promise<{ index: CorpusIndex; reused: boolean }> {
    const corpus = resolve(corpusPath);
    const dir = resolve(opts.indexDir ?? defaultIndexDir(corpus));
    if (!opts.rebuild) {
      const loaded = await CorpusIndex.loadIfFresh(corpus, dir);
      if (loaded) return { index: loaded, reused: true };
    }
    return { index: await CorpusIndex.build(corpus, dir, opts.onProgress), reused: false };
  }

  private static async loadIfFresh(corpus: string, dir: string): Promise<CorpusIndex | null> {
    let manifest: IndexManifest;
    try {
      manifest = Manifest.parse(JSON.parse(await readFile(join(dir, MANIFEST_FILE), "utf8")));
    } catch {
      return null;
    }
    const st = await stat(corpus);
    const fresh =
      manifest.format === INDEX_FORMAT &&
      manifest.corpus.path === corpus &&
      manifest.corpus.size === st.size &&
      manifest.corpus.mtimeMs === st.mtimeMs &&
      manifest.library.version === libraryVersion();
    if (!fresh) return null;
    try {
      const [json, docsJson] = await Promise.all([
        readFile(join(dir, INDEX_FILE), "utf8"),
        readFile(join(dir, DOCS_FILE), "utf8"),
      ]);
      const engine = MiniSearch.loadJSON<IndexedFields>(json, MINISEARCH_OPTIONS);
      return new CorpusIndex(corpus, manifest, engine, DocRefs.parse(JSON.parse(docsJson)));
    } catch {
      // A damaged index is rebuilt rather than trusted.
      return null;
    }
  }

  private static async build(
    corpus: string,
    dir: string,
    onProgress?: (p: BuildProgress) => void,
  ): Promise<CorpusIndex> {
    const started = performance.now();
    const st = await stat(corpus);
    const engine = new MiniSearch<IndexedFields>(MINISEARCH_OPTIONS);
    const docs: DocRef[] = [];
    const firstLine = new Map<string, number>();
    for await (const { doc, line, offset, length } of readCorpus(corpus)) {
      const seen = firstLine.get(doc.id);
      if (seen !== undefined) {
        throw new CorpusError(
          `${corpus}:${line}: field "id": duplicate id "${doc.id}" (first on line ${seen})`,
        );
      }
      firstLine.set(doc.id, line);
      engine.add({ i: docs.length, title: doc.title, text: doc.text });
      docs.push([doc.id, doc.url ?? null, offset, length]);
      if (onProgress && docs.length % 1000 === 0) {
        onProgress({ docs: docs.length, bytes: offset + length, totalBytes: st.size });
      }
    }
    onProgress?.({ docs: docs.length, bytes: st.size, totalBytes: st.size });
    const manifest: IndexManifest = {
      format: INDEX_FORMAT,
      corpus: { path: corpus, size: st.size, mtimeMs: st.mtimeMs },
      docCount: docs.length,
      library: { name: "minisearch", version: libraryVersion() },
      builtAt: new Date().toISOString(),
      buildMs: Math.round(performance.now() - started),
    };
    await mkdir(dir, { recursive: true });
    await writeAtomic(join(dir, INDEX_FILE), JSON.stringify(engine));
    await writeAtomic(join(dir, DOCS_FILE), JSON.stringify(docs));
    await writeAtomic(join(dir, MANIFEST_FILE), `${JSON.stringify(manifest, null, 2)}\n`);
    return new CorpusIndex(corpus, manifest, engine, docs);
  }

  /** Corpus positions of the `k` best documents for `query` by BM25, best first. */
  rank(query: string, k: number): number[] {
    return rankBm25(this.engine, query, k);
  }

  /** The `k` best documents for `query` by BM25, each with its most query-relevant snippet. */
  async search(query: string, k: number): Promise<SearchHit[]> {
    return hitsFor(query, await this.readDocs(this.rank(query, k)));
  }

  /**
   * The `k` best documents for `query` by BM25 with their scores, best first: what a retrieval server
   * (Search-R1's `/retrieve`) returns, whole documents rather than snippets.
   */
  async retrieve(query: string, k: number): Promise<Array<{ doc: CorpusDoc; score: number }>> {
    const results = this.engine.search(query).slice(0, k);
    const docs = await this.readDocs(results.map((r) => r.id as number));
    return docs.map((doc, i) => ({ doc, score: results[i].score }));
  }

  /** The corpus document whose `url` field is `url` (compared after normalisation), if any. */
  async documentByUrl(url: string): Promise<CorpusDoc | undefined> {
    const i = this.byUrl.get(normalizeUrl(url));
    return i === undefined ? undefined : (await this.readDocs([i]))[0];
  }

  private async readDocs(indices: number[]): Promise<CorpusDoc[]> {
    const st = await stat(this.corpusPath);
    const { size, mtimeMs } = this.manifest.corpus;
    if (st.size !== size || st.mtimeMs !== mtimeMs) {
      throw new CorpusError(`${this.corpusPath}: changed since it was indexed; run \`coa index\` again`);
    }
    const refs = indices.map((i) => this.docs[i]);
    return readCorpusRows(
      this.corpusPath,
      refs.map(([, , offset, length]) => ({ offset, length })),
    );
  }
}
