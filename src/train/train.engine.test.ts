import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Engine, type PolicySequence } from "../model/index.js";
import { ScriptedModel } from "../model/testing/index.js";
import { completionIds, type Trajectory } from "../protocol/index.js";
import { formatReward, scoreTask } from "../rewards/index.js";
import { runAgent } from "../runtime/index.js";
import type { Task } from "../tasks/index.js";
import { createToolset } from "../tools/index.js";
import { mean } from "../util/index.js";
import {
  agentEpisodes,
  Checkpoints,
  RlConfig,
  type RlConfigInput,
  type RlStepMetrics,
  runRl,
  runSft,
  type SftStepMetrics,
  type TrainerClient,
  withEngineRestarts,
} from "./index.js";

// The toy world: one question, answered by a letter after one wiki_search. The SFT data answers
// "b" three times out of four; RL rewards "a", so a rising reward means RL moved the policy.
const QUESTION = "Pick a letter.";
const CORPUS = [{ id: "d1", title: "Letters", text: "The letter a is the first letter." }];
// fp32: runs on separate engines are compared to the last digits, and bf16 is chosen only where fast.
const quiet = { onLog: () => {}, maxSeqLen: 512, threads: 1, dtype: "fp32" as const };

let dir: string;
let tools: ReturnType<typeof createToolset>;
let sftCheckpoint: string;

async function scriptedTrajectory(letter: string): Promise<Trajectory> {
  const model = new ScriptedModel([
    "<think>look it up</think>\n<wiki_search>letter</wiki_search>",
    `<think>got it</think>\n<answer>${letter}</answer>`,
  ]);
  return runAgent({ model, tools, profile: "mhqa", question: QUESTION, maxObservationChars: 120 });
}

const tasks: Task[] = Array.from({ length: 4 }, (_, i) => ({
  id: `toy-${i}`,
  question: QUESTION,
  answers: ["a"],
  kind: "multihop",
  source: "toy",
  meta: {},
}));

const rlConfig = (out: string, over: Partial<RlConfigInput> = {}): RlConfigInput => ({
  tasks: "toy",
  out,
  steps: 10,
  groupSize: 4,
  batchTasks: 2,
  maxRefills: 1,
  maxSequenceTokens: 512,
  rollout: {
    profile: "mhqa",
    maxTokensPerTurn: 48,
    maxTurns: 3,
    maxResponseTokens: 200,
    maxObservationChars: 120,
    concurrency: 4,
  },
  reward: { overlongPenalty: false },
  update: { lr: 1e-3, epochs: 2, miniBatchSize: 8 },
  seed: 1,
  ...over,
});

/** log p(answer a) − log p(answer b) for the scripted trajectory under the engine's weights. */
async function preferenceForA(engine: Engine): Promise<number> {
  const ids = (t: Trajectory) => [...t.promptIds, ...completionIds(t)];
  const [a, b] = await engine.score([ids(await scriptedTrajectory("a")), ids(await scriptedTrajectory("b"))]);
  const total = (lps: (number | null)[]) => lps.reduce((sum: number, lp) => sum + (lp ?? 0), 0);
  return total(a) - total(b);
}

/** Wraps the engine so a test sees every policy batch it is sent. */
function recording(engine: Engine): { client: TrainerClient; batches: PolicySequence[][] } {
  const batches: PolicySequence[][] = [];
  const client: TrainerClient = {
    tokenizer: engine.tokenizer,
    trainSft: (r) => engine.trainSft(r),
    evalSft: (r) => engine.evalSft(r),
    trainPolicy: (r) => {
      batches.push(r.batch);
      return engine.trainPolicy(r);
    },
    saveCheckpoint: (d) => engine.saveCheckpoint(d),
    loadCheckpoint: (d) => engine.loadCheckpoint(d),
    info: () => engine.info(),
  };
  return { client, batches };
}

function rlDeps(engine: Engine, client: TrainerClient, config: RlConfigInput, episodes: Trajectory[] = []) {
  const run = agentEpisodes({ model: engine, tools, rollout: RlConfig.parse(config).rollout });
  return {
    client,
    runEpisode: async (task: Task, o: { seed: number }) => {
      const t = await run(task, o);
      episodes.push(t);
      return t;
    },
    score: (task: Task, prediction: string | null) => scoreTask(task, prediction),
    detokenize: (ids: readonly number[]) => engine.detokenize(ids),
  };
}

/**
 * Every sequence sent for training is an episode's ids; its prompt and tool tokens carry no loss and
 * no advantage, and its model tokens carry the sign of its reward against its group: a correct
 * answer pushed up, a wrong one pushed down.
 */
async function expectTrainableTokensOnly(sent: PolicySequence[], episodes: Trajectory[]): Promise<void> {
  const byIds = new Map(episodes.map((t) => [JSON.stringify([...t.promptIds, ...completionIds(t)]), t]));
  let toolTokens = 0;
  expect(sent.length).toBeGreaterThan(0);
  for (const seq of sent) {
    const t = byIds.get(JSON.stringify(seq.input_ids));
    expect(t).toBeDefined();
    const advantages = seq.advantages as number[];
    const sign = (await scoreTask(tasks[0], t!.answer)).correct ? 1 : -1;
    let pos = t!.promptIds.length;
    for (const s of t!.segments) {
      for (let i = 0; i < s.ids.length; i++, pos++) {
        const trained = s.source === "model" ? 1 : 0;
        expect(seq.loss_mask[pos]).toBe(trained);
        if (trained) expect(Math.sign(advantages[pos])).toBe(sign);
        else {
          expect(advantages[pos]).toBe(0);
          toolTokens++;
        }
      }
    }
    expect(seq.loss_mask.slice(0, t!.promptIds.length).every((m) => m === 0)).toBe(true);
  }
  expect(toolTokens).toBeGreaterThan(0);
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), "coa-train-"));
  const corpus = path.join(dir, "corpus.jsonl");
  await writeFile(corpus, CORPUS.map((d) => `${JSON.stringify(d)}\n`).join(""));
  tools = createToolset({ corpus, indexDir: path.join(dir, "index"), profile: "mhqa" });
  const lines: string[] = [];
  for (let i = 0; i < 16; i++) lines.push(JSON.stringify(await scriptedTrajectory(i % 4 === 0 ? "a" : "b")));
  lines.splice(3, 0, '{"not": "a trajectory"}');
  await writeFile(path.join(dir, "native.jsonl"), `${lines.join("\n")}\n`);
});

describe("SFT on the engine", () => {
  let engine: Engine;
  afterAll(() => engine?.close());

  it("teaches the micro model to emit well-formed CoA with a tool call", async () => {
    engine = await Engine.start({ preset: "micro" }, quiet);
    const bad: number[] = [];
    const summary = await runSft(
      {
        data: dir,
        out: path.join(dir, "sft"),
        steps: 45,
        lr: 3e-3,
        warmupRatio: 0.1,
        batchTokens: 2048,
        maxLength: 512,
        evalFraction: 0.15,
        evalEvery: 15,
        checkpointEvery: 20,
      },
      engine,
      {
        onBadLine: (b) => bad.push(b.line),
        // A probe runs after every 20th step and after the last, its measures logged with the step.
        probe: { every: 20, run: async (step) => ({ dev_success: step / 100 }) },
      },
    );
    expect(bad).toEqual([4]);
    expect(summary.steps).toBe(45);
    expect(summary.examples).toMatchObject({ train: 14, eval: 2 });
    const metrics = (await readFile(path.join(dir, "sft", "metrics.jsonl"), "utf8"))
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(metrics).toHaveLength(45);
    expect(metrics.flatMap((m) => (m.dev_success === undefined ? [] : [[m.step, m.dev_success]]))).toEqual([
      [19, 0.2],
      [39, 0.4],
      [44, 0.45],
    ]);
    expect(metrics[44].loss).toBeLessThan(metrics[0].loss / 4);
    expect(summary.evalLoss).toBeLessThan(metrics[0].loss / 4);
    expect(await readFile(path.join(dir, "sft", "loss.svg"), "utf8")).toContain("<svg");
    expect(await readFile(path.join(dir, "sft", "report.md"), "utf8")).toContain("![loss](loss.svg)");
    sftCheckpoint = path.join(dir, "sft", "last");

    const t = await runAgent({
      model: engine,
      tools,
      profile: "mhqa",
      question: QUESTION,
      maxObservationChars: 120,
      sampling: { temperature: 0, maxTokensPerTurn: 64 },
      budget: { maxTurns: 4 },
    });
    const text = await engine.detokenize(completionIds(t));
    expect(t.finishReason, text).toBe("answer");
    expect(t.stats.formatErrors).toBe(0);
    expect(t.stats.toolCalls.wiki_search).toBe(1);
    expect(formatReward(text, "mhqa", { complete: true }).correct).toBe(true);
  }, 120_000);
});

/** A short SFT run with a checkpoint every 3 steps: what the resume tests interrupt. */
const resumableSft = (out: string, steps: number) => ({
  data: dir,
  out,
  steps,
  lr: 3e-3,
  batchTokens: 1024,
  maxLength: 512,
  evalEvery: 0,
  checkpointEvery: 3,
  warmupRatio: 0.2,
});

describe("SFT resume", () => {
  it("continues after a kill with the same steps, none lost or repeated", async () => {
    const first = await Engine.start({ preset: "micro" }, quiet);
    const second = await Engine.start({ preset: "micro" }, quiet);
    try {
      const full: SftStepMetrics[] = [];
      await runSft(resumableSft(path.join(dir, "sft-full"), 6), first, { onStep: (m) => full.push(m) });

      const killed = new AbortController();
      const out = path.join(dir, "sft-killed");
      await expect(
        runSft(resumableSft(out, 6), second, {
          signal: killed.signal,
          onStep: (m) => m.step === 4 && killed.abort(new Error("killed")),
        }),
      ).rejects.toThrow("killed");
      await second.close();

      const fresh = await Engine.start({ preset: "micro" }, quiet);
      try {
        const resumed: SftStepMetrics[] = [];
        const summary = await runSft(resumableSft(out, 6), fresh, { onStep: (m) => resumed.push(m) });
        expect(summary.resumedFromStep).toBe(3);
        expect(resumed.map((m) => m.step)).toEqual([3, 4, 5]);
        for (const m of resumed) {
          expect(m.lr).toBe(full[m.step].lr);
          expect(m.sequences).toBe(full[m.step].sequences);
          expect(m.loss).toBeCloseTo(full[m.step].loss, 5);
        }
        const logged = (await readFile(path.join(out, "metrics.jsonl"), "utf8")).trim().split("\n");
        expect(logged.map((l) => JSON.parse(l).step)).toEqual([0, 1, 2, 3, 4, 5]);
      } finally {
        await fresh.close();
      }
    } finally {
      await first.close();
      await second.close();
    }
  }, 120_000);
});

describe("an engine that dies mid-run", () => {
  it("is started again from the last checkpoint and the run ends as an unbroken one would", async () => {
    const out = path.join(dir, "sft-crashed");
    const config = resumableSft(out, 6);
    const engines: Engine[] = [];
    const restarts: string[] = [];
    const steps: number[] = [];
    const summary = await withEngineRestarts(
      async () => {
        engines.push(await Engine.start({ preset: "micro" }, quiet));
        return engines.at(-1)!;
      },
      (engine) =>
        runSft(config, engine, {
          onStep: (m) => {
            steps.push(m.step);
            // A crash in native code, after the checkpoint of step 3 and before step 5's request.
            if (m.step === 4 && engines.length === 1) process.kill(engine.pid!, "SIGSEGV");
          },
        }),
      {
        latestCheckpoint: () => new Checkpoints(out, 1).latest(),
        onRestart: (r) => restarts.push(`${r.reason} -> ${path.basename(r.checkpoint)}`),
      },
    );
    expect(engines).toHaveLength(2);
    expect(engines[0]!.crashReason).toMatch(/signal SIGSEGV/);
    // Ended on purpose (close, or a shutdown signal's kill): no crash, so nothing would restart it.
    expect(engines[1]!.crashReason).toBeNull();
    expect(restarts).toEqual([expect.stringMatching(/exited \(signal SIGSEGV\) -> step-000003$/)]);
    expect(summary.resumedFromStep).toBe(3);
    expect(steps).toEqual([0, 1, 2, 3, 4, 3, 4, 5]);
    const logged = (await readFile(path.join(out, "metrics.jsonl"), "utf8")).trim().split("\n");
    expect(logged.map((l) => JSON.parse(l).step)).toEqual([0, 1, 2, 3, 4, 5]);
  }, 120_000);
});

describe("agentic RL on the engine", () => {
  let engine: Engine;
  afterAll(() => engine?.close());

  // What GRPO guarantees is that rewarded answers gain probability. One short run can stall or dip
  // on one CPU's rounding and not another's, and runs are not bit-reproducible (which rows share a
  // decode step depends on timing), so several seeds each run long enough to converge and the
  // assertions are about the seeds together, with wide margins: the exact preference for the
  // scripted rewarded answer must rise in most seeds and by more than 2 nats on average, and pooled
  // success must rise by more than 0.2. Not in every seed: a policy can find the reward by a route
  // of its own and leave the scripted answer where it was (seed 3 once ended at −1.12 from −1.06
  // with 94% success at its last step; typical seeds end at +3 to +5).
  it("raises the rewarded answer's probability across seeds, and tool tokens never receive gradient", async () => {
    engine = await Engine.start({ checkpoint: sftCheckpoint }, quiet);
    const gains: number[] = [];
    const early: number[] = [];
    const late: number[] = [];
    for (const seed of [1, 2, 3]) {
      await engine.loadCheckpoint(sftCheckpoint);
      const { client, batches } = recording(engine);
      const episodes: Trajectory[] = [];
      const out = path.join(dir, `rl-seed${seed}`);
      const config = rlConfig(out, { seed, steps: 20 });
      const steps: RlStepMetrics[] = [];
      const before = await preferenceForA(engine);
      await runRl(config, tasks, rlDeps(engine, client, config, episodes), { onStep: (m) => steps.push(m) });
      const after = await preferenceForA(engine);
      console.log(
        `seed ${seed}: log p(a) − log p(b) ${before.toFixed(2)} -> ${after.toFixed(2)}; success by step ${steps.map((m) => m.success.toFixed(2)).join(" ")}`,
      );
      gains.push(after - before);
      early.push(...steps.slice(0, 5).map((m) => m.success));
      late.push(...steps.slice(-5).map((m) => m.success));
      const report = await readFile(path.join(out, "report.md"), "utf8");
      expect(report).toContain("reward.svg");
      expect(report).toMatch(/rollout prompt tokens from the prefix cache: [1-9]\d* of \d+/);
      await expectTrainableTokensOnly(batches.flat(), episodes);
      // Every step's prefix cache: a turn after a tool call extends its episode's last turn, which
      // the cache kept; at most one lookup per model call (n samples of one prompt share one).
      for (const m of steps) {
        expect(m.prefix_hits! + m.prefix_misses!).toBeGreaterThan(0);
        expect(m.prefix_hits! + m.prefix_misses!).toBeLessThanOrEqual(Math.round(m.samples * m.turns));
      }
      expect(steps.reduce((a, m) => a + m.saved_prefill_tokens!, 0)).toBeGreaterThan(0);
    }
    expect(gains.filter((g) => g > 0).length, JSON.stringify(gains)).toBeGreaterThanOrEqual(2);
    expect(mean(gains), JSON.stringify(gains)).toBeGreaterThan(2);
    expect(mean(late) - mean(early), `early ${mean(early)}, late ${mean(late)}`).toBeGreaterThan(0.2);
  }, 300_000);

  it("resumes after a kill with the same next step", async () => {
    // The uninterrupted run takes steps 0-2; the killed one was meant to take 4 but dies after
    // logging step 2, whose checkpoint (at 3, or at the end) was never written; it resumes for 3.
    let steps = 3;
    const config = (out: string) =>
      rlConfig(out, {
        steps,
        checkpointEvery: 2,
        groupSize: 4,
        batchTasks: 1,
        // Every step then sends a batch, so there is a batch to compare.
        dynamicSampling: false,
        rollout: { ...rlConfig("").rollout, concurrency: 1 },
      });
    await engine.loadCheckpoint(sftCheckpoint);
    const full = recording(engine);
    const fullSteps: RlStepMetrics[] = [];
    const batchesBefore: number[] = [];
    await runRl(config(path.join(dir, "rl-full")), tasks, rlDeps(engine, full.client, config("")), {
      onStep: (m) => {
        fullSteps.push(m);
        batchesBefore.push(full.batches.length - m.updates);
      },
    });

    await engine.loadCheckpoint(sftCheckpoint);
    steps = 4;
    const killed = new AbortController();
    const out = path.join(dir, "rl-killed");
    await expect(
      runRl(config(out), tasks, rlDeps(engine, engine, config("")), {
        signal: killed.signal,
        onStep: (m) => m.step === 2 && killed.abort(new Error("killed")),
      }),
    ).rejects.toThrow("killed");

    const fresh = await Engine.start({ preset: "micro" }, quiet);
    steps = 3;
    try {
      const resumed = recording(fresh);
      const resumedSteps: RlStepMetrics[] = [];
      const summary = await runRl(config(out), tasks, rlDeps(fresh, resumed.client, config("")), {
        onStep: (m) => resumedSteps.push(m),
      });
      expect(summary.resumedFromStep).toBe(2);
      expect(resumedSteps.map((m) => m.step)).toEqual([2]);
      const step2 = (b: PolicySequence[][], first: number) => b.slice(first, first + fullSteps[2].updates);
      const want = step2(full.batches, batchesBefore[2]);
      expect(want.length).toBeGreaterThan(0);
      const got = step2(resumed.batches, 0);
      expect(got.map((x) => x.map((s) => s.input_ids))).toEqual(want.map((x) => x.map((s) => s.input_ids)));
      expect(got.map((x) => x.map((s) => s.advantages))).toEqual(want.map((x) => x.map((s) => s.advantages)));
      expect(resumedSteps[0].reward_mean).toBe(fullSteps[2].reward_mean);
      expect(resumedSteps[0].groups_kept).toBe(fullSteps[2].groups_kept);
      expect(resumedSteps[0].loss).toBeCloseTo(fullSteps[2].loss, 5);
      const logged = (await readFile(path.join(out, "metrics.jsonl"), "utf8")).trim().split("\n");
      expect(logged.map((l) => JSON.parse(l).step)).toEqual([0, 1, 2]);
    } finally {
      await fresh.close();
    }
  }, 240_000);
});
