// The one place a query is ranked: every index, on disk (CorpusIndex) or in memory (MemoryIndex, the
// pretraining drills), hands its postings to a Ranker of its mode, so they cannot rank differently.

import {
  type Bm25Mode,
  type FieldStats,
  type Postings,
  queryTermList,
  type ScoredDoc,
  TermCache,
  type TermPostings,
} from "./bm25.js";
import { CoaScorer } from "./bm25-coa.js";
import { PyseriniScorer } from "./bm25-pyserini.js";

// Queries repeat their words as corpora do; one cache serves every index in the process.
const QUERY_TERMS = new TermCache(1 << 16);

/** Ranks queries over one index's postings by the index's BM25 mode. */
export class Ranker {
  private readonly coa?: CoaScorer;
  private readonly pyserini?: PyseriniScorer;

  /** `lengths[f]`: every document's length in field `f`; `stats[f]`: that field's statistics. */
  constructor(
    readonly mode: Bm25Mode,
    lengths: readonly Uint32Array[],
    docCount: number,
    stats: readonly FieldStats[],
  ) {
    if (mode === "coa") this.coa = new CoaScorer(lengths, docCount, stats);
    else this.pyserini = new PyseriniScorer(lengths[0], docCount, stats[0]);
  }

  /** The `k` best documents for `query`, best first; `postings(term)` gives a term's lists per field. */
  topK(query: string, k: number, postings: (term: string) => TermPostings): ScoredDoc[] {
    const terms = queryTermList(query, QUERY_TERMS);
    if (this.coa) return this.coa.topK(terms, postings, k);
    const weights = new Map<string, number>();
    for (const t of terms) weights.set(t, (weights.get(t) ?? 0) + 1);
    const lists = [...weights].map(([term, weight]): { weight: number; lists: readonly Postings[] } => ({
      weight,
      lists: postings(term)[0] ?? [],
    }));
    return this.pyserini!.topK(lists, k);
  }
}
