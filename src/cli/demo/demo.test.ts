import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Command } from "commander";
import { describe, expect, it } from "vitest";
import { costSummary, type EvalSummary } from "../../eval/index.js";
import { trainBpe } from "../../model/index.js";
import { sampleTrajectory } from "../../server/testing.js";
import type { MasTrace } from "../../teacher/index.js";
import { RlConfig } from "../../train/index.js";
import { commandArgs } from "../command-args.js";
import { registerCommands } from "../commands/index.js";
import { parseFlags } from "../flags.js";
import { DEMO_PRESETS } from "./presets.js";
import { writeDemoReport } from "./report.js";
import { demoRlConfig, demoStages } from "./stages.js";

describe("demo stages", () => {
  it("run commands whose own flags parse each stage's arguments back into its typed flags", async () => {
    const presets = [
      DEMO_PRESETS.quick,
      DEMO_PRESETS.default,
      DEMO_PRESETS.full,
      { ...DEMO_PRESETS.default, modelContext: 4096 },
      { ...DEMO_PRESETS.quick, base: "none" as const },
    ];
    for (const { name, command } of presets.flatMap((p) => demoStages(p, "runs/demo"))) {
      // A fresh CLI for each stage: commander keeps the values of an earlier parse.
      const program = new Command();
      await registerCommands(program);
      const cli = command.path.reduce((c, sub) => c.commands.find((s) => s.name() === sub)!, program);
      const { operands, unknown } = cli.parseOptions(commandArgs(command).slice(command.path.length));
      expect(unknown, name).toEqual([]);
      expect(operands, name).toEqual(command.positional);
      const given = Object.entries(command.flags).filter(([, v]) => v !== undefined);
      expect(parseFlags(command.schema, cli.opts()), name).toMatchObject(Object.fromEntries(given));
    }
  });

  it("give RL the preset's learning rate, temperature, clip, negative scale, positive floor and format penalty, and RlConfig's defaults where it names none", () => {
    const rl = (preset: (typeof DEMO_PRESETS)["default"]) =>
      RlConfig.parse({ ...demoRlConfig(preset, 2048), tasks: "world", out: "rl" });
    const micro = rl(DEMO_PRESETS.default);
    expect(micro.update).toMatchObject({
      lr: 5e-5,
      clipHigh: 0.2,
      clipLow: 0.2,
      negativeScale: 0,
      positiveMinProb: 0.05,
    });
    expect(micro.rollout).toMatchObject({ temperature: 1, concurrency: 32, maxResponseTokens: 2048 - 640 });
    expect(micro.reward.formatWeight).toBe(0);
    expect(rl(DEMO_PRESETS.quick).reward.formatWeight).toBe(0.5);
    const defaults = RlConfig.parse({ tasks: "world", out: "rl" });
    expect(rl(DEMO_PRESETS.full).update).toEqual(defaults.update);
  });

  it("sample SFT and RL at the RL temperature, k per task, when the preset measures RL's gain so", () => {
    const sampled = (p: (typeof DEMO_PRESETS)["default"]) =>
      demoStages(p, "runs/demo").filter((s) => s.name.endsWith("-sampled"));
    expect(sampled(DEMO_PRESETS.quick)).toEqual([]);
    const stages = sampled(DEMO_PRESETS.default);
    expect(stages.map((s) => [s.name, s.dir])).toEqual([
      ["eval-sft-sampled", "eval-sft-sampled"],
      ["eval-rl-sampled", "eval-rl-sampled"],
    ]);
    for (const [i, model] of ["sft", "rl"].entries())
      expect(stages[i]!.command.flags).toMatchObject({
        model: `engine:${path.join("runs/demo", model, "last")}`,
        k: 4,
        temperature: 1,
        limit: 200,
      });
  });
});

const episode = (solved: boolean) => ({
  billedTokens: 1000,
  processedTokens: 600,
  generatedTokens: 200,
  observationTokens: 300,
  modelCalls: 3,
  toolCalls: 2,
  wallMs: 10,
  solved,
});

/** A k=1 summary of two tasks, t1 (multihop) and t2 (comparison), with the given per-task scores. */
const evalSummary = (t1: number, t2 = 0): EvalSummary => {
  const success = (scores: number[]) => {
    const pass1 = scores.reduce((a, b) => a + b, 0) / scores.length;
    const rates = { pass1, avgK: pass1, passK: pass1, bestOfKBySelfScore: pass1 };
    return { tasks: scores.length, scorerErrorTasks: 0, scorerErrors: 0, ...rates, k: 1 };
  };
  return {
    model: "coa-tiny",
    profile: "all",
    success: success([t1, t2]),
    byKind: { comparison: success([t2]), multihop: success([t1]) },
    taskScores: { t1, t2 },
    copy: { entity: { episodes: 2, copied: 1, rate: 0.5 }, value: { episodes: 1, copied: 0, rate: 0 } },
    cost: costSummary([episode(t1 > 0), episode(t2 > 0)]),
    formatErrorRate: 0.5,
    finishReasons: { answer: 2 },
  };
};

const trace = (taskId: string, reward: number): MasTrace => ({
  version: 1,
  taskId,
  question: "q",
  answers: ["a"],
  taskKind: "multihop",
  source: "world",
  driver: "expert",
  model: "expert",
  tokenizer: "coa-byte-v1",
  messages: [],
  finalAnswer: "a",
  reward,
  error: null,
  stats: {
    agentCalls: 10,
    toolCalls: 2,
    replans: 0,
    reflections: 1,
    tokensIn: 9000,
    tokensOut: 1000,
    tokensCached: 5000,
    wallMs: 5,
  },
});

describe("demo report", () => {
  it("compares the teacher with both models on the same scale and says plainly what was not reached", async () => {
    const out = await mkdtemp(path.join(tmpdir(), "coa-demo-"));
    for (const dir of ["teach-test", "eval-sft", "eval-rl", "data", "rl"]) await mkdir(path.join(out, dir));
    await writeFile(
      path.join(out, "teach-test", "traces.jsonl"),
      `${JSON.stringify(trace("t1", 1))}\n${JSON.stringify(trace("t2", 1))}\n`,
    );
    await writeFile(path.join(out, "eval-sft", "summary.json"), JSON.stringify(evalSummary(1)));
    await writeFile(path.join(out, "eval-rl", "summary.json"), JSON.stringify(evalSummary(1)));
    const guessed = sampleTrajectory("What was the occupation of Ada Brand?", [
      { steps: [{ type: "answer", text: "geologist" }] },
    ]);
    await writeFile(path.join(out, "eval-rl", "trajectories.jsonl"), `${JSON.stringify(guessed)}\n`);
    const rlStep = { success: 0, samples: 8, groups_kept: 0, groups_drawn: 4 };
    await writeFile(path.join(out, "rl", "metrics.jsonl"), `${JSON.stringify({ step: 1, ...rlStep })}\n`);
    const bpe = trainBpe(["the Kell River flows past Osterby", "Osterby and the Kell"], { vocabSize: 300 });
    await writeFile(path.join(out, "data", "tokenizer.json"), JSON.stringify(bpe.toJSON()));
    await writeFile(
      path.join(out, "data", "funnel.json"),
      JSON.stringify({ stages: [{ stage: "parse", in: 3, out: 2, dropped: { schema: 1 } }] }),
    );

    // The framework team billed twice the teacher's tokens on the same tasks, and solved one of two.
    await mkdir(path.join(out, "team-traces"));
    const framework = (t: MasTrace) => ({ ...t, stats: { ...t.stats, tokensIn: 19000, tokensCached: 9000 } });
    await writeFile(
      path.join(out, "team-traces", "traces.jsonl"),
      `${JSON.stringify(framework(trace("t1", 1)))}\n${JSON.stringify(framework(trace("t2", 0)))}\n`,
    );
    const { markdown } = await writeDemoReport(out, DEMO_PRESETS.quick, [
      { name: "world", title: "generate", seconds: 1.5 },
    ]);

    expect(markdown).toContain(
      "| Teacher MAS (expert driver) | 100.0% | 10,000 | 10,000 | 5,000 | 10.00 | 2.00 | – |",
    );
    expect(markdown).toContain("| AFM-RL (coa-tiny) | 50.0% | 1,000 | 2,000 | 1,200 | 3.00 | 2.00 | 50.0% |");
    expect(markdown).toContain("AFM-RL does **not** beat AFM-SFT");
    expect(markdown).toContain(
      "RL rollouts solved 0 of 8 episodes over 1 step; GRPO learns only from groups whose rewards differ (0 of 4 groups), so it made no update at all. AFM-RL solved 1 of 1 test episodes, answering `geologist`; with so few, check the examples below",
    );
    const learned = { success: 0.5, samples: 8, groups_kept: 3, groups_drawn: 4 };
    await writeFile(path.join(out, "rl", "metrics.jsonl"), `${JSON.stringify({ step: 1, ...learned })}\n`);
    expect((await writeDemoReport(out, DEMO_PRESETS.quick, [])).markdown).toContain(
      "(3 of 4 groups), so it had signal to learn from, yet test success did not move beyond noise.",
    );
    expect(markdown).toContain(
      "AFM-RL vs the teacher MAS: 80.0% fewer as billed (target ≥ 80%; the paper reports 84.6%); 76.0% fewer when both sides reuse a prefix cache.",
    );
    expect(markdown).toContain(
      "| Same team on @openai/agents (expert driver) | 50.0% | 20,000 | 40,000 | 22,000 | 10.00 | 2.00 | – |",
    );
    expect(markdown).toContain(
      "AFM-RL vs the same team on @openai/agents: 95.0% fewer as billed (target ≥ 80%; the paper reports 84.6%); 94.5% fewer when both sides reuse a prefix cache.",
    );
    expect(markdown).toContain(
      "| task kind | Teacher MAS (pass@1) | Framework team (pass@1) | AFM-SFT (pass@1) |",
    );
    expect(markdown).toContain(`counted with the student model's tokenizer (\`${bpe.name}\`)`);
    // The report says which shipped base the student started from, and what that base learned.
    expect(markdown).toContain(
      "the student started from the base model the package ships in models/agent-base, the shipped base mid-trained on the teacher's CoA trajectories of other worlds (201-224)",
    );
    expect(markdown).toContain(
      "RL's paired gain over SFT (avg@1 per task, on the same 2 test tasks): **+0.0 points** (95% CI +0.0 to +0.0 points); the interval includes 0, so no gain is shown. Target ≥ +5 points with the interval above 0: **not reached**.",
    );
    expect(markdown).toContain("| comparison | – | – | 0.0% of 1 | 0.0% of 1 |");
    expect(markdown).toContain("| multihop | 100.0% of 2 | 50.0% of 2 | 100.0% of 1 | 100.0% of 1 |");
    expect(markdown).toContain("| AFM-SFT (coa-tiny) | 50.0% (1 of 2) | 0.0% (0 of 1) |");
    expect(markdown).toContain("| parse | 3 | 2 | schema 1 |");
    expect(markdown).toContain("(SFT loss (train and held-out): no plot was written)");
    // The examples' gold answers come from eval's verdict (meta.eval.answers).
    expect(markdown).toContain("answer `geologist`, gold `1947`");
    expect(await readFile(path.join(out, "report.html"), "utf8")).toContain(
      "<h2>Results on the test split</h2>",
    );
  });

  it("claims an RL gain only when the paired interval excludes 0, and says what an old summary lacks", async () => {
    const out = await mkdtemp(path.join(tmpdir(), "coa-demo-"));
    for (const dir of ["teach-test", "eval-sft", "eval-rl", "data"]) await mkdir(path.join(out, dir));
    await writeFile(path.join(out, "teach-test", "traces.jsonl"), `${JSON.stringify(trace("t1", 1))}\n`);
    const tasks = Array.from({ length: 20 }, (_, i) => `t${i}`);
    const sft = { ...evalSummary(0), taskScores: Object.fromEntries(tasks.map((t) => [t, 0])) };
    const rl = { ...evalSummary(1), taskScores: Object.fromEntries(tasks.map((t, i) => [t, i % 4 ? 1 : 0])) };
    await writeFile(path.join(out, "eval-sft", "summary.json"), JSON.stringify(sft));
    await writeFile(path.join(out, "eval-rl", "summary.json"), JSON.stringify(rl));
    const { markdown } = await writeDemoReport(out, DEMO_PRESETS.quick, []);
    expect(markdown).toContain("AFM-RL beats AFM-SFT on test success");
    expect(markdown).toMatch(
      /\*\*\+75\.0 points\*\* \(95% CI \+5\d\.\d to \+9\d\.\d points\); the interval excludes 0/,
    );
    expect(markdown).toContain("with the interval above 0: reached.");

    // Where the demo also sampled both models at the RL temperature, RL's gain is read from those.
    const sampled = (scores: number[]) => {
      const s = evalSummary(0);
      return {
        ...s,
        success: { ...s.success, k: 4 },
        taskScores: Object.fromEntries(tasks.map((t, i) => [t, scores[i % 2]])),
      };
    };
    for (const [dir, s] of [
      ["eval-sft-sampled", sampled([0.25, 0.5])],
      ["eval-rl-sampled", sampled([0.5, 0.5])],
    ] as const) {
      await mkdir(path.join(out, dir));
      await writeFile(path.join(out, dir, "summary.json"), JSON.stringify(s));
    }
    const fromSampled = (await writeDemoReport(out, DEMO_PRESETS.default, [])).markdown;
    expect(fromSampled).toContain("AFM-RL beats AFM-SFT on test success");
    expect(fromSampled).toContain(
      "RL's paired gain over SFT (avg@4 per task sampled at temperature 1, on the same 20 test tasks): **+12.5 points**",
    );
    expect(fromSampled).toContain("| AFM-RL, avg@4 at temperature 1 | 0.0% |");
    expect(fromSampled).toContain("with the interval above 0: reached.");

    for (const dir of ["eval-sft-sampled", "eval-rl-sampled"])
      await rm(path.join(out, dir), { recursive: true });

    const { byKind: _k, taskScores: _s, copy: _c, ...old } = sft;
    await writeFile(path.join(out, "eval-sft", "summary.json"), JSON.stringify(old));
    const stale = (await writeDemoReport(out, DEMO_PRESETS.quick, [])).markdown;
    expect(stale).toContain(
      "RL's paired gain over SFT: per-task scores (not in this summary.json: rerun `coa eval`",
    );
    expect(stale).toContain("| AFM-SFT (coa-tiny) | (not in this summary.json");
  });
});

describe("demo --config", () => {
  it("lays known fields over the preset and refuses unknown or ill-typed ones", async () => {
    const { presetWithOverrides } = await import("../commands/demo.js");
    const dir = await mkdtemp(path.join(tmpdir(), "coa-demo-config-"));
    const file = path.join(dir, "c.json");
    await writeFile(file, JSON.stringify({ sftSteps: 2000, modelPreset: "small" }));
    const p = await presetWithOverrides(DEMO_PRESETS.default, file);
    expect([p.name, p.sftSteps, p.modelPreset, p.evalTasks]).toEqual(["default", 2000, "small", 200]);
    await writeFile(file, JSON.stringify({ sftStep: 5 }));
    await expect(presetWithOverrides(DEMO_PRESETS.default, file)).rejects.toThrow(/sftStep/);
    await writeFile(file, JSON.stringify({ sftSteps: -1 }));
    await expect(presetWithOverrides(DEMO_PRESETS.default, file)).rejects.toThrow(/sftSteps/);
  });

  it("examples/demo-plain-base.json runs the default demo from the plain base, with that student's SFT and RL rates", async () => {
    const { presetWithOverrides } = await import("../commands/demo.js");
    const file = fileURLToPath(new URL("../../../examples/demo-plain-base.json", import.meta.url));
    const p = await presetWithOverrides(DEMO_PRESETS.default, file);
    const sft = commandArgs(demoStages(p, "runs/d").find((s) => s.name === "sft")!.command);
    expect(sft[sft.indexOf("--from") + 1]).toMatch(/models\/base$/);
    expect([p.sftLr, p.sftSteps, p.rlLr]).toEqual([2e-3, 2500, 2e-4]);
  });

  it("resumes a folder only with the settings it was started with, and names those that differ", async () => {
    const { readDemoProgress } = await import("../commands/demo.js");
    const dir = await mkdtemp(path.join(tmpdir(), "coa-demo-progress-"));
    const file = path.join(dir, "stages.json");
    expect(await readDemoProgress(file, DEMO_PRESETS.quick)).toEqual([]);
    const done = [{ name: "world", title: "generate", seconds: 1 }];
    const { baseAbout: _, ...older } = { ...DEMO_PRESETS.quick, sftSteps: 250 };
    await writeFile(file, JSON.stringify({ preset: "quick", settings: older, done }));
    await expect(readDemoProgress(file, DEMO_PRESETS.quick)).rejects.toThrow(
      `was started with other settings (sftSteps 250 → ${DEMO_PRESETS.quick.sftSteps}; baseAbout unset → "the shipped base mid-trained on the te…)`,
    );
    await writeFile(file, JSON.stringify({ preset: "quick", settings: DEMO_PRESETS.quick, done }));
    expect(await readDemoProgress(file, DEMO_PRESETS.quick)).toEqual(done);
    await expect(readDemoProgress(file, DEMO_PRESETS.default)).rejects.toThrow("holds a --quick demo");
  });
});
