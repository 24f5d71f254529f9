import path from "node:path";
import {
  ByteTokenizer,
  TOKENIZER_FILE,
  type Tokenizer,
  type TrainBpeOptions,
  trainBpe,
} from "../model/index.js";
import { type ProfileName, renderPrompt, type Trajectory } from "../protocol/index.js";
import { writeFileAtomic } from "./atomic.js";
import { segmentTexts } from "./build.js";
import type { DistillConfig } from "./config.js";
import { convertTrace } from "./convert.js";
import { EXPORTERS, type ExportFormat, type TaskRow } from "./export/index.js";
import {
  balanceStage,
  budgetStage,
  correctnessStage,
  dedupStage,
  formatStage,
  lengthStage,
  qualityStage,
  type TraceItem,
} from "./filters.js";
import { type Drop, FUNNEL_FILE, Funnel, type StageCount } from "./funnel.js";
import { findTraceFiles, readTraceLines, type TraceLine } from "./read.js";
import { buildReport } from "./report.js";

export interface DistillOptions {
  /** A trace JSONL file or a folder of them (a `coa teach` run). */
  traces: string;
  out: string;
  formats: readonly ExportFormat[];
  config: DistillConfig;
  /**
   * The target model's tokenizer (default: the engine's byte tokenizer), or `{ train }` to learn a
   * BPE from the correct traces' CoA text first. Either way it is written to `tokenizer.json`.
   */
  tokenizer?: Tokenizer | { train: TrainBpeOptions };
  /** Split name in RL rows (default "train"). */
  split?: string;
  /** Shown in report.md. */
  command?: string;
  /** Called every few hundred traces read. */
  onRead?: (lines: number) => void;
}

export interface DistillResult {
  stages: StageCount[];
  drops: Drop[];
  /** The tokenizer of every kept trajectory (trained here when asked to). */
  tokenizer: Tokenizer;
  kept: Trajectory[];
  tasks: number;
  /** Every file written, relative to `out`. */
  files: { path: string; records: number }[];
}

/** The text a model trained on these traces reads and writes: prompts, turns and observations. */
function* coaTexts(items: readonly TraceItem[], profile: ProfileName): Generator<string> {
  for (const { trace } of items) {
    const converted = convertTrace(trace, profile);
    if (!converted.ok) continue;
    yield renderPrompt({ profile, question: trace.question });
    for (const segment of segmentTexts(converted.pieces)) yield segment.text;
  }
}

/** Tasks in first-seen order, one per task id, from every readable trace (RL needs no teacher success). */
function uniqueTasks(items: readonly TraceItem[]): TaskRow[] {
  const seen = new Map<string, TaskRow>();
  for (const { trace } of items) {
    if (seen.has(trace.taskId)) continue;
    const { taskId, question, answers, source, taskKind } = trace;
    seen.set(taskId, { taskId, question, answers, source, taskKind });
  }
  return [...seen.values()];
}

/**
 * The whole `coa distill` job: read traces, run the filter funnel, write the requested exports,
 * `drops.jsonl`, `funnel.json` and `report.md` with plots. Bad traces are counted and listed,
 * never fatal; every file is written atomically.
 */
export async function runDistill(opts: DistillOptions): Promise<DistillResult> {
  const cfg = opts.config;
  const traceFiles = await findTraceFiles(opts.traces);
  const lines: TraceLine[] = [];
  for await (const line of readTraceLines(traceFiles)) {
    lines.push(line);
    if (lines.length % 500 === 0) opts.onRead?.(lines.length);
  }
  opts.onRead?.(lines.length);

  const funnel = new Funnel();
  const read = funnel.record<TraceItem>(
    "parse",
    lines.map((l) =>
      l.ok
        ? { ok: true, value: { ref: l.ref, taskId: l.trace.taskId, trace: l.trace }, ref: l.ref }
        : { ok: false, reason: l.reason, detail: l.detail, ref: l.ref, taskId: l.taskId },
    ),
  );
  const correct = funnel.apply(correctnessStage(cfg.correctness), read);
  const wanted = opts.tokenizer ?? new ByteTokenizer();
  const tokenizer = "train" in wanted ? trainBpe(coaTexts(correct, cfg.profile), wanted.train) : wanted;
  let candidates = funnel.apply(formatStage({ profile: cfg.profile, tokenizer }), correct);
  for (const stage of [
    budgetStage(cfg.budget),
    lengthStage(cfg.length),
    qualityStage(cfg.quality, cfg.profile),
    dedupStage(cfg.dedup),
    balanceStage(cfg.balance),
  ])
    candidates = funnel.apply(stage, candidates);
  const kept = candidates.map((c) => c.trajectory);
  const tasks = uniqueTasks(read);

  const input = { trajectories: kept, tasks, tokenizer, profile: cfg.profile, split: opts.split ?? "train" };
  const exported = opts.formats.flatMap((f) => EXPORTERS[f](input));
  const side = [
    {
      path: "drops.jsonl",
      content: funnel.drops.map((d) => `${JSON.stringify(d)}\n`).join(""),
      records: funnel.drops.length,
    },
    {
      path: TOKENIZER_FILE,
      content: `${JSON.stringify(tokenizer)}\n`,
      records: 1,
    },
    {
      path: FUNNEL_FILE,
      content: `${JSON.stringify({ stages: funnel.stages, config: cfg }, null, 2)}\n`,
      records: funnel.stages.length,
    },
  ];
  const outputs = [...exported, ...side];
  const report = await buildReport({
    command: opts.command ?? "coa distill",
    traceFiles,
    tokenizer: tokenizer.name,
    profile: cfg.profile,
    stages: funnel.stages,
    drops: funnel.drops,
    kept,
    outputs: outputs.map(({ path: p, records }) => ({ path: p, records })),
  });
  const files = [
    ...outputs,
    ...report.plots.map((p) => ({ path: p.path, content: p.svg, records: 1 })),
    { path: "report.md", content: report.markdown, records: 1 },
  ];
  for (const f of files) await writeFileAtomic(path.join(opts.out, f.path), f.content);
  return {
    stages: funnel.stages,
    drops: funnel.drops,
    tokenizer,
    kept,
    tasks: tasks.length,
    files: files.map(({ path: p, records }) => ({ path: p, records })),
  };
}
