import { z } from "zod";
import type { GenericTrace } from "./generic.js";
import type { ImportIssue, Parsed } from "./issues.js";
import { type SpanRecord, tracesFromSpans } from "./span-tree.js";

/** An OTLP/JSON attribute value (strings, numbers, booleans; arrays and maps as JSON). */
const AnyValue = z
  .object({
    stringValue: z.string().optional(),
    intValue: z.union([z.string(), z.number()]).optional(),
    doubleValue: z.number().optional(),
    boolValue: z.boolean().optional(),
  })
  .passthrough();

const OtlpSpan = z.object({
  traceId: z.string(),
  spanId: z.string(),
  parentSpanId: z.string().optional(),
  name: z.string(),
  startTimeUnixNano: z.union([z.string(), z.number()]).optional(),
  endTimeUnixNano: z.union([z.string(), z.number()]).optional(),
  attributes: z.array(z.object({ key: z.string(), value: AnyValue })).default([]),
  status: z.object({ code: z.number().optional(), message: z.string().optional() }).optional(),
});
type OtlpSpan = z.infer<typeof OtlpSpan>;

/** An OTLP/JSON export: `{ resourceSpans: [{ scopeSpans: [{ spans: […] }] }] }`. */
const OtlpDocument = z.object({
  resourceSpans: z.array(
    z.object({ scopeSpans: z.array(z.object({ spans: z.array(z.unknown()).default([]) })).default([]) }),
  ),
});

function attrs(span: OtlpSpan): Map<string, string | number | boolean> {
  const out = new Map<string, string | number | boolean>();
  for (const { key, value } of span.attributes) {
    const v = value.stringValue ?? value.doubleValue ?? value.boolValue ?? value.intValue;
    if (v !== undefined) out.set(key, typeof value.intValue === "string" ? Number(value.intValue) : v);
  }
  return out;
}

type Part = { type?: string; content?: unknown; name?: string; arguments?: unknown; response?: unknown };
type Message = { role?: string; parts?: Part[]; content?: unknown };

const asText = (v: unknown): string => (typeof v === "string" ? v : v === undefined ? "" : JSON.stringify(v));

/** GenAI messages (`gen_ai.input.messages`: role + parts) as chat items the span walk reads. */
function items(json: unknown): Record<string, unknown>[] | null {
  if (typeof json !== "string") return null;
  let messages: Message[];
  try {
    messages = JSON.parse(json) as Message[];
  } catch {
    return null;
  }
  if (!Array.isArray(messages)) return null;
  return messages.flatMap((m) => {
    if (!m.parts) return [{ role: m.role, content: asText(m.content) }];
    return m.parts.map((p) => {
      if (p.type === "tool_call")
        return { type: "function_call", name: p.name, arguments: asText(p.arguments) };
      if (p.type === "tool_call_response")
        return { type: "function_call_output", output: asText(p.response) };
      return { role: m.role, content: asText(p.content) };
    });
  });
}

const iso = (nanos: string | number | undefined): string | null =>
  nanos === undefined ? null : new Date(Number(BigInt(nanos) / 1_000_000n)).toISOString();

/** A GenAI span in the span walk's shape; any other span becomes a pass-through one. */
function toRecord(span: OtlpSpan, line: number): SpanRecord {
  const a = attrs(span);
  const op = String(a.get("gen_ai.operation.name") ?? span.name.split(" ")[0]);
  const base = {
    id: span.spanId,
    trace_id: span.traceId,
    parent_id: span.parentSpanId || null,
    started_at: iso(span.startTimeUnixNano),
    ended_at: iso(span.endTimeUnixNano),
    error: span.status?.code === 2 ? { message: span.status.message ?? "error" } : null,
    line,
  };
  if (op === "invoke_agent" || op === "create_agent")
    return {
      ...base,
      span_data: {
        type: "agent",
        name: String(a.get("gen_ai.agent.name") ?? span.name.slice(op.length + 1)),
      },
    };
  if (op === "execute_tool") {
    const result = a.get("gen_ai.tool.call.result");
    return {
      ...base,
      span_data: {
        type: "function",
        name: String(a.get("gen_ai.tool.name") ?? span.name.slice(op.length + 1)),
        input: a.has("gen_ai.tool.call.arguments") ? asText(a.get("gen_ai.tool.call.arguments")) : "",
        ...(result === undefined ? {} : { output: asText(result) }),
      },
    };
  }
  if (op === "chat" || op === "text_completion" || op === "generate_content") {
    const system = a.get("gen_ai.system_instructions");
    const input = items(a.get("gen_ai.input.messages"));
    const output = items(a.get("gen_ai.output.messages"));
    const tools = a.get("gen_ai.tool.definitions");
    return {
      ...base,
      span_data: {
        type: "generation",
        ...(input
          ? { input: system === undefined ? input : [{ role: "system", content: asText(system) }, ...input] }
          : {}),
        ...(output ? { output: output.map((o) => (o.role ? { ...o, role: "assistant" } : o)) } : {}),
        model_config: { tools: typeof tools === "string" ? (JSON.parse(tools) as unknown[]) : [] },
        ...(a.has("gen_ai.request.model") ? { model: String(a.get("gen_ai.request.model")) } : {}),
      },
    };
  }
  // Everything else (HTTP, database, the app's own spans) passes its children through.
  return { ...base, span_data: { type: "custom", name: span.name } };
}

/**
 * Traces from OTLP/JSON: one export document per file, or one per line (a collector's file
 * exporter). Spans follow the GenAI semantic conventions; a root span's `coa.task.id` names the task.
 */
export function parseOtlp(
  lines: readonly { line: number; text: string }[],
  file: string,
): { traces: Parsed<GenericTrace>[]; issues: ImportIssue[] } {
  const issues: ImportIssue[] = [];
  const whole = lines.map((l) => l.text).join("\n");
  // A pretty-printed document spans many lines; a JSONL export has one document per line.
  let docs: { line: number; text: string }[] = [{ line: 0, text: whole }];
  try {
    JSON.parse(whole);
  } catch {
    docs = [...lines];
  }
  const spans = new Map<string, SpanRecord[]>();
  const taskIds = new Map<string, string>();
  for (const { line, text } of docs) {
    let doc: z.infer<typeof OtlpDocument>;
    try {
      const parsed = OtlpDocument.safeParse(JSON.parse(text));
      if (!parsed.success) {
        issues.push({
          reason: "not_a_record",
          file,
          line,
          detail: "not an OTLP/JSON export (no resourceSpans)",
        });
        continue;
      }
      doc = parsed.data;
    } catch {
      issues.push({ reason: "invalid_json", file, line, detail: "not JSON (a torn or truncated line?)" });
      continue;
    }
    for (const raw of doc.resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans))) {
      const span = OtlpSpan.safeParse(raw);
      if (!span.success) {
        issues.push({ reason: "not_a_record", file, line, detail: "a span without traceId, spanId or name" });
        continue;
      }
      const taskId = attrs(span.data).get("coa.task.id");
      if (taskId !== undefined) taskIds.set(span.data.traceId, String(taskId));
      const record = toRecord(span.data, line);
      spans.set(record.trace_id, [...(spans.get(record.trace_id) ?? []), record]);
    }
  }
  const traces = tracesFromSpans(spans, file, issues, (id) => taskIds.get(id) ?? null);
  return { traces, issues };
}
