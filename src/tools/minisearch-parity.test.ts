// The shipped base model (models/base) was pretrained on search results ranked by minisearch with
// the options below. The `coa` BM25 mode must give the same results, ids, order, ties and snippets,
// or the student reads results its base never learned to read (the reverted fb640fb cost 5.5 points).
// minisearch is kept only as a dev dependency, for this reference.

import MiniSearch from "minisearch";
import { describe, expect, it } from "vitest";
import { generateWorld } from "../tasks/world/generate.js";
import { Plan, queryFor } from "../tasks/world/index.js";
import { SEARCH_DRILL_RESULTS } from "../train/pretrain/drills.js";
import type { CorpusDoc } from "./corpus.js";
import { CorpusIndex, MemoryIndex } from "./corpus-index.js";
import { formatHits, type SearchHit } from "./search-results.js";
import { bestSnippet } from "./snippet.js";
import { processTerm, termsOf, tokenize } from "./terms.js";
import { writeCorpusFile } from "./test-corpus.js";

/** The search tool's index before the on-disk store: minisearch 7.2 with these options. */
function minisearchReference(docs: readonly CorpusDoc[]) {
  const engine = new MiniSearch<{ i: number; title: string; text: string }>({
    idField: "i",
    fields: ["title", "text"],
    storeFields: [],
    tokenize,
    processTerm: (term) => processTerm(term),
    searchOptions: {
      boost: { title: 2 },
      bm25: { k: 1.2, b: 0.75, d: 0.5 },
      prefix: false,
      fuzzy: false,
      combineWith: "OR",
    },
  });
  engine.addAll(docs.map((d, i) => ({ i, title: d.title, text: d.text })));
  const ranked = (query: string, k: number) => engine.search(query).slice(0, k);
  const rank = (query: string, k: number): number[] => ranked(query, k).map((r) => r.id as number);
  // The old hitsFor: each document with its most query-relevant snippet.
  const hitsOf = (query: string, ids: readonly number[]): SearchHit[] => {
    const queryTerms = new Set(termsOf(query));
    return ids.map((i) => ({
      title: docs[i].title,
      ...(docs[i].url ? { url: docs[i].url } : {}),
      snippet: bestSnippet(docs[i].text, queryTerms),
    }));
  };
  const search = (query: string, k: number): SearchHit[] => hitsOf(query, rank(query, k));
  return { ranked, rank, hitsOf, search };
}

/**
 * Every query an agent or a drill makes of a world: each question as asked, and each lookup of its
 * plan as the expert and the search drills phrase it (the subject alone, and `queryFor`). A lookup
 * whose subject is an earlier lookup's value is asked of every supporting document's title.
 */
function worldQueries(world: ReturnType<typeof generateWorld>): string[] {
  const titles = new Map(world.corpus.map((d) => [d.id, d.title]));
  const queries = new Set<string>();
  for (const tasks of Object.values(world.splits)) {
    for (const task of tasks) {
      queries.add(task.question);
      const support = ((task.meta.supportingDocs as string[] | undefined) ?? []).flatMap(
        (id) => titles.get(id) ?? [],
      );
      for (const step of Plan.safeParse(task.meta.plan).data?.steps ?? []) {
        if (step.op !== "lookup") continue;
        for (const subject of typeof step.subject === "string" ? [step.subject] : support) {
          queries.add(subject);
          queries.add(queryFor(subject, [step.attr]));
        }
      }
    }
  }
  return [...queries];
}

describe("the coa BM25 mode against minisearch", () => {
  it.each([
    [1, 0],
    [201, 4000],
  ])(
    "world %i (small): the same ranked ids, ties included, and the same formatted hits, in memory and on disk",
    async (seed, segmentPostings) => {
      const world = generateWorld(seed, "small");
      const docs = world.corpus;
      const queries = worldQueries(world);
      expect(queries.length).toBeGreaterThan(5000);
      const reference = minisearchReference(docs);
      const memory = new MemoryIndex(docs);
      // World 201 on disk in many small segments, as a large corpus is built.
      const { index: disk } = await CorpusIndex.open(await writeCorpusFile(docs), {
        ...(segmentPostings ? { segmentPostings } : {}),
      });
      expect(disk.manifest.bm25).toBe("coa");
      if (segmentPostings) expect(disk.manifest.segments).toBeGreaterThan(3);
      let tied = 0;
      for (const query of queries) {
        const results = reference.ranked(query, 10);
        const want = results.map((r) => r.id as number);
        expect(memory.rank(query, 10), query).toEqual(want);
        expect(disk.rank(query, 10), query).toEqual(want);
        // The search drills' and the demo's number of results.
        const hits = formatHits(query, reference.hitsOf(query, want.slice(0, SEARCH_DRILL_RESULTS)));
        expect(formatHits(query, memory.search(query, SEARCH_DRILL_RESULTS)), query).toBe(hits);
        expect(formatHits(query, await disk.search(query, SEARCH_DRILL_RESULTS)), query).toBe(hits);
        if (new Set(results.map((r) => r.score)).size < results.length) tied += 1;
      }
      // Ties decide many of these rankings: the test is about their order too.
      expect(tied).toBeGreaterThan(queries.length / 4);
      disk.close();
    },
    60_000,
  );

  it("agrees on the cases minisearch handles its own way: case and stop words in field lengths, repeated and missing query terms, empty titles", () => {
    const docs: CorpusDoc[] = [
      { id: "a", title: "River Sable", text: "The Sable, the SABLE and the sable: river river river." },
      { id: "b", title: "", text: "Sable river town. Sable Sable." },
      { id: "c", title: "Sable", text: "A town by a river." },
      { id: "d", title: "Town", text: "The town of the river people, the town of Sable's bridge." },
      { id: "e", title: "Bridge of Sable", text: "" },
      { id: "f", title: "Ärden", text: "Arden's town, by the Sable." },
      // Equal scores: minisearch lists the document matched by the query's first term first.
      { id: "g", title: "", text: "beta gamma" },
      { id: "h", title: "", text: "alpha gamma" },
    ];
    const reference = minisearchReference(docs);
    const memory = new MemoryIndex(docs);
    for (const query of [
      "sable",
      "Sable river",
      "river Sable",
      "sable sable river",
      "river sable river town",
      "unknown sable unknown",
      "Arden",
      "the of and",
      "",
      "bridge town people",
      "alpha beta",
      "beta alpha gamma",
    ]) {
      expect(memory.rank(query, 6), query).toEqual(reference.rank(query, 6));
      expect(memory.search(query, 6), query).toEqual(reference.search(query, 6));
    }
  });
});
