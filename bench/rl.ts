// RL's gain on the demo's own student (issue 15, "RL that helps"), beyond what the 30-minute demo
// can afford: from a finished `coa demo` folder, GRPO with the demo's RL config for more steps, then
// SFT and RL each answer the demo's test tasks k times at the RL temperature (SFT's answers are the
// demo's own sampled evaluation when it ran one with this k), and the paired gain prints with its 95%
// interval. `COA_BENCH_RL_DEMO=runs/demo npm run bench -- rl` (about 12 min on 2 cores with the
// defaults); COA_BENCH_RL_STEPS (60) and COA_BENCH_RL_K (4) set the budget.

import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ARTIFACTS, readArtifact } from "../src/cli/artifacts.js";
import { commandArgs } from "../src/cli/command-args.js";
import { DemoPreset } from "../src/cli/demo/presets.js";
import { RL_GAIN_TARGET, reachesRlGainTarget } from "../src/cli/demo/report.js";
import {
  demoEvalCommand,
  demoRlCommand,
  demoRlTemperature,
  SAMPLED_EVAL_DIRS,
} from "../src/cli/demo/stages.js";
import { LAST_LINK } from "../src/train/index.js";
import { pct } from "../src/util/index.js";
import { runCoa } from "./coa-process.js";
import { rlGain } from "./demo.js";

export async function run(): Promise<void> {
  const demo = process.env.COA_BENCH_RL_DEMO;
  if (!demo) {
    console.log("skipped: set COA_BENCH_RL_DEMO to a finished demo folder (npx coa demo --out runs/demo)");
    return;
  }
  const steps = Number(process.env.COA_BENCH_RL_STEPS ?? 60);
  const k = Number(process.env.COA_BENCH_RL_K ?? 4);
  const progress = await readArtifact(demo, ARTIFACTS.demoProgress);
  if (!progress.settings)
    throw new Error(
      `${demo}: its ${ARTIFACTS.demoProgress.file} names no settings (an older coa demo); run the demo again`,
    );
  const preset = DemoPreset.parse(progress.settings);
  // The policy RL improves is the one it samples from: evaluate at that temperature.
  const temperature = demoRlTemperature(preset);
  // The demo already sampled its SFT student so when its rlEvalK is this k (same seeds, same numbers).
  const sftEval = preset.rlEvalK === k ? join(demo, SAMPLED_EVAL_DIRS.sft) : null;
  if (sftEval) console.log(`AFM-SFT's sampled answers: the demo's own, ${sftEval}`);
  const out = await mkdtemp(join(tmpdir(), "coa-bench-rl-"));
  const evaluate = (model: string, dir: string) =>
    demoEvalCommand(preset, demo, { model: join(model, LAST_LINK), out: dir, k, temperature });
  const commands = [
    demoRlCommand(preset, demo, { steps, out: join(out, "rl") }),
    ...(sftEval ? [] : [evaluate(join(demo, "sft"), join(out, "eval-sft"))]),
    evaluate(join(out, "rl"), join(out, "eval-rl")),
  ];
  for (const command of commands) {
    // Each takes minutes; say which one is running before it does.
    const args = commandArgs(command);
    console.log(`command: coa ${args.join(" ")}`);
    const ran = await runCoa(args);
    console.log(`  exit ${ran.code}, ${ran.minutes.toFixed(1)} min`);
    if (ran.code !== 0) {
      console.log(ran.output.slice(-2000));
      return;
    }
  }
  const sft = await readArtifact(sftEval ?? join(out, "eval-sft"), ARTIFACTS.evalSummary);
  const rl = await readArtifact(join(out, "eval-rl"), ARTIFACTS.evalSummary);
  for (const [name, s] of [
    ["AFM-SFT", sft],
    ["AFM-RL", rl],
  ] as const)
    console.log(
      `${name}: avg@${k} ${pct(s.success.avgK)} at temperature ${temperature} on ${s.success.tasks} test tasks, pass@${k} ${pct(s.success.passK)}, format errors ${pct(s.formatErrorRate)}`,
    );
  const gain = rlGain(sft, rl);
  if (!gain) return;
  console.log(
    `${gain.line}; target ≥ +${100 * RL_GAIN_TARGET} points with the interval above 0: ${reachesRlGainTarget(gain) ? "met" : "not met"}`,
  );
  console.log(`runs: ${out}`);
}
