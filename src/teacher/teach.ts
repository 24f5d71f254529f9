import { writeFile } from "node:fs/promises";
import path from "node:path";
import pLimit from "p-limit";
import type { Task } from "../tasks/index.js";
import { appendJsonl, readJsonlTolerant, repairJsonlTail } from "../util/index.js";
import type { Driver } from "./agents.js";
import { type EpisodeOptions, runEpisode, type Toolbox } from "./episode.js";
import { summarizeTraces, type TeachSummary, teachReport } from "./summary.js";
import { MAS_TRACES_FILE, MasTrace } from "./trace.js";

export interface TeachProgress {
  done: number;
  total: number;
  solved: number;
  errors: number;
}

export interface TeachOptions {
  tasks: readonly Task[];
  driver: Driver;
  /** The team's tools, or a task's own (tasks drawn from several worlds search their own corpus). */
  tools: Toolbox | ((task: Task) => Toolbox);
  /** The run folder: traces.jsonl and summary.json go here. */
  out: string;
  concurrency?: number;
  /** Only the first N tasks (the same N on a resume covers the same tasks). */
  limit?: number;
  episode?: Partial<EpisodeOptions>;
  onProgress?: (p: TeachProgress) => void;
}

export interface TeachResult {
  summary: TeachSummary;
  /** Tasks skipped because a trace for them was already in traces.jsonl. */
  resumed: number;
  /** Whether a torn last line (a killed run) was cut from traces.jsonl. */
  repaired: boolean;
  tracesFile: string;
}

/**
 * Runs the team on every task and appends one MAS trace per task to `<out>/traces.jsonl`. Resumable:
 * tasks already traced are skipped, and a torn last line left by a kill is cut first. A task whose
 * trace broke (model down) is run again; the summary counts each task's latest trace.
 */
export async function runTeach(opts: TeachOptions): Promise<TeachResult> {
  const tracesFile = path.join(opts.out, MAS_TRACES_FILE);
  const repaired = await repairJsonlTail(tracesFile);
  const { records: previous } = await readJsonlTolerant(tracesFile, MasTrace);
  const latestBefore = new Map(previous.map((t) => [t.taskId, t]));
  const traced = new Set([...latestBefore.values()].filter((t) => t.error === null).map((t) => t.taskId));
  const chosen = opts.tasks.slice(0, opts.limit ?? opts.tasks.length);
  const todo = chosen.filter((t) => !traced.has(t.id));

  const solvedBefore = chosen.filter(
    (t) => traced.has(t.id) && (latestBefore.get(t.id)!.reward ?? 0) >= 1,
  ).length;
  const progress: TeachProgress = {
    done: chosen.length - todo.length,
    total: chosen.length,
    solved: solvedBefore,
    errors: 0,
  };
  opts.onProgress?.({ ...progress });
  const limit = pLimit(Math.max(1, opts.concurrency ?? 1));
  // One append at a time: each trace is one whole line.
  let writing = Promise.resolve();
  const traces = [...previous];
  await Promise.all(
    todo.map((task) =>
      limit(async () => {
        const tools = typeof opts.tools === "function" ? opts.tools(task) : opts.tools;
        const trace = await runEpisode(task, opts.driver, tools, opts.episode);
        writing = writing.then(() => appendJsonl(tracesFile, trace));
        await writing;
        traces.push(trace);
        progress.done++;
        if (trace.error) progress.errors++;
        else if ((trace.reward ?? 0) >= 1) progress.solved++;
        opts.onProgress?.({ ...progress });
      }),
    ),
  );

  const chosenIds = new Set(chosen.map((t) => t.id));
  const latest = new Map(traces.filter((t) => chosenIds.has(t.taskId)).map((t) => [t.taskId, t]));
  const summary = summarizeTraces([...latest.values()]);
  await writeFile(path.join(opts.out, "summary.json"), `${JSON.stringify(summary, null, 2)}\n`);
  await writeFile(path.join(opts.out, "report.md"), teachReport(summary, opts.driver));
  return { summary, resumed: chosen.length - todo.length, repaired, tracesFile };
}
