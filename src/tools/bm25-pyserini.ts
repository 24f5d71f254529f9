// BM25 as Anserini/Pyserini compute it: Lucene's BM25Similarity with k1 0.9, b 0.4 over one
// "contents" field made of title and text, a repeated query term weighted by its count.

import { bm25Idf, type FieldStats, type Postings, type ScoredDoc, Scratch, selectBest } from "./bm25.js";

export const PYSERINI_K1 = 0.9;
export const PYSERINI_B = 0.4;

/** Index of `doc` in `docs` (sorted ascending), or -1. */
function find(docs: Uint32Array, doc: number): number {
  let lo = 0;
  let hi = docs.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const d = docs[mid];
    if (d === doc) return mid;
    if (d < doc) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

/**
 * Keeps the `k` best documents for a query, best first, ties broken by corpus position. Terms are
 * scored term at a time, rarest (highest weight) first, into one accumulator. Once the weights of
 * the terms left add up to less than the current k-th best score, no document those terms alone
 * could bring in can reach the top k (a term adds less than its weight: tf / (tf + norm) < 1), so
 * for them only the documents already scored are looked up (binary search in each posting list)
 * instead of walking lists that can hold most of the corpus. The result is the exhaustive ranking.
 */
export class PyseriniScorer {
  private readonly scratch = new Scratch();

  /** `lengths[i]`: length in terms of the document at position `i`. */
  constructor(
    private readonly lengths: Uint32Array,
    private readonly docCount: number,
    private readonly stats: FieldStats,
  ) {}

  /** `terms`: each distinct query term with its count in the query and its lists (one per segment). */
  topK(terms: ReadonlyArray<{ weight: number; lists: readonly Postings[] }>, k: number): ScoredDoc[] {
    const { docCount } = this;
    if (k <= 0 || docCount === 0) return [];
    this.scratch.grow(docCount);
    const { scores, touched } = this.scratch;
    const { lengths } = this;
    const avgLength = this.stats.totalLength / docCount || 1;
    const weighted = terms
      .map(({ weight, lists }) => {
        const df = lists.reduce((n, l) => n + l.docs.length, 0);
        return { lists, termWeight: df === 0 ? 0 : weight * bm25Idf(docCount, df) };
      })
      .filter((t) => t.termWeight > 0)
      // The same order whatever the query's word order, so that scores are summed identically.
      .sort((a, b) => b.termWeight - a.termWeight);
    let left = weighted.reduce((n, t) => n + t.termWeight, 0);
    let nTouched = 0;
    let probing = false;
    const add = (doc: number, tf: number, termWeight: number) => {
      const norm = PYSERINI_K1 * (1 - PYSERINI_B + (PYSERINI_B * lengths[doc]) / avgLength);
      scores[doc] += (termWeight * tf) / (tf + norm);
    };
    for (const { lists, termWeight } of weighted) {
      if (!probing && nTouched >= k) {
        const kth = selectBest(scores, touched, nTouched, k).at(-1)!.score;
        probing = left < kth;
      }
      left -= termWeight;
      if (probing) {
        for (const { docs, tfs } of lists) {
          // Binary searches while the scored documents are few next to the list, else one pass.
          if (nTouched * Math.log2(docs.length + 1) < docs.length) {
            for (let j = 0; j < nTouched; j++) {
              const doc = touched[j];
              if (docs.length === 0 || doc < docs[0] || doc > docs[docs.length - 1]) continue;
              const at = find(docs, doc);
              if (at >= 0) add(doc, tfs[at], termWeight);
            }
          } else {
            for (let j = 0; j < docs.length; j++) if (scores[docs[j]] !== 0) add(docs[j], tfs[j], termWeight);
          }
        }
        continue;
      }
      for (const { docs, tfs } of lists) {
        for (let j = 0; j < docs.length; j++) {
          const doc = docs[j];
          if (scores[doc] === 0) touched[nTouched++] = doc;
          add(doc, tfs[j], termWeight);
        }
      }
    }
    const best = selectBest(scores, touched, nTouched, k);
    for (let j = 0; j < nTouched; j++) scores[touched[j]] = 0;
    return best;
  }
}
