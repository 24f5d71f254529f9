import type { GenericStep, GenericTrace } from "./generic.js";
import type { ImportIssue, Parsed } from "./issues.js";
import { renderItem } from "./render.js";

/**
 * A span in the OpenAI Agents SDK's JSON shape. The OTel importer brings GenAI spans into this shape
 * too, so one walk reads both.
 */
export interface SpanRecord {
  id: string;
  trace_id: string;
  parent_id: string | null;
  started_at: string | null;
  ended_at: string | null;
  span_data: { type: string } & Record<string, unknown>;
  error: { message: string } | null;
  /** Where the span was read: 1-based line, 0 for a whole-document file. */
  line: number;
}

// Spans that carry no step of their own: their children are read in their place.
const TRANSPARENT = new Set(["custom", "task", "turn"]);
// Spans about other things (guardrails, MCP listings, voice): known, and not part of the team's talk.
const IGNORED = new Set(["guardrail", "mcp_tools", "transcription", "speech", "speech_group"]);

type Data = Record<string, unknown>;

function outputParts(output: unknown): { text: string; calls: string[] } {
  // Responses-API output is a list of items; the SDK's chat-completions model records the whole
  // `chat.completion` object instead, whose choices hold the assistant messages.
  const items = (Array.isArray(output) ? (output as Data[]) : []).flatMap((o) =>
    o.object === "chat.completion" && Array.isArray(o.choices)
      ? (o.choices as Data[]).flatMap((c) => (c.message ? [c.message as Data] : []))
      : [o],
  );
  const texts: string[] = [];
  const calls: string[] = [];
  for (const item of items) {
    if (item.type === "function_call" || item.type === "hosted_tool_call") calls.push(renderItem(item));
    else if (item.role === "assistant" || item.type === "message") {
      const content = item.content;
      if (typeof content === "string") texts.push(content);
      else if (Array.isArray(content))
        for (const p of content as Data[]) if (typeof p.text === "string") texts.push(p.text);
      if (Array.isArray(item.tool_calls))
        for (const c of item.tool_calls as Data[])
          calls.push(renderItem({ type: "function_call", ...(c.function as Data) }));
    }
  }
  return { text: texts.join("\n"), calls };
}

/** A sub-agent's input as the agent tool got it: `{"input": "…"}` or the raw arguments. */
function agentToolInput(input: unknown): string | null {
  if (typeof input !== "string" || !input) return null;
  try {
    const parsed = JSON.parse(input) as Data;
    return typeof parsed.input === "string" ? parsed.input : input;
  } catch {
    return input;
  }
}

/** Builds one trace's steps by walking its span tree in start order. */
class SpanWalk {
  readonly steps: GenericStep[] = [];
  root: string | null = null;

  constructor(
    private readonly children: Map<string, SpanRecord[]>,
    private readonly file: string,
    private readonly issues: ImportIssue[],
  ) {}

  private kids(span: SpanRecord): SpanRecord[] {
    return this.children.get(span.id) ?? [];
  }

  /** The first agent span under `span` (an agent used as a tool runs its own agent span there). */
  private subAgent(span: SpanRecord): SpanRecord | null {
    for (const c of this.kids(span)) {
      if (c.span_data.type === "agent") return c;
      if (TRANSPARENT.has(c.span_data.type)) {
        const deeper = this.subAgent(c);
        if (deeper) return deeper;
      }
    }
    return null;
  }

  walk(span: SpanRecord, agent: string): void {
    const d = span.span_data as Data & { type: string };
    switch (d.type) {
      case "agent": {
        const name = String(d.name);
        this.root ??= name;
        for (const c of this.kids(span)) this.walk(c, name);
        return;
      }
      case "generation": {
        const { text, calls } = outputParts(d.output);
        const config = (d.model_config ?? {}) as Data;
        this.steps.push({
          type: "llm",
          agent,
          input: Array.isArray(d.input) ? (d.input as Data[]) : null,
          tools: Array.isArray(config.tools) ? (config.tools as Data[]) : [],
          output: d.output === undefined ? null : text,
          outputCalls: calls,
          ...(typeof d.model === "string" ? { model: d.model } : {}),
        });
        return;
      }
      case "response":
        // The Responses API keeps the conversation on the server: the span holds only its id.
        this.steps.push({ type: "llm", agent, input: null, tools: [], output: null, outputCalls: [] });
        return;
      case "function": {
        const output = typeof d.output === "string" ? d.output : null;
        const sub = this.subAgent(span);
        if (sub) {
          const name = String(sub.span_data.name);
          this.steps.push({ type: "delegate", from: agent, to: name, input: agentToolInput(d.input) });
          for (const c of this.kids(span)) this.walk(c, agent);
          this.steps.push({ type: "return", agent: name, output });
          return;
        }
        const input = typeof d.input === "string" && d.input ? d.input : output === null ? null : "";
        this.steps.push({
          type: "tool",
          agent,
          tool: String(d.name),
          arguments: input,
          result: output,
          error: span.error?.message ?? null,
        });
        return;
      }
      case "handoff":
        this.steps.push({
          type: "delegate",
          from: String(d.from_agent ?? agent),
          to: String(d.to_agent ?? ""),
          input: null,
        });
        return;
      default:
        if (TRANSPARENT.has(d.type)) for (const c of this.kids(span)) this.walk(c, agent);
        else if (!IGNORED.has(d.type))
          this.issues.push({
            reason: "unknown_span_type",
            file: this.file,
            line: span.line,
            detail: `span ${span.id} of type "${d.type}" skipped`,
          });
    }
  }
}

const startOrder = (a: SpanRecord, b: SpanRecord) =>
  (a.started_at ?? "").localeCompare(b.started_at ?? "") || a.line - b.line;

/**
 * One generic trace per trace id: spans ordered by start time (whatever order they were written in),
 * a span whose parent is missing read as a top-level one. `taskIdOf` reads a trace's task id.
 */
export function tracesFromSpans(
  spans: ReadonlyMap<string, SpanRecord[]>,
  file: string,
  issues: ImportIssue[],
  taskIdOf: (traceId: string, spans: readonly SpanRecord[]) => string | null,
  firstLine: (traceId: string) => number = () => Number.POSITIVE_INFINITY,
): Parsed<GenericTrace>[] {
  const traces: Parsed<GenericTrace>[] = [];
  for (const [traceId, list] of spans) {
    const ids = new Set(list.map((s) => s.id));
    const children = new Map<string, SpanRecord[]>();
    const tops: SpanRecord[] = [];
    for (const s of list) {
      if (s.parent_id && !ids.has(s.parent_id))
        issues.push({
          reason: "missing_parent",
          file,
          line: s.line,
          detail: `span ${s.id}'s parent ${s.parent_id} is in no record; read as a top-level span`,
        });
      if (!s.parent_id || !ids.has(s.parent_id)) tops.push(s);
      else children.set(s.parent_id, [...(children.get(s.parent_id) ?? []), s]);
    }
    for (const c of children.values()) c.sort(startOrder);
    const walk = new SpanWalk(children, file, issues);
    for (const s of tops.sort(startOrder)) walk.walk(s, walk.root ?? "");
    const root = walk.root;
    // The team's answer to the user: the last words of the agents that ran at the top level.
    const lastTop = walk.steps.filter((s) => s.type === "llm" && !inSubAgent(s, walk.steps)).at(-1);
    if (root && lastTop?.type === "llm")
      walk.steps.push({ type: "return", agent: root, output: lastTop.output });
    const first = Math.min(...list.map((s) => s.line), firstLine(traceId));
    const started = list.map((s) => Date.parse(s.started_at ?? "")).filter(Number.isFinite);
    const ended = list.map((s) => Date.parse(s.ended_at ?? "")).filter(Number.isFinite);
    traces.push({
      file,
      line: first,
      trace: {
        format: "coa-generic/1",
        traceId,
        taskId: taskIdOf(traceId, list),
        question: null,
        rootAgent: root,
        steps: walk.steps,
        wallMs: started.length && ended.length ? Math.max(...ended) - Math.min(...started) : 0,
      },
    });
  }
  return traces;
}

/** Whether an llm step lies between a delegate and its return (a sub-agent's call). */
function inSubAgent(step: GenericStep, steps: readonly GenericStep[]): boolean {
  let depth = 0;
  for (const s of steps) {
    if (s === step) return depth > 0;
    if (s.type === "delegate" && s.input !== null) depth++;
    if (s.type === "return") depth--;
  }
  return false;
}
