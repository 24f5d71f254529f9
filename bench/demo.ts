// The product's targets (issue 15): runs `coa demo` (quick unless COA_BENCH_DEMO names another
// preset) in a fresh folder and prints what the student reached against each target. Minutes, not
// seconds: `npm run bench -- demo`.

import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ARTIFACTS, readArtifact, readRecords } from "../src/cli/artifacts.js";
import {
  RL_GAIN_TARGET,
  reachesRlGainTarget,
  readSampledEvals,
  rlPairedGain,
} from "../src/cli/demo/report.js";
import type { EvalSummaryFile } from "../src/eval/index.js";
import { pct as percent } from "../src/util/index.js";
import { runCoa } from "./coa-process.js";

/** The issue's targets per preset: AFM-SFT pass@1 and the RL gain (points, paired, avg@k). */
export const TARGETS: Record<string, { sft: number; rlGain: number | null; minutes: number }> = {
  quick: { sft: 0.3, rlGain: null, minutes: 5 },
  default: { sft: 0.6, rlGain: RL_GAIN_TARGET, minutes: 30 },
};

/** RL's paired gain over SFT (avg@k per task on the same tasks) and the line that prints it. */
export function rlGain(sft: EvalSummaryFile, rl: EvalSummaryFile) {
  const gain = rlPairedGain(sft, rl);
  if (!gain) return null;
  const points = (x: number | null) => (x === null ? "–" : (100 * x).toFixed(1));
  return {
    ...gain,
    line: `RL − SFT, paired over ${gain.tasks} tasks (avg@${rl.success.k}): ${points(gain.mean)} points, 95% CI [${points(gain.low)}, ${points(gain.high)}]`,
  };
}

const pct = (x: number | null | undefined) => (x === null || x === undefined ? "–" : percent(x));

export async function run(): Promise<void> {
  const preset = process.env.COA_BENCH_DEMO ?? "quick";
  const out = await mkdtemp(join(tmpdir(), `coa-bench-demo-${preset}-`));
  const args = ["demo", ...(preset === "default" ? [] : [`--${preset}`]), "--out", out];
  const { command, code, minutes, output } = await runCoa(args);
  console.log(`command: ${command} (exit ${code}, ${minutes.toFixed(1)} min)`);
  if (code !== 0) {
    console.log(output.slice(-2000));
    return;
  }
  const sft = await readArtifact(join(out, "eval-sft"), ARTIFACTS.evalSummary);
  const rl = await readArtifact(join(out, "eval-rl"), ARTIFACTS.evalSummary);
  const rlSteps = await readRecords(join(out, "rl"), ARTIFACTS.rlMetrics);
  const updates = rlSteps.reduce((a, m) => a + m.updates, 0);
  const target = TARGETS[preset];
  for (const [name, s] of [
    ["AFM-SFT", sft],
    ["AFM-RL", rl],
  ] as const)
    console.log(
      `${name} (${s.model}): pass@1 ${pct(s.success.pass1)} of ${s.success.tasks} test tasks, avg@${s.success.k} ${pct(s.success.avgK)}; entity copy ${pct(s.copy?.entity.rate)}, value copy ${pct(s.copy?.value.rate)}`,
    );
  console.log(`RL: ${rlSteps.length} steps, ${updates} updates`);
  // RL's gain on the policy it trained: from the evaluations sampled at the RL temperature if the preset ran them.
  const sampled = await readSampledEvals(out);
  if (sampled)
    for (const [name, s] of [
      ["AFM-SFT", sampled.sft],
      ["AFM-RL", sampled.rl],
    ] as const)
      console.log(
        `${name} sampled: avg@${s.success.k} ${pct(s.success.avgK)}, pass@${s.success.k} ${pct(s.success.passK)}`,
      );
  const gain = sampled ? rlGain(sampled.sft, sampled.rl) : rlGain(sft, rl);
  if (gain) console.log(gain.line);
  if (target)
    console.log(
      `targets: AFM-SFT ≥ ${pct(target.sft)} (${sft.success.pass1 >= target.sft ? "met" : "not met"})` +
        `${target.rlGain === null ? `; RL makes an update (${updates > 0 ? "met" : "not met"})` : `; RL ≥ SFT + ${100 * target.rlGain} points, interval above 0 (${gain && reachesRlGainTarget(gain) ? "met" : "not met"})`}` +
        `; ≤ ${target.minutes} min (${minutes <= target.minutes ? "met" : "not met"})`,
    );
  console.log(`report: ${join(out, "report.md")}`);
}
