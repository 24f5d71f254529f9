import { existsSync } from "node:fs";
import { mkdir, rm } from "node:fs/promises";
import { join, resolve } from "node:path";
import {
  Bm25Scorer,
  type CollectionStats,
  documentTerms,
  type Postings,
  PostingsBuilder,
  queryTerms,
  type ScoredDoc,
  TermCache,
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
import type { SearchHit } from "./search-results.js";
import { bestSnippet } from "./snippet.js";
import { termsOf } from "./terms.js";
import { normalizeUrl } from "./urls.js";

export type { BuildProgress, IndexManifest };
export { normalizeUrl };

export interface OpenIndexOptions extends BuildOptions {
  /** Where the index lives; default `<corpus>.index/`. */
  indexDir?: string;
  /** Rebuild even when the persisted index matches the corpus. */
  rebuild?: boolean;
}

export const defaultIndexDir = (corpusPath: string): string => `${resolve(corpusPath)}.index`;

/** Files of the minisearch index (format 1) that this one replaces in the same directory. */
const OLD_FILES = ["index.json", "docs.json", "manifest.json"];

// Queries repeat their words as corpora do; one cache serves every index in the process.
const QUERY_TERMS = new TermCache(1 << 16);

/** The `k` best documents for `query`, from whatever holds the postings. */
function rankQuery(
  query: string,
  k: number,
  postings: (term: string) => readonly Postings[],
  scorer: Bm25Scorer,
  stats: CollectionStats,
): ScoredDoc[] {
  const terms = [...queryTerms(query, QUERY_TERMS)].map(([term, weight]) => ({
    weight,
    lists: postings(term),
  }));
  return scorer.topK(terms, stats, k);
}

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
 * The same ranking and snippets as a `CorpusIndex`, over documents already in memory and never
 * persisted: for text generated on the fly, such as pretraining drills that show search results.
 * Both run one BM25 (bm25.ts) over the same postings, so they rank identically.
 */
export class MemoryIndex {
  private readonly postings = new Map<string, Postings[]>();
  private readonly scorer: Bm25Scorer;
  private readonly stats: CollectionStats;

  constructor(private readonly docs: readonly CorpusDoc[]) {
    const terms = new TermCache();
    const builder = new PostingsBuilder();
    const lengths = new Uint32Array(docs.length);
    let totalLength = 0;
    docs.forEach((d, i) => {
      const { counts, length } = documentTerms(d.title, d.text, terms);
      builder.add(i, counts);
      lengths[i] = length;
      totalLength += length;
    });
    for (const [term, list] of builder.entries()) this.postings.set(term, [list]);
    this.scorer = new Bm25Scorer(lengths);
    this.stats = { docCount: docs.length, totalLength };
  }

  search(query: string, k: number): SearchHit[] {
    const ranked = rankQuery(query, k, (t) => this.postings.get(t) ?? [], this.scorer, this.stats);
    return hitsFor(
      query,
      ranked.map((r) => this.docs[r.doc]),
    );
  }
}

/**
 * A BM25 index over a corpus file, persisted next to it as one SQLite file that holds the postings
 * and the documents. Opening reads only the manifest and the document lengths (4 bytes a document);
 * a query reads the posting lists of its terms and the rows of its hits.
 */
export class CorpusIndex {
  private readonly scorer: Bm25Scorer;
  private readonly stats: CollectionStats;

  private constructor(
    readonly corpusPath: string,
    readonly manifest: IndexManifest,
    private readonly store: IndexStore,
  ) {
    this.stats = { docCount: manifest.docCount, totalLength: manifest.totalLength };
    this.scorer = new Bm25Scorer(store.lengths(manifest.docCount));
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
    const fresh =
      from?.complete === true &&
      from.format === INDEX_FORMAT &&
      from.corpus.path === corpus &&
      from.corpus.size === source.size &&
      from.corpus.mtimeMs === source.mtimeMs;
    if (store && from && fresh)
      return { index: new CorpusIndex(corpus, from, store), reused: true, continued: false, added: 0 };
    const continued = store !== undefined && from !== null && (await canContinue(from, source));
    if (!continued) {
      store?.close();
      await mkdir(dir, { recursive: true });
      await Promise.all(
        [INDEX_FILE, `${INDEX_FILE}-journal`, ...OLD_FILES].map((f) => rm(join(dir, f), { force: true })),
      );
      store = IndexStore.open(file);
      from = emptyManifest(source);
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
    return rankQuery(query, k, (t) => this.store.postings(t), this.scorer, this.stats);
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
