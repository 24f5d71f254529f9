import { readFile } from "node:fs/promises";
import path from "node:path";
import type { z } from "zod";
import { FUNNEL_FILE, FunnelFile, NATIVE_FILE } from "../distill/index.js";
import { EVAL_SUMMARY_FILE, EVAL_TRAJECTORIES_FILE, EvalSummaryFile, EvalTrajectory } from "../eval/index.js";
import { Trajectory } from "../protocol/index.js";
import { MAS_TRACES_FILE, MasTrace } from "../teacher/index.js";
import { METRICS_FILE, RlConfig, RlStepMetrics } from "../train/index.js";
import { readJsonlTolerant } from "../util/index.js";
import { DemoProgress } from "./demo/presets.js";

/** A file in a stage's `--out` folder: its name, and the schema of the file (JSON) or of each line (JSONL). */
export interface Artifact<S extends z.ZodType = z.ZodType> {
  file: string;
  schema: S;
}

/**
 * The run artifacts: the files one stage writes and a later stage or the demo report reads. Each
 * name and schema is declared by the folder that writes it (a library writer cannot import the CLI);
 * this table is where they meet, so readers parse with the writer's schema instead of casting.
 * Two more have readers of their own: `tokenizer.json` (`TOKENIZER_FILE`, read by
 * `readTokenizerFile`) and `coa team`'s `spans.jsonl` (`TEAM_SPANS_FILE`, read by `coa import`).
 */
export const ARTIFACTS = {
  /** `coa teach` and `coa import`: one multi-agent episode per line; `coa distill` reads them. */
  masTraces: { file: MAS_TRACES_FILE, schema: MasTrace },
  /** `coa distill`: the kept trajectories, `coa train sft`'s data. */
  distilled: { file: NATIVE_FILE, schema: Trajectory },
  /** `coa distill`: how many traces each filter kept. */
  funnel: { file: FUNNEL_FILE, schema: FunnelFile },
  /** `coa demo`: the stages done and the settings they ran with; `npm run bench -- rl` reads the settings. */
  demoProgress: { file: "stages.json", schema: DemoProgress },
  /** `coa demo`: RL's rollout limits, from the SFT checkpoint's context; `coa train rl --config` reads it (flags fill the rest). */
  rlConfig: { file: "rl-config.json", schema: RlConfig.partial() },
  /** `coa train rl`: one GRPO step per line. */
  rlMetrics: { file: METRICS_FILE, schema: RlStepMetrics },
  /** `coa eval`: k scored samples per task. */
  evalTrajectories: { file: EVAL_TRAJECTORIES_FILE, schema: EvalTrajectory },
  /** `coa eval`: success and cost; older files lack the per-kind, per-task and copy fields. */
  evalSummary: { file: EVAL_SUMMARY_FILE, schema: EvalSummaryFile },
} as const satisfies Record<string, Artifact>;

/** A JSON artifact in `dir`, checked against its schema; a file that does not match is an error that names it. */
export async function readArtifact<S extends z.ZodType>(
  dir: string,
  artifact: Artifact<S>,
): Promise<z.output<S>> {
  const file = path.join(dir, artifact.file);
  const parsed = artifact.schema.safeParse(JSON.parse(await readFile(file, "utf8")));
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`${file}: ${issue.path.join(".") || "(top level)"}: ${issue.message}`);
  }
  return parsed.data;
}

/** The records of a JSONL artifact in `dir`: a missing file has none, a line that does not parse is skipped. */
export async function readRecords<T>(dir: string, artifact: Artifact<z.ZodType<T>>): Promise<T[]> {
  return (await readJsonlTolerant(path.join(dir, artifact.file), artifact.schema)).records;
}
