import { readFileSync } from "node:fs";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { describeRule, TRANSITION_RULES, validateTrajectorySteps } from "./rules.js";
import type { Step } from "./steps.js";
import { trajectoryArb } from "./testing/arbitraries.js";

const think: Step = { type: "think", text: "t" };
const plan: Step = { type: "plan", text: "p" };
const search: Step = { type: "tool_call", tool: "web_search", args: "q" };
const obs: Step = { type: "observation", text: "o" };
const suggest: Step = { type: "suggested_answer", text: "s" };
const check = (score: number | null): Step => ({ type: "double_check", text: `Score: ${score}`, score });
const answer: Step = { type: "answer", text: "a" };

/** [step number, kind] of each error, to read failures at a glance. */
const breaches = (steps: Step[], opts?: Parameters<typeof validateTrajectorySteps>[2]) =>
  validateTrajectorySteps(steps, "web", opts).map((e) => [
    Number(/^step (\d+)/.exec(e.message)?.[1]),
    e.kind,
  ]);

describe("validateTrajectorySteps", () => {
  it("accepts a full web trajectory that uses every rule", () => {
    const steps = [
      think,
      plan,
      search,
      obs,
      suggest,
      check(2),
      think,
      plan,
      search,
      obs,
      suggest,
      check(5),
      answer,
    ];
    expect(validateTrajectorySteps(steps, "web")).toEqual([]);
  });

  it("start: the first step is think or plan", () => {
    expect(breaches([plan, answer])).toEqual([]);
    expect(breaches([search, obs, answer])).toEqual([[1, "bad_transition"]]);
  });

  it("a tool call is followed by its observation", () => {
    expect(breaches([think, search, think, answer])).toEqual([[3, "bad_transition"]]);
    expect(breaches([think, search, search, obs, answer])).toEqual([[3, "bad_transition"]]);
  });

  it("an observation comes only right after a tool call", () => {
    expect(breaches([think, obs, answer])).toEqual([[2, "bad_transition"]]);
    expect(breaches([think, search, obs, obs, answer])).toEqual([[4, "bad_transition"]]);
  });

  it("a suggested answer is followed by a double check where the profile has one", () => {
    expect(breaches([think, suggest, answer])).toEqual([[3, "bad_transition"]]);
    expect(breaches([think, suggest, check(4), answer])).toEqual([]);
  });

  it("a double check scoring 2 or less is followed by plan, or think then plan", () => {
    expect(breaches([think, suggest, check(2), plan, answer])).toEqual([]);
    expect(breaches([think, suggest, check(1), think, plan, answer])).toEqual([]);
    expect(breaches([think, suggest, check(2), answer])).toEqual([[4, "bad_transition"]]);
    expect(breaches([think, suggest, check(2), think, answer])).toEqual([[4, "bad_transition"]]);
    expect(breaches([think, suggest, check(3), answer])).toEqual([]);
    expect(breaches([think, suggest, check(null), answer])).toEqual([]);
  });

  it("nothing follows the answer, so there is one answer", () => {
    expect(breaches([think, answer, answer])).toEqual([[3, "bad_transition"]]);
    expect(breaches([think, answer, think, answer])).toEqual([[3, "bad_transition"]]);
  });

  it("a finished trajectory ends with its answer; one in progress need not", () => {
    expect(breaches([think, plan])).toEqual([[2, "bad_transition"]]);
    expect(breaches([])).toEqual([[1, "bad_transition"]]);
    expect(breaches([think, search], { complete: false })).toEqual([]);
    expect(breaches([think, suggest, check(1), think], { complete: false })).toEqual([]);
    expect(breaches([think, suggest, check(1), answer], { complete: false })).toEqual([
      [4, "bad_transition"],
    ]);
  });

  it("reports steps the profile disables", () => {
    const code: Step = { type: "tool_call", tool: "code", args: "```python\n1\n```" };
    expect(validateTrajectorySteps([think, code, obs, answer], "web").map((e) => e.kind)).toEqual([
      "disabled_tag",
    ]);
    expect(
      validateTrajectorySteps([think, { type: "reflection", text: "r" }, answer], "mhqa")[0].message,
    ).toBe("step 2: <reflection> is not enabled in profile mhqa");
  });

  it("uses the step's span and names the rule in the message", () => {
    const [error] = validateTrajectorySteps([think, { ...obs, span: { start: 5, end: 9 } }, answer], "web");
    expect(error.span).toEqual({ start: 5, end: 9 });
    expect(error.message).toContain("observations are tool results");
  });

  it("accepts every generated valid trajectory of every profile (property)", () => {
    for (const profile of ["web", "mhqa", "code", "all"] as const)
      fc.assert(
        fc.property(trajectoryArb(profile), (steps) => {
          expect(validateTrajectorySteps(steps, profile)).toEqual([]);
        }),
        { numRuns: 100 },
      );
  });
});

describe("TRANSITION_RULES", () => {
  it("are listed word for word in docs/protocol.md", () => {
    const docs = readFileSync(new URL("../../docs/protocol.md", import.meta.url), "utf8");
    for (const rule of TRANSITION_RULES) expect(docs).toContain(`- ${describeRule(rule)}\n`);
  });

  it("reads as one sentence per rule", () => {
    expect(TRANSITION_RULES.map((r) => describeRule(r))).toContain(
      "After <double_check> scoring 2 or less comes <plan> or <think> then <plan>: a failed check sends the model back to planning.",
    );
  });
});
