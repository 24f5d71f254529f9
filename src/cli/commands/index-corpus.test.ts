import { appendFile, mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { writeCorpusFile } from "../../tools/test-corpus.js";
import { indexCorpus } from "./index-corpus.js";

describe("coa index", () => {
  it("builds the index once, reuses it while the corpus is unchanged, and adds appended rows", async () => {
    const corpus = await writeCorpusFile();
    const out = join(await mkdtemp(join(tmpdir(), "coa-index-")), "idx");
    const lines: string[] = [];
    await indexCorpus(corpus, { out }, (l) => lines.push(l));
    expect(lines.at(-1)).toMatch(new RegExp(`^built index ${out}: 5 docs, BM25 coa, in \\d+\\.\\d\\d s$`));
    expect(lines.some((l) => /^indexing: 100% \(5 docs, \d+ docs\/s\)$/.test(l))).toBe(true);
    await indexCorpus(corpus, { out }, (l) => lines.push(l));
    expect(lines.at(-1)).toMatch(
      new RegExp(`^reused index ${out}: 5 docs, BM25 coa \\(corpus unchanged since .*\\), loaded in`),
    );
    await appendFile(corpus, '{"id":"w6","title":"Six","text":"six"}\n');
    await indexCorpus(corpus, { out }, (l) => lines.push(l));
    expect(lines.at(-1)).toMatch(new RegExp(`^updated index ${out}: 6 docs \\(1 added\\), BM25 coa, in`));
    await indexCorpus(corpus, { out, rebuild: true }, (l) => lines.push(l));
    expect(lines.at(-1)).toMatch(/^built index/);
  });

  it("builds a Pyserini-scored index with --bm25 pyserini and refuses an unknown mode", async () => {
    const corpus = await writeCorpusFile();
    const lines: string[] = [];
    const index = await indexCorpus(corpus, { bm25: "pyserini" }, (l) => lines.push(l));
    expect(index.manifest.bm25).toBe("pyserini");
    expect(lines.at(-1)).toMatch(/^built index .*: 5 docs, BM25 pyserini, in/);
    // Without the flag the index keeps its mode.
    expect((await indexCorpus(corpus, {}, () => {})).manifest.bm25).toBe("pyserini");
    await expect(indexCorpus(corpus, { bm25: "lucene" as "coa" }, () => {})).rejects.toThrow(/^--bm25: /);
  });

  it("leaves bad rows out and lists them by line, or stops at the first with --strict", async () => {
    const corpus = await writeCorpusFile();
    await appendFile(corpus, '{"id":"w1","title":"again","text":"dup"}\n{oops\n');
    const lines: string[] = [];
    await indexCorpus(corpus, {}, (l) => lines.push(l));
    expect(lines.slice(-3)).toEqual([
      "2 bad rows left out:",
      `  ${corpus}:6: field "id": duplicate id "w1" (first on line 1)`,
      expect.stringMatching(new RegExp(`^  ${corpus}:7: invalid JSON`)),
    ]);
    await expect(indexCorpus(corpus, { strict: true, rebuild: true }, () => {})).rejects.toThrow(
      `${corpus}:6:`,
    );
  });
});
