import { describe, expect, it } from "vitest";
import { compareCosts, costComparisonReport } from "./cost-compare.js";
import type { EpisodeCost } from "./metrics.js";
import { reportMarkdown } from "./report.js";

const cost = (billed: number, processed: number): EpisodeCost => ({
  billedTokens: billed,
  processedTokens: processed,
  generatedTokens: 0,
  observationTokens: 0,
  modelCalls: 1,
  toolCalls: 0,
  wallMs: 0,
  solved: true,
});
const kinds: Record<string, string> = { a: "multihop", b: "multihop", c: "comparison", d: "comparison" };

describe("compareCosts", () => {
  it("compares only the tasks every system ran, per kind and overall", () => {
    const c = compareCosts(
      [
        { name: "mas", episodes: ["a", "b", "c", "d"].map((taskId) => ({ taskId, cost: cost(100, 40) })) },
        {
          name: "coa",
          // d was not kept; a's second episode is ignored.
          episodes: [
            { taskId: "a", cost: cost(20, 10) },
            { taskId: "a", cost: cost(999, 999) },
            { taskId: "b", cost: cost(40, 10) },
            { taskId: "c", cost: cost(50, 30) },
          ],
        },
      ],
      (id) => kinds[id]!,
    );
    expect(c.tasks).toBe(3);
    expect(c.leftOut).toEqual({ mas: 1, coa: 0 });
    expect(c.byKind.map((k) => [k.kind, k.tasks])).toEqual([
      ["comparison", 1],
      ["multihop", 2],
      ["all", 3],
    ]);
    const multihop = c.byKind[1]!.costs;
    expect(multihop.coa!.billedTokensPerTask).toBe(30);
    expect(multihop.mas!.processedTokensPerTask).toBe(40);

    const md = reportMarkdown(costComparisonReport(c, "coa compare-costs --traces mas", "coa-byte-v1"));
    expect(md).toContain("coa compare-costs --traces mas");
    expect(md).toContain("left out: mas 1.");
    expect(md).toContain("| multihop | 2 | mas | 100 | 40 | 1.0 | 70.0% | 75.0% |");
    expect(md).toContain("| all | 3 | coa | 37 | 17 | 1.0 |  |  |");
  });
});
