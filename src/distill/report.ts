import { barChartSvg, histogramSvg } from "../plot/index.js";
import type { Trajectory } from "../protocol/index.js";
import { mean } from "../util/index.js";
import { totalTokens } from "./filters.js";
import type { Drop, StageCount } from "./funnel.js";

export interface ReportInput {
  command: string;
  traceFiles: readonly string[];
  tokenizer: string;
  profile: string;
  stages: readonly StageCount[];
  drops: readonly Drop[];
  kept: readonly Trajectory[];
  outputs: readonly { path: string; records: number }[];
  /** How many drops to list by file:line (all are in drops.jsonl). */
  listDrops?: number;
}

export interface ReportFiles {
  markdown: string;
  plots: { path: string; svg: string }[];
}

const toolCallsOf = (t: Trajectory): number => Object.values(t.stats.toolCalls).reduce((a, b) => a + b, 0);

function quantile(sorted: readonly number[], q: number): number {
  if (!sorted.length) return 0;
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)]!;
}

const fixed = (x: number): string => (Number.isInteger(x) ? String(x) : x.toFixed(1));

/** `a 3, b 1`: drop reasons, most frequent first. */
export function reasonsText(dropped: Record<string, number>): string {
  return Object.entries(dropped)
    .sort((a, b) => b[1] - a[1])
    .map(([reason, n]) => `${reason} ${n}`)
    .join(", ");
}

/** The funnel as aligned plain-text rows, for the terminal. */
export function funnelTable(stages: readonly StageCount[]): string {
  const rows = [
    ["stage", "in", "out", "dropped"],
    ...stages.map((s) => [s.stage, `${s.in}`, `${s.out}`, reasonsText(s.dropped)]),
  ];
  const width = [0, 1, 2].map((c) => Math.max(...rows.map((r) => r[c]!.length)));
  return rows
    .map((r) =>
      [r[0]!.padEnd(width[0]!), r[1]!.padStart(width[1]!), r[2]!.padStart(width[2]!), r[3]]
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

/** report.md and its SVG plots: the funnel, trajectory lengths and tool calls of what was kept. */
export async function buildReport(input: ReportInput): Promise<ReportFiles> {
  const lengths = input.kept.map(totalTokens).sort((a, b) => a - b);
  const calls = input.kept.map(toolCallsOf);
  const first = input.stages[0];
  const bars = first
    ? [
        { label: "traces read", value: first.in },
        ...input.stages.map((s) => ({ label: s.stage, value: s.out })),
      ]
    : [];
  const plots = [
    {
      path: "plots/funnel.svg",
      svg: await barChartSvg(bars, {
        title: "Filter funnel (traces left after each stage)",
        xLabel: "traces",
      }),
    },
    {
      path: "plots/lengths.svg",
      svg: await histogramSvg(lengths, {
        title: "Kept trajectories: prompt + completion tokens",
        xLabel: `tokens (${input.tokenizer})`,
      }),
    },
    {
      path: "plots/tool-calls.svg",
      svg: await histogramSvg(calls, {
        title: "Kept trajectories: tool calls",
        xLabel: "tool calls",
        discrete: true,
      }),
    },
  ];
  const perTool: Record<string, number> = {};
  for (const t of input.kept)
    for (const [tool, n] of Object.entries(t.stats.toolCalls)) perTool[tool] = (perTool[tool] ?? 0) + n;
  const modelTokens = input.kept.reduce((a, t) => a + t.stats.modelTokens, 0);
  const toolTokens = input.kept.reduce((a, t) => a + t.stats.toolTokens, 0);
  const listed = input.drops.slice(0, input.listDrops ?? 30);
  const md = [
    "# Distillation report",
    "",
    `Command: \`${input.command}\``,
    "",
    `Traces: ${input.traceFiles.map((f) => `\`${f}\``).join(", ")}. Profile \`${input.profile}\`, tokenizer \`${input.tokenizer}\`.`,
    "",
    "## Filter funnel",
    "",
    "| stage | in | out | dropped (by reason) |",
    "|---|---:|---:|---|",
    ...input.stages.map((s) => `| ${s.stage} | ${s.in} | ${s.out} | ${reasonsText(s.dropped) || "—"} |`),
    "",
    "![funnel](plots/funnel.svg)",
    "",
    "## Kept trajectories",
    "",
    `${input.kept.length} trajectories.`,
    "",
    "| measure | mean | p50 | p90 | max |",
    "|---|---:|---:|---:|---:|",
    `| tokens (prompt + completion) | ${fixed(mean(lengths))} | ${quantile(lengths, 0.5)} | ${quantile(lengths, 0.9)} | ${lengths.at(-1) ?? 0} |`,
    `| tool calls | ${fixed(mean(calls))} | ${quantile(
      [...calls].sort((a, b) => a - b),
      0.5,
    )} | ${quantile(
      [...calls].sort((a, b) => a - b),
      0.9,
    )} | ${Math.max(0, ...calls)} |`,
    "",
    `Completion tokens: ${modelTokens} model-written (loss 1), ${toolTokens} observation (loss 0).`,
    `Tool calls by tool: ${
      Object.entries(perTool)
        .map(([k, v]) => `${k} ${v}`)
        .join(", ") || "none"
    }.`,
    "",
    "![lengths](plots/lengths.svg)",
    "",
    "![tool calls](plots/tool-calls.svg)",
    "",
    "## Outputs",
    "",
    "| file | records |",
    "|---|---:|",
    ...input.outputs.map((o) => `| \`${o.path}\` | ${o.records} |`),
    "",
    "## Dropped traces",
    "",
    input.drops.length
      ? `${input.drops.length} in all (every one in \`drops.jsonl\`)${listed.length < input.drops.length ? `; the first ${listed.length}` : ""}:`
      : "None.",
    "",
    ...listed.map((d) => `- \`${d.at}\` ${d.stage}/${d.reason}: ${d.detail.replace(/\s+/g, " ")}`),
    "",
  ].join("\n");
  return { markdown: md, plots };
}
