// What both BM25 modes share: how documents and queries become terms per field, posting lists and
// their bytes, and the top-k selection. The scorers are in bm25-coa.ts and bm25-pyserini.ts; ranking.ts
// picks one by the index's mode, so every index (on disk or in memory) ranks through the same code.

import { z } from "zod";
import { processTerm, tokenize } from "./terms.js";

/**
 * How an index scores, recorded in its manifest:
 * - `coa`: minisearch's BM25+ over two fields as coa's search tool always ranked (title boosted 2,
 *   k 1.2, b 0.75, d 0.5): the ranking the shipped base model was pretrained to read.
 * - `pyserini`: Anserini/Pyserini's BM25 (k1 0.9, b 0.4) over one field, title and text together,
 *   as Search-R1 corpora are searched.
 */
export const Bm25Mode = z.enum(["coa", "pyserini"]);
export type Bm25Mode = z.infer<typeof Bm25Mode>;

/** The fields each mode indexes, in the order their postings and lengths are stored. */
export const MODE_FIELDS: Readonly<Record<Bm25Mode, readonly string[]>> = {
  coa: ["title", "text"],
  pyserini: ["contents"],
};

/**
 * A query's distinct terms beyond this many are ignored, and so are its term occurrences beyond this
 * many (a repeated term counts once per occurrence): Lucene refuses more than 1024 clauses, and a
 * 100 KB query must not turn into thousands of posting-list reads or passes.
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

/** One field of one document: its term frequencies and its length as the mode measures length. */
export interface FieldTerms {
  counts: Map<string, number>;
  length: number;
}

function countTerms(words: readonly string[], terms: TermCache, counts: Map<string, number>): number {
  let n = 0;
  for (const word of words) {
    const term = terms.term(word);
    if (term === null) continue;
    counts.set(term, (counts.get(term) ?? 0) + 1);
    n += 1;
  }
  return n;
}

/**
 * A document's fields as `mode` indexes them. In `coa` mode a field's length is its number of
 * distinct words before normalisation (stop words and case variants included), as minisearch counts
 * it; in `pyserini` mode it is the number of terms of title and text together, as Lucene counts it.
 */
export function analyzeDocument(mode: Bm25Mode, title: string, text: string, terms: TermCache): FieldTerms[] {
  if (mode === "pyserini") {
    const counts = new Map<string, number>();
    const length = countTerms(tokenize(title), terms, counts) + countTerms(tokenize(text), terms, counts);
    return [{ counts, length }];
  }
  return [title, text].map((value) => {
    const words = tokenize(value);
    const counts = new Map<string, number>();
    countTerms(words, terms, counts);
    return { counts, length: new Set(words).size };
  });
}

/** A query's terms in query order, repeats kept, at most MAX_QUERY_TERMS distinct ones. */
export function queryTermList(query: string, terms: TermCache): string[] {
  const out: string[] = [];
  const distinct = new Set<string>();
  for (const word of tokenize(query)) {
    const term = terms.term(word);
    if (term === null) continue;
    if (!distinct.has(term)) {
      if (distinct.size >= MAX_QUERY_TERMS) continue;
      distinct.add(term);
    }
    out.push(term);
  }
  return out;
}

/** One term's postings in one field: document positions (ascending) and the term's frequency in each. */
export interface Postings {
  docs: Uint32Array;
  /** Saturated at 65535: past that a frequency changes a BM25 score by less than a part in 10^5. */
  tfs: Uint16Array;
}

/** A term's postings per field (in MODE_FIELDS order), each field's as one list per index segment. */
export type TermPostings = ReadonlyArray<readonly Postings[]>;

/** Collects one field's postings in memory, document by document, until they are written out. */
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

/** Per field, what BM25 needs besides the postings. */
export interface FieldStats {
  /** Sum of the field's lengths over the documents. */
  totalLength: number;
  /**
   * The mean length as minisearch keeps it, updated document by document (`(avg * n + length) /
   * (n + 1)`): the `coa` mode divides by this very number, so that scores match to the last bit.
   */
  avgLength: number;
}

/** Adds one document's field lengths to the running statistics, as minisearch does. */
export function addFieldLengths(
  stats: FieldStats[],
  docsBefore: number,
  fields: readonly FieldTerms[],
): void {
  fields.forEach(({ length }, f) => {
    const s = stats[f];
    s.totalLength += length;
    s.avgLength = (s.avgLength * docsBefore + length) / (docsBefore + 1);
  });
}

export const emptyFieldStats = (mode: Bm25Mode): FieldStats[] =>
  MODE_FIELDS[mode].map(() => ({ totalLength: 0, avgLength: 0 }));

/** The idf of both modes (Lucene's, and minisearch's): never negative, unlike Robertson–Spärck Jones. */
export const bm25Idf = (docCount: number, df: number): number =>
  Math.log(1 + (docCount - df + 0.5) / (df + 0.5));

export interface ScoredDoc {
  doc: number;
  score: number;
}

/**
 * The `k` best of the first `n` touched documents, best first, through a size-k min-heap (worst at the
 * root). Ties go to the smaller `doc` or, with `byArrival`, to the document touched first.
 */
export function selectBest(
  scores: Float64Array,
  touched: Uint32Array,
  n: number,
  k: number,
  byArrival = false,
): ScoredDoc[] {
  type Entry = { doc: number; score: number; key: number };
  const better = (a: Entry, b: Entry): boolean => a.score > b.score || (a.score === b.score && a.key < b.key);
  const heap: Entry[] = [];
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
    const key = byArrival ? j : doc;
    // Most documents lose to the current k-th best: reject them before allocating anything.
    if (heap.length === k && (score < heap[0].score || (score === heap[0].score && key > heap[0].key))) {
      continue;
    }
    const candidate = { doc, score, key };
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
  return heap.sort((a, b) => (better(a, b) ? -1 : 1)).map(({ doc, score }) => ({ doc, score }));
}

/** Scratch arrays one per scorer, grown to the corpus size and reset after each query. */
export class Scratch {
  scores = new Float64Array(0);
  touched = new Uint32Array(0);

  grow(docCount: number): void {
    if (this.scores.length < docCount) {
      this.scores = new Float64Array(docCount);
      this.touched = new Uint32Array(docCount);
    }
  }
}
