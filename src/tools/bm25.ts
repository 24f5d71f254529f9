// BM25 as Anserini/Pyserini compute it (Lucene's BM25Similarity, k1 0.9, b 0.4, one "contents"
// field made of title and text), shared by the on-disk index and the in-memory one so that both rank
// identically by construction.

import { processTerm, tokenize } from "./terms.js";

export const BM25_K1 = 0.9;
export const BM25_B = 0.4;

/**
 * A query's terms beyond this many distinct ones are ignored: Lucene refuses more than 1024 clauses,
 * and a 100 KB query must not turn into thousands of posting-list reads.
 */
export const MAX_QUERY_TERMS = 256;

/**
 * Word → term, memoised: normalising a word (lowercase, NFD, accent stripping) costs far more than a
 * map lookup, and a corpus repeats its words. Cleared when full, so memory stays bounded on any corpus.
 */
export class TermCache {
  private readonly cache = new Map<string, string | null>();
  constructor(private readonly limit = 1 << 20) {}

  term(word: string): string | null {
    let term = this.cache.get(word);
    if (term === undefined) {
      term = processTerm(word);
      if (this.cache.size >= this.limit) this.cache.clear();
      this.cache.set(word, term);
    }
    return term;
  }
}

/** Term frequencies of one document (title and text as one field) and its length in terms. */
export function documentTerms(
  title: string,
  text: string,
  terms: TermCache,
): { counts: Map<string, number>; length: number } {
  const counts = new Map<string, number>();
  let length = 0;
  for (const part of [title, text]) {
    for (const word of tokenize(part)) {
      const term = terms.term(word);
      if (term === null) continue;
      counts.set(term, (counts.get(term) ?? 0) + 1);
      length += 1;
    }
  }
  return { counts, length };
}

/** A query's distinct terms with how often each occurs (Anserini weights a repeated term by its count). */
export function queryTerms(query: string, terms: TermCache): Map<string, number> {
  const weights = new Map<string, number>();
  for (const word of tokenize(query)) {
    const term = terms.term(word);
    if (term === null) continue;
    if (!weights.has(term) && weights.size >= MAX_QUERY_TERMS) continue;
    weights.set(term, (weights.get(term) ?? 0) + 1);
  }
  return weights;
}

/** One term's postings: document positions and the term's frequency in each (saturated at 65535). */
export interface Postings {
  docs: Uint32Array;
  tfs: Uint16Array;
}

/** Collects postings in memory, document by document, until they are written out as one segment. */
export class PostingsBuilder {
  private readonly lists = new Map<string, { docs: number[]; tfs: number[] }>();
  /** Postings held: what a segment's memory grows with. */
  count = 0;

  add(doc: number, counts: Map<string, number>): void {
    for (const [term, tf] of counts) {
      let list = this.lists.get(term);
      if (!list) {
        list = { docs: [], tfs: [] };
        this.lists.set(term, list);
      }
      list.docs.push(doc);
      list.tfs.push(Math.min(tf, 0xffff));
    }
    this.count += counts.size;
  }

  *entries(): Generator<[string, Postings]> {
    for (const [term, list] of this.lists) {
      yield [term, { docs: Uint32Array.from(list.docs), tfs: Uint16Array.from(list.tfs) }];
    }
  }
}

/** Postings as bytes: the document positions (uint32 LE), then the frequencies (uint16 LE). */
export function encodePostings(p: Postings): Buffer {
  const out = Buffer.alloc(p.docs.length * 6);
  out.set(new Uint8Array(p.docs.buffer, p.docs.byteOffset, p.docs.byteLength), 0);
  out.set(new Uint8Array(p.tfs.buffer, p.tfs.byteOffset, p.tfs.byteLength), p.docs.length * 4);
  return out;
}

export function decodePostings(bytes: Uint8Array): Postings {
  const n = bytes.length / 6;
  // Copied rather than viewed: a typed array needs an aligned offset, which a blob does not promise.
  const docs = new Uint32Array(n);
  new Uint8Array(docs.buffer).set(bytes.subarray(0, n * 4));
  const tfs = new Uint16Array(n);
  new Uint8Array(tfs.buffer).set(bytes.subarray(n * 4));
  return { docs, tfs };
}

/** Collection statistics that BM25 needs besides the postings. */
export interface CollectionStats {
  docCount: number;
  /** Sum of all document lengths, in terms. */
  totalLength: number;
}

export interface ScoredDoc {
  doc: number;
  score: number;
}

/** Lucene's idf: never negative, unlike the classic Robertson–Spärck Jones form. */
export const idf = (docCount: number, df: number): number => Math.log(1 + (docCount - df + 0.5) / (df + 0.5));

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
export class Bm25Scorer {
  private scores = new Float64Array(0);
  private touched = new Uint32Array(0);

  /** `lengths[i]`: length in terms of the document at position `i`. */
  constructor(private readonly lengths: Uint32Array) {}

  topK(
    terms: ReadonlyArray<{ weight: number; lists: readonly Postings[] }>,
    stats: CollectionStats,
    k: number,
  ): ScoredDoc[] {
    if (k <= 0 || stats.docCount === 0) return [];
    if (this.scores.length < stats.docCount) {
      this.scores = new Float64Array(stats.docCount);
      this.touched = new Uint32Array(stats.docCount);
    }
    const { scores, touched, lengths } = this;
    const avgLength = stats.totalLength / stats.docCount || 1;
    const weighted = terms
      .map(({ weight, lists }) => {
        const df = lists.reduce((n, l) => n + l.docs.length, 0);
        return { lists, termWeight: df === 0 ? 0 : weight * idf(stats.docCount, df) };
      })
      .filter((t) => t.termWeight > 0)
      // The same order whatever the query's word order, so that scores are summed identically.
      .sort((a, b) => b.termWeight - a.termWeight);
    let left = weighted.reduce((n, t) => n + t.termWeight, 0);
    let nTouched = 0;
    let probing = false;
    const add = (doc: number, tf: number, termWeight: number) => {
      const norm = BM25_K1 * (1 - BM25_B + (BM25_B * lengths[doc]) / avgLength);
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

const better = (a: ScoredDoc, b: ScoredDoc): boolean =>
  a.score > b.score || (a.score === b.score && a.doc < b.doc);

/** The `k` best of the touched documents, through a size-k min-heap (worst at the root). */
function selectBest(scores: Float64Array, touched: Uint32Array, n: number, k: number): ScoredDoc[] {
  const heap: ScoredDoc[] = [];
  const siftDown = (i: number) => {
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let worst = i;
      if (l < heap.length && better(heap[worst], heap[l])) worst = l;
      if (r < heap.length && better(heap[worst], heap[r])) worst = r;
      if (worst === i) return;
      [heap[i], heap[worst]] = [heap[worst], heap[i]];
      i = worst;
    }
  };
  for (let j = 0; j < n; j++) {
    const doc = touched[j];
    const score = scores[doc];
    // Most documents lose to the current k-th best: reject them before allocating anything.
    if (heap.length === k && (score < heap[0].score || (score === heap[0].score && doc > heap[0].doc))) {
      continue;
    }
    const candidate = { doc, score };
    if (heap.length < k) {
      heap.push(candidate);
      for (let i = heap.length - 1; i > 0; ) {
        const parent = (i - 1) >> 1;
        if (!better(heap[parent], heap[i])) break;
        [heap[i], heap[parent]] = [heap[parent], heap[i]];
        i = parent;
      }
    } else {
      heap[0] = candidate;
      siftDown(0);
    }
  }
  return heap.sort((a, b) => (better(a, b) ? -1 : 1));
}
