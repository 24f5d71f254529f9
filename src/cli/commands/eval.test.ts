import { describe, expect, it } from "vitest";
import { costSummary, type EvalSummary, successMetrics } from "../../eval/index.js";
import { formatEvalSummary } from "./eval.js";

const sample = (correct: boolean) => ({ correct, error: null, selfScore: null });

describe("formatEvalSummary", () => {
  it("prints success per task kind and copy accuracy", () => {
    const summary: EvalSummary = {
      model: "m",
      profile: "all",
      success: successMetrics([
        { taskId: "a", samples: [sample(true)] },
        { taskId: "b", samples: [sample(false)] },
      ]),
      byKind: {
        comparison: successMetrics([{ taskId: "b", samples: [sample(false)] }]),
        multihop: successMetrics([{ taskId: "a", samples: [sample(true)] }]),
      },
      taskScores: { a: 1, b: 0 },
      copy: { entity: { episodes: 2, copied: 1, rate: 0.5 }, value: { episodes: 0, copied: 0, rate: null } },
      cost: costSummary([]),
      formatErrorRate: 0,
      finishReasons: { answer: 2 },
    };
    const text = formatEvalSummary(summary);
    expect(text).toContain(
      "by kind: comparison 0.0% of 1 (avg@k 0.0%) · multihop 100.0% of 1 (avg@k 100.0%)",
    );
    expect(text).toContain(
      "copy accuracy: the question's entity in the first tool call 50.0% (1 of 2) · the first lookup's value in the second –",
    );
  });
});
