import { writeFile } from "node:fs/promises";
import path from "node:path";
import { evaluate } from "../eval/index.js";
import type { ModelClient } from "../model/index.js";
import { createToolset } from "../tools/index.js";
import type { StepProbe } from "../train/index.js";
import { findCorpus, loadTasksOrSplit, requireCorpus } from "./corpus.js";

export interface DevProbeSpec {
  /** A world folder (its dev split) or a task file. */
  tasks: string;
  limit: number;
  every: number;
  runDir: string;
  /** Results per search call; the search tool's default when absent. */
  searchTopK?: number;
  maxTurns?: number;
  maxTokensPerTurn?: number;
}

/**
 * A learning curve in task success: every `every` steps the model being trained answers the first
 * `limit` dev tasks greedily through the real runtime and tools. Each probe is an ordinary eval run
 * folder under `<run>/dev/step-N` (trajectories.jsonl, summary.json), readable with `coa view`.
 */
export async function devProbe(model: ModelClient, spec: DevProbeSpec): Promise<StepProbe> {
  const { tasks } = await loadTasksOrSplit(spec.tasks, "dev");
  const corpus = requireCorpus(await findCorpus(spec.tasks), spec.tasks, "--dev-tasks");
  const tools = createToolset({
    corpus,
    profile: "all",
    search: { provider: "local", topK: spec.searchTopK },
    crawl: { offline: true },
  });
  const chosen = tasks.slice(0, spec.limit);
  return {
    every: spec.every,
    run: async (step) => {
      const outDir = path.join(spec.runDir, "dev", `step-${String(step).padStart(6, "0")}`);
      const summary = await evaluate({
        model,
        tools,
        tasks: chosen,
        profile: "all",
        k: 1,
        outDir,
        concurrency: 8,
        sampling: { temperature: 0, maxTokensPerTurn: spec.maxTokensPerTurn },
        budget: { maxTurns: spec.maxTurns },
      });
      await writeFile(path.join(outDir, "summary.json"), `${JSON.stringify(summary, null, 2)}\n`);
      const measured: Record<`dev_${string}`, number> = { dev_success: summary.success.pass1 };
      if (summary.copy.entity.rate !== null) measured.dev_entity_copy = summary.copy.entity.rate;
      if (summary.copy.value.rate !== null) measured.dev_value_copy = summary.copy.value.rate;
      return measured;
    },
  };
}
