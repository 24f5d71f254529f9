import { describe, expect, it } from "vitest";
import { ByteTokenizer } from "../model/index.js";
import type { MasTrace } from "../teacher/index.js";
import { DistillConfig } from "./config.js";
import {
  balanceStage,
  budgetStage,
  type Candidate,
  correctnessStage,
  dedupStage,
  formatStage,
  lengthStage,
  qualityStage,
  type TraceItem,
  totalTokens,
} from "./filters.js";
import { Funnel, type Stage } from "./funnel.js";
import { conversation, fullTrace, shortTrace, traceOf } from "./testing/fixtures.js";

const cfg = DistillConfig.parse({});
const tokenizer = new ByteTokenizer();

const item = (trace: MasTrace, line = 1): TraceItem => ({
  ref: { file: "t.jsonl", line },
  taskId: trace.taskId,
  trace,
});

function candidates(...traces: MasTrace[]): Candidate[] {
  const out = formatStage({ profile: "all", tokenizer }).run(traces.map((t, i) => item(t, i + 1)));
  return out.map((o) => {
    if (!o.ok) throw new Error(`${o.reason}: ${o.detail}`);
    return o.value;
  });
}

/** Runs one stage and returns [kept task ids, drop reasons]. */
function run<I extends TraceItem, O extends TraceItem>(stage: Stage<I, O>, items: I[]) {
  const funnel = new Funnel();
  const kept = funnel.apply(stage, items);
  return {
    kept: kept.map((k) => k.taskId),
    reasons: funnel.drops.map((d) => d.reason),
    count: funnel.stages[0]!,
  };
}

describe("correctness stage", () => {
  it("keeps reward 1, drops wrong answers, and counts broken episodes as errors", () => {
    const r = run(correctnessStage(cfg.correctness), [
      item(shortTrace({ taskId: "ok" })),
      item(shortTrace({ taskId: "wrong", reward: 0 })),
      item(shortTrace({ taskId: "broke", reward: 0, error: "model down after 3 retries" })),
      item(shortTrace({ taskId: "unscored", reward: null })),
    ]);
    expect(r.kept).toEqual(["ok"]);
    expect(r.reasons).toEqual(["wrong_answer", "teacher_error", "unscored"]);
    expect(r.count).toEqual({
      stage: "correctness",
      in: 4,
      out: 1,
      dropped: { wrong_answer: 1, teacher_error: 1, unscored: 1 },
    });
  });
});

describe("format stage", () => {
  it("keeps traces that render into valid CoA and names the first error of the others", () => {
    const startsWithTool = traceOf(
      conversation(
        ["user", "manager", "task", "q"],
        ["searcher", "tool", "tool_call", "", { tool: { name: "web_search", args: "q" } }],
        ["tool", "searcher", "observation", "r", { ok: true }],
        ["manager", "user", "final", "A"],
      ),
      { taskId: "tool-first" },
    );
    const emptyAnswer = shortTrace({ taskId: "empty" });
    emptyAnswer.messages = emptyAnswer.messages.map((m) => (m.kind === "final" ? { ...m, content: " " } : m));
    const noObservation = traceOf(
      conversation(
        ["manager", "user", "plan", "p"],
        ["searcher", "tool", "tool_call", "", { tool: { name: "web_search", args: "q" } }],
        ["manager", "user", "final", "A"],
      ),
      { taskId: "no-obs" },
    );
    const r = run(formatStage({ profile: "all", tokenizer }), [
      item(fullTrace({ taskId: "full" })),
      item(startsWithTool),
      item(emptyAnswer),
      item(noObservation),
    ]);
    expect(r.kept).toEqual(["full"]);
    expect(r.reasons).toEqual(["bad_transition", "empty_tag", "missing_observation"]);
  });

  it("drops a trace the tokenizer cannot encode, and goes on with the rest", () => {
    const picky = {
      name: "picky",
      vocabSize: tokenizer.vocabSize,
      encode: (text: string) => {
        if (text.includes("Zeta")) throw new Error("no token for Zeta");
        return tokenizer.encode(text);
      },
      decode: (ids: readonly number[]) => tokenizer.decode(ids),
      toJSON: () => tokenizer.toJSON(),
    };
    const r = run(formatStage({ profile: "all", tokenizer: picky }), [
      item(shortTrace({ taskId: "zeta" }, "Who founded Zeta Labs?")),
      item(shortTrace({ taskId: "acme" })),
    ]);
    expect(r.kept).toEqual(["acme"]);
    expect(r.reasons).toEqual(["conversion_error"]);
  });

  it("drops tools the profile does not enable", () => {
    const r = run(formatStage({ profile: "web", tokenizer }), [item(fullTrace())]);
    expect(r.reasons).toEqual(["disabled_tag"]);
  });
});

describe("budget stage", () => {
  it("drops traces over the tool budget and traces that repeat a call", () => {
    const repeat = shortTrace({ taskId: "repeat" });
    const [call, obs] = repeat.messages.slice(2, 4);
    const again = { ...call!, tool: { name: "web_search" as const, args: "  WHO founded Acme Robotics? " } };
    repeat.messages.splice(4, 0, again, { ...obs! });
    repeat.messages = repeat.messages.map((m, index) => ({ ...m, index }));
    const r = run(
      budgetStage({ ...cfg.budget, maxToolCalls: 3 }),
      candidates(shortTrace(), fullTrace({ taskId: "big" }), repeat),
    );
    expect(r.kept).toEqual(["t1"]);
    expect(r.reasons).toEqual(["over_tool_budget", "redundant_call"]);
    expect(run(budgetStage({ ...cfg.budget, allowRedundantCalls: true }), candidates(repeat)).kept).toEqual([
      "repeat",
    ]);
  });
});

describe("length stage", () => {
  it("keeps what fits the training context, in target-tokenizer tokens", () => {
    const [short, long] = candidates(shortTrace(), fullTrace({ taskId: "long" }));
    const limit = totalTokens(short!.trajectory);
    expect(totalTokens(long!.trajectory)).toBeGreaterThan(limit);
    const r = run(lengthStage({ maxTokens: limit }), [short!, long!]);
    expect(r.kept).toEqual(["t1"]);
    expect(r.reasons).toEqual(["too_long"]);
  });
});

describe("quality stage", () => {
  const without = (trace: MasTrace, drop: (m: MasTrace["messages"][number]) => boolean, taskId: string) => {
    const messages = trace.messages.filter((m) => !drop(m)).map((m, index) => ({ ...m, index }));
    return { ...trace, taskId, messages };
  };

  it("asks for a plan, a reflection after each setback, and a passing double check", () => {
    const full = fullTrace({ taskId: "full" });
    const thinking = shortTrace();
    thinking.messages = thinking.messages.map((m) =>
      m.kind === "plan" ? { ...m, kind: "reasoning" as const } : m,
    );
    const noPlan = { ...thinking, taskId: "no-plan" };
    const noReflection = without(full, (m) => m.kind === "reflection", "no-reflection");
    const noCheck = without(shortTrace(), (m) => m.kind === "proposal" || m.kind === "verdict", "no-check");
    const r = run(qualityStage(cfg.quality, "all"), candidates(full, noPlan, noReflection, noCheck));
    expect(r.kept).toEqual(["full"]);
    expect(r.reasons).toEqual(["no_plan", "no_recovery_reflection", "no_double_check"]);
  });

  it("only asks a profile for the roles it enables", () => {
    const noReflection = without(fullTrace(), (m) => m.kind === "reflection", "no-reflection");
    const stage = qualityStage({ ...cfg.quality, requirePlan: false }, "mhqa");
    expect(run(stage, candidates(noReflection)).kept).toEqual(["no-reflection"]);
  });
});

describe("dedup stage", () => {
  it("drops later near-duplicate questions and names the original", () => {
    const a = shortTrace({ taskId: "a" }, "Who founded Acme Robotics in the city of Lyon, France?");
    const b = shortTrace({ taskId: "b" }, "who founded Acme Robotics in the city of Lyon France");
    const c = shortTrace({ taskId: "c" }, "When was Acme Robotics founded?");
    const funnel = new Funnel();
    const kept = funnel.apply(dedupStage(cfg.dedup), candidates(a, b, c));
    expect(kept.map((k) => k.taskId)).toEqual(["a", "c"]);
    expect(funnel.drops[0]).toMatchObject({ reason: "near_duplicate", at: "t.jsonl:2", taskId: "b" });
    expect(funnel.drops[0]!.detail).toContain("task a (t.jsonl:1)");
    expect(run(dedupStage({ ...cfg.dedup, enabled: false }), candidates(a, b)).kept).toEqual(["a", "b"]);
  });
});

describe("balance stage", () => {
  it("keeps every hard trajectory and caps easy ones at their share", () => {
    const easy = Array.from({ length: 6 }, (_, i) => shortTrace({ taskId: `easy${i}` }));
    const hard = Array.from({ length: 3 }, (_, i) => fullTrace({ taskId: `hard${i}` }));
    const stage = balanceStage({ enabled: true, easyBelowToolCalls: 2, maxEasyShare: 0.4 });
    const r = run(stage, candidates(...easy, ...hard));
    // 3 hard; easy may be 40% of the kept set: floor(0.4 * 3 / 0.6) = 2.
    expect(r.kept).toEqual(["easy0", "easy3", "hard0", "hard1", "hard2"]);
    expect(r.reasons).toEqual(Array(4).fill("easy_over_share"));
    expect(run(balanceStage(cfg.balance), candidates(...easy)).kept).toHaveLength(6);
  });
});
