import { describe, expect, it } from "vitest";
import { formatReward } from "./format-reward.js";

const WELL_FORMED = [
  "<think>I need the capital of France.</think>",
  "<web_search>capital of France</web_search>",
  "<observation>Paris is the capital and largest city of France.</observation>",
  "<suggested_answer>Paris</suggested_answer>",
  "<double_check>The source states it directly. Score: 4</double_check>",
  "<answer>Paris</answer>",
].join("\n");

describe("format reward", () => {
  it("scores a well-formed web trajectory 1", () => {
    expect(formatReward(WELL_FORMED, "web")).toEqual({
      score: 1,
      correct: true,
      error: null,
      scorer: "format",
      metrics: { formatErrors: 0, steps: 6 },
    });
  });

  it("scores 0 when a tag is not enabled in the profile", () => {
    const result = formatReward(WELL_FORMED, "mhqa");
    expect(result.score).toBe(0);
    expect(result.metrics?.formatErrors).toBe(3); // web_search, suggested_answer and double_check
  });

  it("scores 0 for broken transition rules: answer first, then more text", () => {
    expect(formatReward("<answer>Paris</answer><think>hm</think>", "web").metrics?.formatErrors).toBe(3);
  });

  it("a prefix still being generated is fine when not complete", () => {
    const prefix = "<think>I need the capital of France.</think>\n<plan>search, then answer</plan>";
    expect(formatReward(prefix, "web").score).toBe(0);
    expect(formatReward(prefix, "web", { complete: false }).score).toBe(1);
  });

  it("an observation written by the model itself is forged in model output", () => {
    const forged = "<think>x</think><observation>made up</observation><answer>Paris</answer>";
    expect(formatReward(forged, "web", { modelOutput: true }).score).toBe(0);
  });
});
