import { describe, expect, it } from "vitest";
import { defaultIndexDir } from "../../tools/index.js";
import { writeCorpusFile } from "../../tools/test-corpus.js";
import { searchCommand } from "./search.js";

describe("coa search", () => {
  it("prints ranked hits from a corpus (indexing it first) or from its index directory", async () => {
    const corpus = await writeCorpusFile();
    const fromCorpus: string[] = [];
    await searchCommand(corpus, "glass bridge", { k: 2 }, (l) => fromCorpus.push(l));
    expect(fromCorpus[0]).toMatch(/^2 hits of 5 docs \(BM25 coa\) in \d+\.\d ms$/);
    expect(fromCorpus[1]).toMatch(
      /^1\. \[\d+\.\d{4}\] w4 {2}Glass bridge of Veltmoor \(https:\/\/world\.local\/wiki\/Glass_bridge\)$/,
    );
    expect(fromCorpus[2]).toBe(
      "   The glass bridge crosses the river Sable at Veltmoor. It opened in 1899 and is 120 metres long.",
    );
    const fromIndex: string[] = [];
    await searchCommand(defaultIndexDir(corpus), "glass bridge", { k: "2" as unknown as number }, (l) =>
      fromIndex.push(l),
    );
    expect(fromIndex.slice(1)).toEqual(fromCorpus.slice(1));
    await expect(searchCommand(corpus, "x", { k: 0 }, () => {})).rejects.toThrow();
  });
});
