import path from "node:path";
import pLimit from "p-limit";
import { z } from "zod";
import type { ModelClient } from "../model/index.js";
import { completionIds, ProfileName, parseCoa, type ToolTag, trajectorySchema } from "../protocol/index.js";
import type { ScoreContext } from "../rewards/index.js";
import { type Budget, type RunOptions, ranToolCalls, runAgent, type Sampling } from "../runtime/index.js";
import { hashString, type Task } from "../tasks/index.js";
import type { Tool } from "../tools/index.js";
import { appendJsonl, readJsonlTolerant, repairJsonlTail } from "../util/index.js";
import { scoreDialectAnswer } from "./answer-score.js";
import { CopyAccuracy, type CopyEpisode, copyAccuracy, copyTargets } from "./copy.js";
import { trajectoryCost } from "./costs.js";
import {
  CostSummary,
  costSummary,
  SuccessMetrics,
  successByKind,
  successMetrics,
  type TaskSamples,
  taskScores,
} from "./metrics.js";

/** What eval records about one sample, kept in Trajectory.meta.eval (the gold answers only here). */
export const SampleVerdict = z.object({
  sample: z.number().int().nonnegative(),
  correct: z.boolean(),
  error: z.string().nullable(),
  scorer: z.string(),
  selfScore: z.number().nullable(),
  answers: z.array(z.string()),
});
export type SampleVerdict = z.infer<typeof SampleVerdict>;

/** The file an eval run appends its samples to, in its out folder. */
export const EVAL_TRAJECTORIES_FILE = "trajectories.jsonl";

/** A trajectory as eval writes it: the verdict on the sample in `meta.eval`. Reads v1 files too. */
export const EvalTrajectory = trajectorySchema({ eval: SampleVerdict });
export type EvalTrajectory = z.infer<typeof EvalTrajectory>;

export interface EvalOptions {
  model: ModelClient;
  // biome-ignore lint/suspicious/noExplicitAny: each tool has its own argument type
  tools: ReadonlyMap<ToolTag, Tool<any>>;
  tasks: readonly Task[];
  profile: ProfileName;
  /** Samples per task. */
  k: number;
  /** Folder for trajectories.jsonl and summary.json; an interrupted run resumes from it. */
  outDir: string;
  concurrency?: number;
  sampling?: Partial<Sampling>;
  budget?: Partial<Budget>;
  /** Base of the per-sample seeds: sample j of task i always gets the same seed. */
  seed?: number;
  score?: ScoreContext;
  /** The protocol rules and system prompt the model was trained with (default: coa's). */
  prompt?: Pick<RunOptions, "dialect" | "systemPrompt">;
  onProgress?: (p: { done: number; total: number; correct: number }) => void;
}

/** What eval writes to summary.json: success, copy accuracy and cost of one model on one task set. */
export const EvalSummary = z.object({
  model: z.string(),
  profile: ProfileName,
  success: SuccessMetrics,
  /** Success of each task kind (`task.kind`), with its own task count. */
  byKind: z.record(z.string(), SuccessMetrics),
  /** avg@k of each task by id: what `pairedDifference` pairs two runs on. */
  taskScores: z.record(z.string(), z.number()),
  /** World tasks: names copied verbatim into the first and second tool calls (src/eval/copy.ts). */
  copy: CopyAccuracy,
  cost: CostSummary,
  formatErrorRate: z.number(),
  finishReasons: z.record(z.string(), z.number()),
});
export type EvalSummary = z.infer<typeof EvalSummary>;

/** The file an eval run writes its summary to, in its out folder. */
export const EVAL_SUMMARY_FILE = "summary.json";

/** summary.json as found on disk: one written before `byKind`, `taskScores` and `copy` existed lacks them. */
export const EvalSummaryFile = EvalSummary.partial({ byKind: true, taskScores: true, copy: true });
export type EvalSummaryFile = z.infer<typeof EvalSummaryFile>;

/** The model's last double-check score in its own words, for best-of-k selection. */
function lastSelfScore(text: string): number | null {
  const checks = parseCoa(text).steps.filter((s) => s.type === "double_check");
  const last = checks.at(-1);
  return last && last.type === "double_check" ? last.score : null;
}

const sampleKey = (taskId: string, sample: number) => `${taskId}#${sample}`;

/** Deterministic 31-bit seed per (task, sample), so reruns and resumes sample the same way. */
const sampleSeed = (base: number, taskId: string, sample: number): number =>
  hashString(`${base}:${taskId}#${sample}`) & 0x7fffffff;

/**
 * Runs every task k times through the real runtime, scores each answer, and appends each sample to
 * `<outDir>/trajectories.jsonl` as it finishes. Samples already there are not run again.
 */
export async function evaluate(opts: EvalOptions): Promise<EvalSummary> {
  const file = path.join(opts.outDir, EVAL_TRAJECTORIES_FILE);
  await repairJsonlTail(file);
  const previous = await readJsonlTolerant(file, EvalTrajectory);
  const done = new Map(previous.records.map((t) => [sampleKey(t.taskId ?? "", t.meta.eval.sample), t]));

  const jobs = opts.tasks.flatMap((task) =>
    Array.from({ length: opts.k }, (_, sample) => ({ task, sample })),
  );
  const limit = pLimit(opts.concurrency ?? 4);
  let finished = jobs.filter((j) => done.has(sampleKey(j.task.id, j.sample))).length;
  let correct = [...done.values()].filter((t) => t.meta.eval.correct).length;
  opts.onProgress?.({ done: finished, total: jobs.length, correct });

  await Promise.all(
    jobs
      .filter((j) => !done.has(sampleKey(j.task.id, j.sample)))
      .map(({ task, sample }) =>
        limit(async () => {
          const trajectory = await runAgent({
            model: opts.model,
            tools: opts.tools,
            profile: opts.profile,
            question: task.question,
            taskId: task.id,
            ...opts.prompt,
            budget: opts.budget,
            sampling: { ...opts.sampling, seed: sampleSeed(opts.seed ?? 0, task.id, sample) },
            origin: "eval",
          });
          const score = await scoreDialectAnswer(task, trajectory.answer, opts.prompt?.dialect, opts.score);
          const text = await opts.model.detokenize(completionIds(trajectory));
          const verdict: SampleVerdict = {
            sample,
            correct: score.correct,
            error: score.error,
            scorer: score.scorer,
            selfScore: lastSelfScore(text),
            answers: task.answers,
          };
          const record: EvalTrajectory = {
            ...trajectory,
            reward: score.score,
            meta: { ...trajectory.meta, eval: verdict },
          };
          await appendJsonl(file, record);
          done.set(sampleKey(task.id, sample), record);
          finished++;
          if (verdict.correct) correct++;
          opts.onProgress?.({ done: finished, total: jobs.length, correct });
        }),
      ),
  );

  const records = jobs.map((j) => done.get(sampleKey(j.task.id, j.sample))!);
  return summarizeEval(records, opts);
}

/** Each episode's copy targets and the arguments of the (at most two) tool calls they are checked in. */
async function copyEpisodes(records: EvalTrajectory[], opts: EvalOptions): Promise<CopyEpisode[]> {
  const tasks = new Map(opts.tasks.map((t) => [t.id, t]));
  const out: CopyEpisode[] = [];
  for (const t of records) {
    const task = tasks.get(t.taskId ?? "");
    const targets = task ? copyTargets(task) : null;
    if (!targets || (targets.entity === null && targets.value === null)) continue;
    const calls = await ranToolCalls(t, (ids) => opts.model.detokenize(ids), 2);
    out.push({ targets, toolArgs: calls.map((c) => c.args) });
  }
  return out;
}

async function summarizeEval(records: EvalTrajectory[], opts: EvalOptions): Promise<EvalSummary> {
  const kinds = new Map<string, string>(opts.tasks.map((t) => [t.id, t.kind]));
  const byTask = new Map<string, TaskSamples & { kind: string }>();
  for (const t of records) {
    const id = t.taskId ?? "";
    const entry = byTask.get(id) ?? { taskId: id, kind: kinds.get(id) ?? "unknown", samples: [] };
    entry.samples.push({
      correct: t.meta.eval.correct,
      error: t.meta.eval.error,
      selfScore: t.meta.eval.selfScore,
    });
    byTask.set(id, entry);
  }
  const finishReasons: Record<string, number> = {};
  for (const t of records) finishReasons[t.finishReason] = (finishReasons[t.finishReason] ?? 0) + 1;
  const withFormatErrors = records.filter((t) => t.stats.formatErrors > 0).length;
  return {
    model: opts.model.name,
    profile: opts.profile,
    success: successMetrics([...byTask.values()]),
    byKind: successByKind([...byTask.values()]),
    taskScores: taskScores([...byTask.values()]),
    copy: copyAccuracy(await copyEpisodes(records, opts)),
    cost: costSummary(records.map((t) => trajectoryCost(t, t.meta.eval.correct))),
    formatErrorRate: records.length ? withFormatErrors / records.length : 0,
    finishReasons,
  };
}
