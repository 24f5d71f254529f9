import { z } from "zod";
import type { GenericTrace } from "./generic.js";
import { type ImportIssue, jsonLine, type Parsed } from "./issues.js";
import { type SpanRecord, tracesFromSpans } from "./span-tree.js";

/** A trace record, as `Trace.toJSON()` writes it. */
const TraceRecord = z.object({
  object: z.literal("trace"),
  id: z.string(),
  workflow_name: z.string().nullish(),
  metadata: z.record(z.string(), z.unknown()).nullish(),
});

/** A span record, as `Span.toJSON()` writes it. */
const SpanLine = z.object({
  object: z.literal("trace.span"),
  id: z.string(),
  trace_id: z.string(),
  parent_id: z.string().nullable(),
  started_at: z.string().nullable(),
  ended_at: z.string().nullable(),
  span_data: z.object({ type: z.string() }).passthrough(),
  error: z.object({ message: z.string() }).passthrough().nullable(),
});

/**
 * Traces from the JSONL a JsonlTraceProcessor writes (trace and span records, in any order, from
 * any number of runs). Spans are ordered by start time, whatever order they were written in.
 */
export function parseOpenAiAgents(
  lines: readonly { line: number; text: string }[],
  file: string,
): { traces: Parsed<GenericTrace>[]; issues: ImportIssue[] } {
  const issues: ImportIssue[] = [];
  const meta = new Map<string, { line: number; metadata: Record<string, unknown> }>();
  const spans = new Map<string, SpanRecord[]>();
  for (const { line, text } of lines) {
    const data = jsonLine(text, file, line, issues);
    if (data === undefined) continue;
    const trace = TraceRecord.safeParse(data);
    if (trace.success) {
      meta.set(trace.data.id, { line, metadata: trace.data.metadata ?? {} });
      continue;
    }
    const span = SpanLine.safeParse(data);
    if (!span.success) {
      issues.push({ reason: "not_a_record", file, line, detail: "neither a trace nor a span record" });
      continue;
    }
    const list = spans.get(span.data.trace_id) ?? [];
    list.push({ ...span.data, line });
    spans.set(span.data.trace_id, list);
  }

  const traces = tracesFromSpans(
    spans,
    file,
    issues,
    (id) => {
      const taskId = meta.get(id)?.metadata.task_id;
      return typeof taskId === "string" ? taskId : null;
    },
    (id) => meta.get(id)?.line ?? Number.POSITIVE_INFINITY,
  );
  return { traces, issues };
}
