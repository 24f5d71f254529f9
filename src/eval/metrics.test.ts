import { describe, expect, it } from "vitest";
import { costSummary, passAtK, reduction, successByKind, successMetrics, taskScores } from "./metrics.js";

describe("passAtK", () => {
  it("matches the closed form on small cases", () => {
    // n=4, c=1, k=2: 1 - C(3,2)/C(4,2) = 1 - 3/6
    expect(passAtK(4, 1, 2)).toBeCloseTo(0.5, 12);
    // n=5, c=2, k=1 is just c/n
    expect(passAtK(5, 2, 1)).toBeCloseTo(0.4, 12);
    expect(passAtK(5, 0, 3)).toBe(0);
    expect(passAtK(5, 3, 3)).toBe(1);
  });
  it("refuses k larger than the sample count", () => {
    expect(() => passAtK(2, 1, 3)).toThrow(/needs at least 3 samples/);
  });
});

describe("successMetrics", () => {
  const s = (correct: boolean, selfScore: number | null = null, error: string | null = null) => ({
    correct,
    selfScore,
    error,
  });
  it("computes pass@1, avg@k, pass@k and best-of-k by self score", () => {
    const m = successMetrics([
      { taskId: "a", samples: [s(false, 2), s(true, 5)] },
      { taskId: "b", samples: [s(true, 4), s(true, 3)] },
      { taskId: "c", samples: [s(false, 1), s(false, 5)] },
    ]);
    expect(m.k).toBe(2);
    expect(m.pass1).toBeCloseTo(1 / 3);
    expect(m.avgK).toBeCloseTo((0.5 + 1 + 0) / 3);
    expect(m.passK).toBeCloseTo((1 + 1 + 0) / 3);
    expect(m.bestOfKBySelfScore).toBeCloseTo(2 / 3);
  });
  it("keeps scorer errors out of the rates and counts them", () => {
    const m = successMetrics([
      { taskId: "a", samples: [s(false, null, "sandbox_unavailable")] },
      { taskId: "b", samples: [s(true)] },
    ]);
    expect(m).toMatchObject({ tasks: 2, scorerErrorTasks: 1, scorerErrors: 1, pass1: 1 });
  });
  it("gives each task's avg@k, leaving out scorer errors and tasks that only had them", () => {
    expect(
      taskScores([
        { taskId: "a", samples: [s(true), s(false), s(true), s(false, null, "judge_down")] },
        { taskId: "b", samples: [s(false, null, "judge_down")] },
        { taskId: "c", samples: [s(false)] },
      ]),
    ).toEqual({ a: 2 / 3, c: 0 });
  });
  it("splits success by task kind, each with its own task count", () => {
    const byKind = successByKind([
      { taskId: "a", kind: "multihop", samples: [s(true), s(false)] },
      { taskId: "b", kind: "comparison", samples: [s(false), s(false)] },
      { taskId: "c", kind: "multihop", samples: [s(false), s(false)] },
    ]);
    expect(Object.keys(byKind)).toEqual(["comparison", "multihop"]);
    expect(byKind.multihop).toMatchObject({ tasks: 2, pass1: 0.5, avgK: 0.25 });
    expect(byKind.comparison).toMatchObject({ tasks: 1, pass1: 0, avgK: 0 });
  });
});

describe("costSummary", () => {
  it("divides tokens by all tasks and by solved tasks", () => {
    const e = (billedTokens: number, solved: boolean) => ({
      billedTokens,
      processedTokens: billedTokens / 2,
      generatedTokens: 10,
      observationTokens: 5,
      modelCalls: 2,
      toolCalls: 1,
      wallMs: 100,
      solved,
    });
    const c = costSummary([e(100, true), e(300, false)]);
    expect(c.billedTokensPerTask).toBe(200);
    expect(c.billedTokensPerSolvedTask).toBe(400);
    expect(c.processedTokensPerTask).toBe(100);
    expect(c.processedTokensPerSolvedTask).toBe(200);
    expect(costSummary([e(1, false)]).billedTokensPerSolvedTask).toBeNull();
    expect(reduction(20, 100)).toBeCloseTo(0.8);
  });
});
