import { existsSync } from "node:fs";
import { mkdir, rm } from "node:fs/promises";
import { join, resolve } from "node:path";
import {
  addFieldLengths,
  analyzeDocument,
  type Bm25Mode,
  emptyFieldStats,
  MODE_FIELDS,
  type Postings,
  PostingsBuilder,
  type ScoredDoc,
  TermCache,
  type TermPostings,
} from "./bm25.js";
import { type CorpusDoc, CorpusError } from "./corpus.js";
import {
  type BuildOptions,
  type BuildProgress,
  canContinue,
  emptyManifest,
  indexRows,
  sourceState,
} from "./index-builder.js";
import { INDEX_FILE, INDEX_FORMAT, type IndexManifest, IndexStore } from "./index-store.js";
import { Ranker } from "./ranking.js";
import type { SearchHit } from "./search-results.js";
import { bestSnippet } from "./snippet.js";
import { termsOf } from "./terms.js";
import { normalizeUrl } from "./urls.js";

export type { Bm25Mode, BuildProgress, IndexManifest };
export { normalizeUrl };

/** The ranking of an index built without saying which: the one coa's base model was pretrained on. */
export const DEFAULT_BM25: Bm25Mode = "coa";

export interface OpenIndexOptions extends BuildOptions {
  /** Where the index lives; default `<corpus>.index/`. */
  indexDir?: string;
  /** Rebuild even when the persisted index matches the corpus. */
  rebuild?: boolean;
  /**
   * How the index ranks. An existing index keeps its own mode unless this names another one, which
   * rebuilds it; a new index gets this, or DEFAULT_BM25.
   */
  bm25?: Bm25Mode;
}

export const defaultIndexDir = (corpusPath: string): string => `${resolve(corpusPath)}.index`;

/** Files of the minisearch index (format 1) that this one replaces in the same directory. */
const OLD_FILES = ["index.json", "docs.json", "manifest.json"];

/** Search results as the search tool shows them: each document with its most query-relevant snippet. */
function hitsFor(query: string, docs: readonly CorpusDoc[]): SearchHit[] {
  const queryTermSet = new Set(termsOf(query));
  return docs.map((doc) => ({
    title: doc.title,
    ...(doc.url ? { url: doc.url } : {}),
    snippet: bestSnippet(doc.text, queryTermSet),
  }));
}

/**
 * The same ranking and snippets as a `CorpusIndex` of the same documents in the same mode, over
 * documents already in memory and never persisted: for text generated on the fly, such as
 * pretraining drills that show search results. Its postings are built by the same analysis and
 * ranked by the same Ranker as an index on disk.
 */
export class MemoryIndex {
  private readonly postings = new Map<string, Postings[][]>();
  private readonly ranker: Ranker;
  private readonly noPostings: TermPostings;

  constructor(
    private readonly docs: readonly CorpusDoc[],
    mode: Bm25Mode = DEFAULT_BM25,
  ) {
    const nFields = MODE_FIELDS[mode].length;
    const terms = new TermCache();
    const builders = Array.from({ length: nFields }, () => new PostingsBuilder());
    const lengths = Array.from({ length: nFields }, () => new Uint32Array(docs.length));
    const stats = emptyFieldStats(mode);
    docs.forEach((d, i) => {
      const fields = analyzeDocument(mode, d.title, d.text, terms);
      fields.forEach(({ counts, length }, f) => {
        builders[f].add(i, counts);
        lengths[f][i] = length;
      });
      addFieldLengths(stats, i, fields);
    });
    builders.forEach((builder, f) => {
      for (const [term, list] of builder.entries()) {
        let perField = this.postings.get(term);
        if (!perField) {
          perField = Array.from({ length: nFields }, () => []);
          this.postings.set(term, perField);
        }
        perField[f].push(list);
      }
    });
    this.noPostings = Array.from({ length: nFields }, () => []);
    this.ranker = new Ranker(mode, lengths, docs.length, stats);
  }

  /** Positions in `docs` of the `k` best documents for `query`, best first. */
  rank(query: string, k: number): number[] {
    return this.ranker.topK(query, k, (t) => this.postings.get(t) ?? this.noPostings).map((r) => r.doc);
  }

  search(query: string, k: number): SearchHit[] {
    return hitsFor(
      query,
      this.rank(query, k).map((i) => this.docs[i]),
    );
  }
}

/**
 * A BM25 index over a corpus file, persisted next to it as one SQLite file that holds the postings
 * and the documents. Opening reads only the manifest and the document lengths (4 bytes a document
 * and field); a query reads the posting lists of its terms and the rows of its hits.
 */
export class CorpusIndex {
  private readonly ranker: Ranker;
  private readonly nFields: number;

  private constructor(
    readonly corpusPath: string,
    readonly manifest: IndexManifest,
    private readonly store: IndexStore,
  ) {
    this.nFields = MODE_FIELDS[manifest.bm25].length;
    this.ranker = new Ranker(
      manifest.bm25,
      store.lengths(manifest.docCount, this.nFields),
      manifest.docCount,
      manifest.fields,
    );
  }

  get size(): number {
    return this.manifest.docCount;
  }

  /**
   * Opens the persisted index of `corpusPath`, bringing it up to date first: reused as it is when the
   * corpus is unchanged; continued when the build was interrupted or rows were appended to the
   * corpus; rebuilt otherwise (another corpus, another index format, a damaged file, `rebuild`).
   */
  static async open(
    corpusPath: string,
    opts: OpenIndexOptions = {},
  ): Promise<{ index: CorpusIndex; reused: boolean; continued: boolean; added: number }> {
    const corpus = resolve(corpusPath);
    const dir = resolve(opts.indexDir ?? defaultIndexDir(corpus));
    const file = join(dir, INDEX_FILE);
    const source = await sourceState(corpus);
    let store: IndexStore | undefined;
    let from: IndexManifest | null = null;
    if (!opts.rebuild && existsSync(file)) {
      try {
        store = IndexStore.open(file);
        from = store.manifest();
      } catch {
        // Not an index (a damaged or foreign file): rebuilt below rather than trusted.
        store?.close();
        store = undefined;
      }
    }
    const sameMode = opts.bm25 === undefined || from?.bm25 === opts.bm25;
    const fresh =
      sameMode &&
      from?.complete === true &&
      from.format === INDEX_FORMAT &&
      from.corpus.path === corpus &&
      from.corpus.size === source.size &&
      from.corpus.mtimeMs === source.mtimeMs;
    if (store && from && fresh)
      return { index: new CorpusIndex(corpus, from, store), reused: true, continued: false, added: 0 };
    const continued = sameMode && store !== undefined && from !== null && (await canContinue(from, source));
    if (!continued) {
      store?.close();
      await mkdir(dir, { recursive: true });
      await Promise.all(
        [INDEX_FILE, `${INDEX_FILE}-journal`, ...OLD_FILES].map((f) => rm(join(dir, f), { force: true })),
      );
      store = IndexStore.open(file);
      from = emptyManifest(source, opts.bm25 ?? DEFAULT_BM25);
    }
    try {
      const manifest = await indexRows(store!, from!, source, opts);
      const added = manifest.docCount - from!.docCount;
      return { index: new CorpusIndex(corpus, manifest, store!), reused: false, continued, added };
    } catch (err) {
      store!.close();
      throw err;
    }
  }

  /** Opens a finished index directory as it is, without its corpus (for `coa search <index>`). */
  static openDir(dir: string): CorpusIndex {
    const file = join(resolve(dir), INDEX_FILE);
    if (!existsSync(file)) throw new CorpusError(`${dir}: no index here (${INDEX_FILE} is missing)`);
    const store = IndexStore.open(file);
    const manifest = store.manifest();
    if (!manifest?.complete) {
      store.close();
      throw new CorpusError(
        `${dir}: the index is incomplete (its build stopped at ${manifest?.docCount ?? 0} documents); run \`coa index\` on its corpus to finish it`,
      );
    }
    return new CorpusIndex(manifest.corpus.path, manifest, store);
  }

  close(): void {
    this.store.close();
  }

  private ranked(query: string, k: number): ScoredDoc[] {
    return this.ranker.topK(query, k, (t) => this.store.postings(t, this.nFields));
  }

  /** Corpus positions of the `k` best documents for `query` by BM25, best first. */
  rank(query: string, k: number): number[] {
    return this.ranked(query, k).map((r) => r.doc);
  }

  /** The `k` best documents for `query` by BM25, each with its most query-relevant snippet. */
  async search(query: string, k: number): Promise<SearchHit[]> {
    return hitsFor(
      query,
      this.rank(query, k).map((i) => this.store.doc(i)),
    );
  }

  /**
   * The `k` best documents for `query` by BM25 with their scores, best first: what a retrieval server
   * (Search-R1's `/retrieve`) returns, whole documents rather than snippets.
   */
  async retrieve(query: string, k: number): Promise<Array<{ doc: CorpusDoc; score: number }>> {
    return this.ranked(query, k).map((r) => ({ doc: this.store.doc(r.doc), score: r.score }));
  }

  /** The corpus document whose `url` field is `url` (compared after normalisation), if any. */
  async documentByUrl(url: string): Promise<CorpusDoc | undefined> {
    const pos = this.store.positionOfUrl(normalizeUrl(url));
    return pos === undefined ? undefined : this.store.doc(pos);
  }
}
