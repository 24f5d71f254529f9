import { readdir, stat } from "node:fs/promises";
import path from "node:path";
import { writeFileAtomic } from "../distill/atomic.js";
import type { Tokenizer } from "../model/index.js";
import type { Task } from "../tasks/index.js";
import { MAS_TRACES_FILE, type MasTrace } from "../teacher/index.js";
import { jsonlLines } from "../util/index.js";
import { GenericTrace } from "./generic.js";
import { type ImportIssue, jsonLine, type Parsed } from "./issues.js";
import { parseOpenAiAgents } from "./openai-agents.js";
import { parseOtlp } from "./otel.js";
import type { RoleTable } from "./roles.js";
import { parseRunResult } from "./run-result.js";
import { toMasTrace } from "./to-mas.js";

export const IMPORT_FORMATS = ["openai-agents", "openai-agents-run", "otel", "generic"] as const;
export type ImportFormat = (typeof IMPORT_FORMATS)[number];

export interface ImportOptions {
  /** A file, or a folder whose *.jsonl and *.json files are all read. */
  input: string;
  from: ImportFormat;
  tasks: readonly Task[];
  roles: RoleTable;
  /** Counts every model call's tokens; give the student's to compare costs with it. */
  tokenizer: Tokenizer;
  out: string;
}

export interface ImportSummary {
  files: string[];
  /** Traces found in the input. */
  found: number;
  /** Written to traces.jsonl (those without a task are not). */
  written: number;
  /** Written but marked unusable for distillation, by reason. */
  unusable: Record<string, number>;
  solved: number;
  issues: ImportIssue[];
  /** Agent names no table entry or pattern placed (see --roles). */
  guessedAgents: string[];
}

async function inputFiles(input: string): Promise<string[]> {
  const info = await stat(input).catch(() => null);
  if (!info) throw new Error(`${input}: no such file or folder`);
  if (info.isFile()) return [input];
  const names = (await readdir(input)).filter((n) => /\.jsonl?$/.test(n)).sort();
  if (!names.length) throw new Error(`${input}: no *.jsonl or *.json files in this folder`);
  return names.map((n) => path.join(input, n));
}

function parseGeneric(lines: readonly { line: number; text: string }[], file: string) {
  const traces: Parsed<GenericTrace>[] = [];
  const issues: ImportIssue[] = [];
  for (const { line, text } of lines) {
    const data = jsonLine(text, file, line, issues);
    if (data === undefined) continue;
    const parsed = GenericTrace.safeParse(data);
    if (parsed.success) traces.push({ trace: parsed.data, file, line });
    else {
      const issue = parsed.error.issues[0]!;
      const field = issue.path.join(".") || "(root)";
      issues.push({ reason: "not_a_record", file, line, detail: `${field}: ${issue.message}` });
    }
  }
  return { traces, issues };
}

const PARSERS = {
  "openai-agents": parseOpenAiAgents,
  "openai-agents-run": parseRunResult,
  otel: parseOtlp,
  generic: parseGeneric,
};

/** The user's request: the trace's question, else the first user message of the first model call. */
function questionOf(trace: GenericTrace): string | null {
  if (trace.question) return trace.question;
  const first = trace.steps.find((s) => s.type === "llm");
  if (first?.type !== "llm" || first.input === null) return null;
  if (typeof first.input === "string") return first.input;
  const user = first.input.find((m) => m.role === "user");
  return typeof user?.content === "string" ? user.content : null;
}

/**
 * `coa import`: reads a framework's traces, joins each to its task (by id, else by the question's
 * exact text), and writes `<out>/traces.jsonl` of MAS traces that `coa distill --traces` reads, plus
 * `<out>/import.json`. Bad input is counted with file and line; the rest is imported.
 */
export async function runImport(opts: ImportOptions): Promise<ImportSummary> {
  const files = await inputFiles(opts.input);
  const byId = new Map(opts.tasks.map((t) => [t.id, t]));
  const byQuestion = new Map(opts.tasks.map((t) => [t.question.trim(), t]));
  const issues: ImportIssue[] = [];
  const out: MasTrace[] = [];
  const guessed = new Set<string>();
  let found = 0;
  for (const file of files) {
    const lines: { line: number; text: string }[] = [];
    for await (const l of jsonlLines(file)) lines.push(l);
    const parsed = PARSERS[opts.from](lines, file);
    issues.push(...parsed.issues);
    for (const { trace, line } of parsed.traces) {
      found++;
      if (!trace.steps.some((s) => s.type === "llm")) {
        issues.push({
          reason: "empty_trace",
          file,
          line,
          detail: `trace ${trace.traceId} has no model call`,
        });
        continue;
      }
      const question = questionOf(trace);
      const task =
        (trace.taskId === null ? undefined : byId.get(trace.taskId)) ??
        (question === null ? undefined : byQuestion.get(question.trim()));
      if (!task) {
        const by =
          trace.taskId === null ? `question ${JSON.stringify(question?.slice(0, 80))}` : `id ${trace.taskId}`;
        issues.push({
          reason: "no_task",
          file,
          line,
          detail: `trace ${trace.traceId}: no task with this ${by}`,
        });
        continue;
      }
      const built = await toMasTrace(trace, task, {
        roles: opts.roles,
        tokenizer: opts.tokenizer,
        model: `${opts.from}:${modelOf(trace)}`,
      });
      for (const a of built.notes.guessedAgents) guessed.add(a);
      out.push(built.trace);
    }
  }
  const unusable: Record<string, number> = {};
  for (const t of out) if (t.unusable) unusable[t.unusable.reason] = (unusable[t.unusable.reason] ?? 0) + 1;
  const summary: ImportSummary = {
    files,
    found,
    written: out.length,
    unusable,
    solved: out.filter((t) => (t.reward ?? 0) >= 1).length,
    issues,
    guessedAgents: [...guessed].sort(),
  };
  await writeFileAtomic(
    path.join(opts.out, MAS_TRACES_FILE),
    out.map((t) => `${JSON.stringify(t)}\n`).join(""),
  );
  await writeFileAtomic(path.join(opts.out, "import.json"), `${JSON.stringify(summary, null, 2)}\n`);
  return summary;
}

/** The model the trace's calls name (the first one), for the record. */
function modelOf(trace: GenericTrace): string {
  const step = trace.steps.find((s) => s.type === "llm" && s.model);
  return step?.type === "llm" && step.model ? step.model : "unknown";
}
