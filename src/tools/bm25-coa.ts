// The `coa` ranking: minisearch 7's BM25+ as coa's search tool configured it (fields title and text,
// title boosted 2, k 1.2, b 0.75, d 0.5, terms OR-ed, no prefix or fuzzy matching), reproduced to
// the last bit and the last tie, because the shipped base model learned to read results in this order.
// What minisearch does, and so what this does:
// - a field's length is its number of distinct raw words; its mean length is updated document by
//   document (FieldStats.avgLength); a term's df is counted per field;
// - per query term (in query order, repeats included) and document, the title's score times 2 plus
//   the text's score; those add up over the terms in query order;
// - the sum is multiplied by how many distinct query terms the document matched;
// - equal scores keep the order in which documents first matched: by the query term that first
//   matched them, then title matches before text-only ones, then corpus position.

import {
  bm25Idf,
  type FieldStats,
  MAX_QUERY_TERMS,
  type ScoredDoc,
  Scratch,
  selectBest,
  type TermPostings,
} from "./bm25.js";

export const COA_BM25 = { k: 1.2, b: 0.75, d: 0.5 } as const;
/** Field boosts, in MODE_FIELDS.coa order: title, text. */
export const COA_BOOSTS = [2, 1] as const;

const { k: K, b: B, d: D } = COA_BM25;

/** Scores every document the query's terms reach, exactly as minisearch would; keeps the `k` best. */
export class CoaScorer {
  private readonly scratch = new Scratch();
  /** Per field and document: minisearch's `k * (1 - b + b * length / avgLength)`. */
  private readonly norms: Float64Array[];
  /** Title score of the current term, and which term (by generation) set it. */
  private titleScore = new Float64Array(0);
  private stamp = new Int32Array(0);
  /** Distinct query terms each touched document matched: minisearch's "quality". */
  private quality = new Uint16Array(0);
  private generation = 0;

  /** `lengths[f][i]`: the length of field `f` of the document at position `i`. */
  constructor(
    lengths: readonly Uint32Array[],
    private readonly docCount: number,
    stats: readonly FieldStats[],
  ) {
    this.norms = lengths.map((ls, f) => {
      const avg = stats[f].avgLength;
      const out = new Float64Array(ls.length);
      for (let i = 0; i < ls.length; i++) out[i] = K * (1 - B + (B * ls[i]) / avg);
      return out;
    });
  }

  private grow(): void {
    const n = this.docCount;
    this.scratch.grow(n);
    if (this.stamp.length < n) {
      this.titleScore = new Float64Array(n);
      this.stamp = new Int32Array(n);
      this.quality = new Uint16Array(n);
    }
  }

  /**
   * `terms`: the query's terms in query order, repeats kept; `postings(term)`: its lists per field.
   * Terms the index does not hold add nothing, so they are dropped before the occurrence limit.
   */
  topK(terms: readonly string[], postings: (term: string) => TermPostings, k: number): ScoredDoc[] {
    const { docCount } = this;
    if (k <= 0 || docCount === 0) return [];
    this.grow();
    const { scores, touched } = this.scratch;
    const { titleScore, stamp, quality } = this;
    const [titleNorm, textNorm] = this.norms;
    const fetched = new Map<string, { lists: TermPostings; idf: number[] }>();
    const occurrences: string[] = [];
    for (const term of terms) {
      let entry = fetched.get(term);
      if (!entry) {
        const lists = postings(term);
        const idf = lists.map((segs) =>
          bm25Idf(
            docCount,
            segs.reduce((n, l) => n + l.docs.length, 0),
          ),
        );
        entry = { lists, idf };
        fetched.set(term, entry);
      }
      if (entry.lists.some((segs) => segs.some((l) => l.docs.length > 0))) occurrences.push(term);
      if (occurrences.length >= MAX_QUERY_TERMS) break;
    }
    let nTouched = 0;
    const counted = new Set<string>();
    for (const term of occurrences) {
      const { lists, idf } = fetched.get(term)!;
      const first = !counted.has(term);
      counted.add(term);
      if (this.generation >= 0x7ffffff0) {
        stamp.fill(0);
        this.generation = 0;
      }
      const gen = ++this.generation;
      // Title matches first: they come first in minisearch's results for this term.
      const titleIdf = idf[0];
      for (const { docs, tfs } of lists[0]) {
        for (let j = 0; j < docs.length; j++) {
          const doc = docs[j];
          const tf = tfs[j];
          const raw = titleIdf * (D + (tf * (K + 1)) / (tf + titleNorm[doc]));
          titleScore[doc] = COA_BOOSTS[0] * raw;
          stamp[doc] = gen;
          if (quality[doc] === 0) touched[nTouched++] = doc;
        }
      }
      const textIdf = idf[1];
      for (const { docs, tfs } of lists[1]) {
        for (let j = 0; j < docs.length; j++) {
          const doc = docs[j];
          const tf = tfs[j];
          const raw = COA_BOOSTS[1] * (textIdf * (D + (tf * (K + 1)) / (tf + textNorm[doc])));
          if (stamp[doc] === gen) {
            scores[doc] = scores[doc] + (titleScore[doc] + raw);
            stamp[doc] = 0;
          } else {
            if (quality[doc] === 0) touched[nTouched++] = doc;
            scores[doc] = scores[doc] + raw;
          }
          if (first) quality[doc] += 1;
        }
      }
      for (const { docs } of lists[0]) {
        for (let j = 0; j < docs.length; j++) {
          const doc = docs[j];
          if (stamp[doc] !== gen) continue;
          scores[doc] = scores[doc] + titleScore[doc];
          stamp[doc] = 0;
          if (first) quality[doc] += 1;
        }
      }
    }
    for (let j = 0; j < nTouched; j++) {
      const doc = touched[j];
      scores[doc] = scores[doc] * quality[doc];
    }
    const best = selectBest(scores, touched, nTouched, k, true);
    for (let j = 0; j < nTouched; j++) {
      scores[touched[j]] = 0;
      quality[touched[j]] = 0;
    }
    return best;
  }
}
