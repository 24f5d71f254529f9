import { mean, pct } from "../util/index.js";
import type { Driver } from "./agents.js";
import type { MasTrace } from "./trace.js";

export interface KindSummary {
  traces: number;
  success: number;
}

/** What a teach run produced, over the traces in its traces.jsonl. */
export interface TeachSummary {
  traces: number;
  /** Episodes that broke (driver down, all retries spent): not counted as wrong answers. */
  errors: number;
  /** Mean reward over the traces that did not break. */
  success: number;
  meanToolCalls: number;
  meanAgentCalls: number;
  meanTokensIn: number;
  meanTokensOut: number;
  /** Share of traces with at least one critic reflection, one re-plan, and either. */
  reflectionRate: number;
  replanRate: number;
  recoveryRate: number;
  meanWallMs: number;
  byKind: Record<string, KindSummary>;
}

const round = (x: number, digits = 3): number => Number(x.toFixed(digits));

export function summarizeTraces(traces: readonly MasTrace[]): TeachSummary {
  const scored = traces.filter((t) => t.error === null);
  const byKind: Record<string, KindSummary> = {};
  for (const t of scored) {
    byKind[t.taskKind] ??= { traces: 0, success: 0 };
    const k = byKind[t.taskKind];
    k.traces++;
    k.success += t.reward ?? 0;
  }
  for (const k of Object.values(byKind)) k.success = round(k.success / k.traces);
  const share = (pred: (t: MasTrace) => boolean) =>
    round(traces.length ? traces.filter(pred).length / traces.length : 0);
  return {
    traces: traces.length,
    errors: traces.length - scored.length,
    success: round(mean(scored.map((t) => t.reward ?? 0))),
    meanToolCalls: round(mean(traces.map((t) => t.stats.toolCalls)), 2),
    meanAgentCalls: round(mean(traces.map((t) => t.stats.agentCalls)), 2),
    meanTokensIn: Math.round(mean(traces.map((t) => t.stats.tokensIn))),
    meanTokensOut: Math.round(mean(traces.map((t) => t.stats.tokensOut))),
    reflectionRate: share((t) => t.stats.reflections > 0),
    replanRate: share((t) => t.stats.replans > 0),
    recoveryRate: share((t) => t.stats.reflections > 0 || t.stats.replans > 0),
    meanWallMs: Math.round(mean(traces.map((t) => t.stats.wallMs))),
    byKind,
  };
}

export function formatSummary(s: TeachSummary): string {
  const kinds = Object.entries(s.byKind)
    .map(([k, v]) => `${k} ${pct(v.success)} of ${v.traces}`)
    .join(", ");
  return [
    `traces ${s.traces} (errors ${s.errors}); success ${pct(s.success)}${kinds ? ` [${kinds}]` : ""}`,
    `mean per task: ${s.meanToolCalls} tool calls, ${s.meanAgentCalls} agent calls, ${s.meanTokensIn} tokens in + ${s.meanTokensOut} out, ${s.meanWallMs} ms`,
    `reflection ${pct(s.reflectionRate)}, re-plan ${pct(s.replanRate)}, either ${pct(s.recoveryRate)}`,
  ].join("\n");
}

/** report.md of a teach run: the summary, then success per task kind. */
export function teachReport(s: TeachSummary, driver: Pick<Driver, "name" | "model" | "tokenizer">): string {
  const rows = Object.entries(s.byKind).map(
    ([kind, k]) => `| ${kind} | ${k.traces} | ${(k.success * 100).toFixed(1)}% |`,
  );
  return [
    "# Teach run",
    "",
    `Driver \`${driver.name}\` (${driver.model}); tokens counted with \`${driver.tokenizer}\`.`,
    "",
    "```",
    formatSummary(s),
    "```",
    "",
    "| kind | traces | success |",
    "|---|---|---|",
    ...rows,
    "",
  ].join("\n");
}
