import { pct } from "../util/index.js";
import { type CostSummary, costSummary, type EpisodeCost, reduction } from "./metrics.js";
import type { Report } from "./report.js";

/** One system's episodes, each with its task. */
export interface CostSystem {
  name: string;
  episodes: { taskId: string; cost: EpisodeCost }[];
}

export interface CostComparison {
  systems: string[];
  /** Tasks every system has an episode of: the only ones compared. */
  tasks: number;
  /** Per system, its tasks that some other system lacks (left out of every figure). */
  leftOut: Record<string, number>;
  /** Per task kind, then `all`: each system's cost on the shared tasks of that kind. */
  byKind: { kind: string; tasks: number; costs: Record<string, CostSummary> }[];
}

/**
 * The systems' costs on the tasks they all ran (a task's first episode in each), per task kind and
 * overall, so that no system is measured on easier or fewer tasks than another.
 */
export function compareCosts(
  systems: readonly CostSystem[],
  kindOf: (taskId: string) => string,
): CostComparison {
  const firsts = systems.map((s) => {
    const byTask = new Map<string, EpisodeCost>();
    for (const e of s.episodes) if (!byTask.has(e.taskId)) byTask.set(e.taskId, e.cost);
    return byTask;
  });
  const shared = [...(firsts[0]?.keys() ?? [])].filter((id) => firsts.every((m) => m.has(id)));
  const kinds = [...new Set(shared.map(kindOf))].sort();
  const costsOf = (ids: string[]) =>
    Object.fromEntries(systems.map((s, i) => [s.name, costSummary(ids.map((id) => firsts[i]!.get(id)!))]));
  return {
    systems: systems.map((s) => s.name),
    tasks: shared.length,
    leftOut: Object.fromEntries(systems.map((s, i) => [s.name, firsts[i]!.size - shared.length])),
    byKind: [
      ...kinds.map((kind) => {
        const ids = shared.filter((id) => kindOf(id) === kind);
        return { kind, tasks: ids.length, costs: costsOf(ids) };
      }),
      { kind: "all", tasks: shared.length, costs: costsOf(shared) },
    ],
  };
}

const num = (x: number) => Math.round(x).toLocaleString("en-US");

/**
 * The comparison as a report: one row per kind and system, billed and prefix-cached tokens per task,
 * and how much less the last system (the CoA trajectory) spends than each other one.
 */
export function costComparisonReport(c: CostComparison, command: string, tokenizer: string): Report {
  const last = c.systems.at(-1)!;
  const rows = c.byKind.flatMap(({ kind, tasks, costs }) =>
    c.systems.map((name) => {
      const s = costs[name]!;
      const own = name === last;
      const vs = costs[last]!;
      return [
        kind,
        tasks,
        name,
        num(s.billedTokensPerTask),
        num(s.processedTokensPerTask),
        s.modelCallsPerTask.toFixed(1),
        own ? "" : pct(reduction(vs.billedTokensPerTask, s.billedTokensPerTask)),
        own ? "" : pct(reduction(vs.processedTokensPerTask, s.processedTokensPerTask)),
      ];
    }),
  );
  const leftOut = Object.entries(c.leftOut)
    .filter(([, n]) => n > 0)
    .map(([name, n]) => `${name} ${n}`);
  return {
    title: "Tokens per task: multi-agent systems vs the CoA trajectory",
    sections: [
      {
        title: `${c.tasks} shared tasks, counted in ${tokenizer}`,
        blocks: [
          { kind: "code", text: command },
          {
            kind: "text",
            text: `Billed: every model call's input plus its output. Cached: what a server with a prefix cache computes. ${leftOut.length ? `Tasks not run or not kept by every system, left out: ${leftOut.join(", ")}.` : "Every system ran every task."}`,
          },
          {
            kind: "table",
            header: [
              "kind",
              "tasks",
              "system",
              "billed/task",
              "cached/task",
              "model calls/task",
              `${last} saves, billed`,
              `${last} saves, cached`,
            ],
            rows,
          },
        ],
      },
    ],
  };
}
