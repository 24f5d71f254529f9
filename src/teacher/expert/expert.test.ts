import { beforeAll, describe, expect, it } from "vitest";
import { BYTE_TOKENIZER_NAME } from "../../model/index.js";
import { runEpisode } from "../episode.js";
import { summarizeTraces } from "../summary.js";
import { type WorldFixture, worldFixture } from "../testing.js";
import { MasTrace } from "../trace.js";
import { ExpertDriver } from "./expert.js";

describe("expert driver through the real tools", () => {
  let tiny: WorldFixture;
  let small: WorldFixture;
  beforeAll(async () => {
    [tiny, small] = await Promise.all([worldFixture("tiny"), worldFixture("small")]);
  });

  it("answers every dev and test question of a world by search when it makes no slips", async () => {
    const careful = new ExpertDriver({ lapses: false });
    const tasks = [...tiny.world.splits.dev, ...tiny.world.splits.test];
    expect(tasks.length).toBeGreaterThan(30);
    for (const task of tasks) {
      const trace = await runEpisode(task, careful, tiny.tools);
      expect(trace.reward, `${task.id}: ${task.question} -> ${trace.finalAnswer}`).toBe(1);
    }
  });

  it("solves >= 90% of dev questions, reflecting or re-planning in >= 20% of traces", async () => {
    const driver = new ExpertDriver();
    const traces: MasTrace[] = [];
    for (const task of small.world.splits.dev.slice(0, 150))
      traces.push(await runEpisode(task, driver, small.tools));
    const summary = summarizeTraces(traces);
    expect(summary.errors).toBe(0);
    expect(summary.success).toBeGreaterThanOrEqual(0.9);
    expect(summary.recoveryRate).toBeGreaterThanOrEqual(0.2);

    // Slips happen and are recovered from: a critic sends a lookup back, a verifier forces a re-plan.
    const redone = traces.filter((t) =>
      t.messages.some((m) => m.kind === "delegate" && /^Step \d+: Re-check/.test(m.content)),
    );
    const rejected = traces.filter((t) =>
      t.messages.some((m) => m.kind === "verdict" && (m.score ?? 5) <= 2),
    );
    expect(redone.length).toBeGreaterThan(0);
    expect(rejected.length).toBeGreaterThan(0);
    for (const t of rejected) {
      const verdict = t.messages.findIndex((m) => m.kind === "verdict" && (m.score ?? 5) <= 2);
      expect(t.messages[verdict + 1].kind).toBe("plan");
    }

    for (const t of traces) {
      MasTrace.parse(t);
      expect(t.tokenizer).toBe(BYTE_TOKENIZER_NAME);
      expect(t.stats.tokensIn).toBeGreaterThan(t.stats.tokensOut);
      // A prefix cache would reuse part of the manager's growing context, never more than it read.
      expect(t.stats.tokensCached).toBeGreaterThan(0);
      expect(t.stats.tokensCached).toBeLessThan(t.stats.tokensIn);
      for (const m of t.messages) expect(m.tokensCached).toBeLessThanOrEqual(m.tokensIn);
      // Facts come from search results: an entity answer was seen in an observation first.
      if (t.taskKind === "multihop" && t.reward === 1) {
        const seen = t.messages
          .filter((m) => m.kind === "observation")
          .map((m) => m.content.replace(/,/g, ""));
        expect(seen.some((text) => text.includes(t.finalAnswer!))).toBe(true);
      }
    }
  });

  it("opens each move with its numbered plan line, the answer being the plan's last", async () => {
    const careful = new ExpertDriver({ lapses: false });
    for (const task of tiny.world.splits.test.slice(0, 20)) {
      const trace = await runEpisode(task, careful, tiny.tools);
      const plan = trace.messages.find((m) => m.kind === "plan")!.content.split("\n");
      expect(plan.at(-1)).toBe(`Step ${plan.length}: Answer with the result.`);
      // Every "Step k: …" the manager writes, in a request or a thought, is the plan's line k, but
      // that a lookup names what "that person" turned out to be, and a computation adds its numbers.
      const written = trace.messages
        .filter((m) => m.from === "manager" && m.kind !== "plan")
        .flatMap((m) => m.content.match(/Step \d+: [^\n]*/g) ?? []);
      expect(written.length, task.question).toBeGreaterThanOrEqual(2);
      for (const w of written) {
        const k = Number(/^Step (\d+)/.exec(w)![1]);
        const line = plan[k - 1]!;
        const head = (text: string) => text.split(" of ")[0];
        expect(w.startsWith(line) || head(w) === head(line), `${w} | ${plan.join(" / ")}`).toBe(true);
      }
      expect(written.at(-1)).toBe(plan.at(-1));
    }
  });

  it("compares in Python, its plan line naming the side first, and answers the printed name", async () => {
    const careful = new ExpertDriver({ lapses: false });
    const comparisons = tiny.world.splits.test.filter((t) => t.kind === "comparison");
    expect(comparisons.length).toBeGreaterThan(0);
    for (const task of comparisons.slice(0, 8)) {
      const trace = await runEpisode(task, careful, tiny.tools);
      const line = trace.messages.find(
        (m) => m.from === "manager" && /^Step \d+: (Smaller|Larger) /.test(m.content),
      );
      expect(line, task.question).toBeDefined();
      const fn = line!.content.includes("Smaller") ? "min" : "max";
      const call = trace.messages.find((m) => m.kind === "tool_call" && m.tool?.name === "code")!;
      expect(call.tool!.args).toMatch(
        new RegExp(`values = \\{.*\\}\\nprint\\(${fn}\\(values, key=values\\.get\\)\\)`),
      );
      const printed = trace.messages.findLast((m) => m.kind === "observation")!.content.trim();
      expect(trace.finalAnswer).toBe(printed);
      expect(trace.reward).toBe(1);
    }
  });

  it("records an error, not a crash, for a task it has no plan for", async () => {
    const task = {
      id: "nq-1",
      question: "who wrote hamlet",
      answers: ["Shakespeare"],
      kind: "qa" as const,
      source: "nq",
      meta: {},
    };
    const trace = await runEpisode(task, new ExpertDriver(), tiny.tools);
    expect(trace.error).toMatch(/meta\.plan/);
    expect(trace.reward).toBeNull();
  });
});
