import { describe, expect, it } from "vitest";
import {
  addFieldLengths,
  analyzeDocument,
  decodePostings,
  emptyFieldStats,
  encodePostings,
  MAX_QUERY_TERMS,
  PostingsBuilder,
  queryTermList,
  TermCache,
} from "./bm25.js";
import { Ranker } from "./ranking.js";
import { processTerm, tokenize } from "./terms.js";

/**
 * Pyserini's BM25 written the plain way, document by document (Anserini's bag-of-words query over
 * one contents field, Lucene's BM25Similarity with k1 0.9, b 0.4), to check the engine against.
 */
const analyze = (s: string) =>
  tokenize(s)
    .map(processTerm)
    .filter((t): t is string => t !== null);

function referenceTop10(analyzed: string[][], query: string): Array<{ doc: number; score: number }> {
  const avgdl = analyzed.reduce((n, d) => n + d.length, 0) / analyzed.length;
  const counts = new Map<string, number>();
  for (const t of analyze(query)) counts.set(t, (counts.get(t) ?? 0) + 1);
  const dfs = new Map([...counts.keys()].map((t) => [t, analyzed.filter((d) => d.includes(t)).length]));
  const scored = analyzed.map((terms, doc) => {
    let score = 0;
    for (const [term, weight] of counts) {
      const df = dfs.get(term)!;
      const tf = terms.filter((t) => t === term).length;
      if (tf === 0) continue;
      const idf = Math.log(1 + (analyzed.length - df + 0.5) / (df + 0.5));
      score += (weight * idf * tf) / (tf + 0.9 * (1 - 0.4 + (0.4 * terms.length) / avgdl));
    }
    return { doc, score };
  });
  return scored
    .filter((s) => s.score > 0)
    .sort((a, b) => b.score - a.score || a.doc - b.doc)
    .slice(0, 10);
}

/** A seeded corpus with Zipf-like words, long and short documents, and repeated terms. */
function corpus(n: number): string[] {
  let seed = 42;
  const rand = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  const words = Array.from({ length: 300 }, (_, i) => `w${i.toString(36)}`);
  return Array.from({ length: n }, () => {
    const len = 3 + Math.floor(rand() * 60);
    return Array.from(
      { length: len },
      () => words[Math.floor(Math.exp(rand() * Math.log(words.length))) - 1],
    ).join(" ");
  });
}

describe("the pyserini BM25 mode", () => {
  it("gives Pyserini's top 10 with its scores (k1 0.9, b 0.4, Lucene idf) over several postings lists", () => {
    const docs = corpus(600);
    const analyzed = docs.map(analyze);
    const terms = new TermCache();
    // Two segments, as an index built in two steps has.
    const segments = [new PostingsBuilder(), new PostingsBuilder()];
    const lengths = new Uint32Array(docs.length);
    const stats = emptyFieldStats("pyserini");
    docs.forEach((text, i) => {
      const fields = analyzeDocument("pyserini", "", text, terms);
      segments[i < 250 ? 0 : 1].add(i, fields[0].counts);
      lengths[i] = fields[0].length;
      addFieldLengths(stats, i, fields);
    });
    const lists = segments.map((s) => new Map(s.entries()));
    const ranker = new Ranker("pyserini", [lengths], docs.length, stats);
    // Through their bytes, as the on-disk index reads them.
    const postings = (term: string) => [
      lists.flatMap((m) => (m.has(term) ? [decodePostings(encodePostings(m.get(term)!))] : [])),
    ];
    const queries = [
      "w0 w1",
      "w5 w5 w9",
      "wa wb wc wd",
      "w2s",
      "w1 w2 w3 w4 w5 w6 w7",
      "the of",
      "w0 nothing",
    ];
    // Random queries mixing rare and common words: the pruned paths (lookups by binary search or by
    // one pass) must give the exhaustive ranking.
    const words = [...new Set(analyzed.flat())];
    let seed = 7;
    const pick = () => {
      seed = (seed * 48271) % 2147483647;
      return words[seed % words.length];
    };
    for (let i = 0; i < 150; i++) queries.push(Array.from({ length: 1 + (i % 5) }, pick).join(" "));
    for (const [query, k] of queries.flatMap((q) => [[q, 10] as const, [q, 2] as const])) {
      const got = ranker.topK(query, k, postings);
      const want = referenceTop10(analyzed, query).slice(0, k);
      expect(
        got.map((g) => g.doc),
        query,
      ).toEqual(want.map((w) => w.doc));
      for (const [i, g] of got.entries()) expect(g.score).toBeCloseTo(want[i].score, 9);
    }
  });

  it("indexes title and text as one field, its length counted in terms", () => {
    const [contents] = analyzeDocument(
      "pyserini",
      "The Bridge",
      "A bridge of glass, the bridge.",
      new TermCache(),
    );
    expect([...contents.counts]).toEqual([
      ["bridge", 3],
      ["glass", 1],
    ]);
    expect(contents.length).toBe(4);
  });
});

describe("query terms", () => {
  it("keeps query order and repeats, and ignores distinct terms past the limit", () => {
    const terms = new TermCache();
    expect(queryTermList("Bridge bridge, the BRIDGE of Arden", terms)).toEqual([
      "bridge",
      "bridge",
      "bridge",
      "arden",
    ]);
    const many = Array.from({ length: 300 }, (_, i) => `t${i}`).join(" ");
    expect(new Set(queryTermList(`${many} t0`, terms)).size).toBe(MAX_QUERY_TERMS);
    expect(queryTermList(`${many} t0`, terms).at(-1)).toBe("t0");
  });
});
