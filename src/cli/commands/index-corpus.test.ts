import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { writeCorpusFile } from "../../tools/test-corpus.js";
import { indexCorpus } from "./index-corpus.js";

describe("coa index", () => {
  it("builds the index once, then reuses it while the corpus is unchanged", async () => {
    const corpus = await writeCorpusFile();
    const out = join(await mkdtemp(join(tmpdir(), "coa-index-")), "idx");
    const lines: string[] = [];
    await indexCorpus(corpus, { out }, (l) => lines.push(l));
    expect(lines.at(-1)).toMatch(new RegExp(`^built index ${out}: 5 docs in \\d+\\.\\d\\d s$`));
    expect(lines).toContain("indexing: 100% (5 docs)");
    await indexCorpus(corpus, { out }, (l) => lines.push(l));
    expect(lines.at(-1)).toMatch(
      new RegExp(`^reused index ${out}: 5 docs \\(corpus unchanged since .*\\), loaded in`),
    );
    await indexCorpus(corpus, { out, rebuild: true }, (l) => lines.push(l));
    expect(lines.at(-1)).toMatch(/^built index/);
  });
});
