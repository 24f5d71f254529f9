import path from "node:path";
import type { CallInput, GenericStep, GenericTrace } from "./generic.js";
import type { ImportIssue, Parsed } from "./issues.js";
import { renderItem } from "./render.js";

/**
 * `--from openai-agents-run`: what a `@openai/agents` run returns, for users without a trace
 * processor. A file holds one serialized run state (`result.state.toString()`), several (a JSON
 * array, or one per line: agents used as tools run nested runs, joined to their parent's call), or a
 * JSON array of run items (`result.newItems`, `result.history`). A RunResult does not keep what each
 * model call read: each call's input is rebuilt as the runner sends it without an input filter, the
 * run's original input and every item generated before the call.
 */

type Data = Record<string, unknown>;

const isData = (v: unknown): v is Data => typeof v === "object" && v !== null && !Array.isArray(v);
const asText = (v: unknown): string => (typeof v === "string" ? v : v === undefined ? "" : JSON.stringify(v));

/** A value parsed from a JSON text that may be cut off: complete containers, the cut one partly. */
interface PartialJson {
  value: unknown;
  /** Set when the text is not JSON, or ends before the value does. */
  error: string | null;
  truncated: boolean;
}

/**
 * Parses JSON; when the text ends early (a truncated file), returns what was complete: the outer value
 * and the arrays open at the cut keep their complete elements; an object cut inside (an item) is left
 * out. Any other syntax error gives no value.
 */
export function parsePartialJson(text: string): PartialJson {
  try {
    return { value: JSON.parse(text), error: null, truncated: false };
  } catch (err) {
    const error = (err as Error).message;
    const value = new PartialReader(text).read();
    return value === undefined ? { value, error, truncated: false } : { value, error, truncated: true };
  }
}

const SCALAR = /"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null/y;
// What a string, number or word cut off by the end of the text looks like.
const CUT_SCALAR = /^(?:"(?:[^"\\]|\\.)*\\?|[\d.eE+-]+|t(?:ru?)?|f(?:a(?:ls?)?)?|n(?:ul?)?)$/;

/** A value read up to the end of the text; `cut`: the text ended inside it. */
type Read = { value: unknown; cut: boolean };

class PartialReader {
  private at = 0;
  constructor(private readonly text: string) {}

  /** The top-level value if the text is JSON cut off at its end, else undefined. */
  read(): unknown {
    try {
      const r = this.value();
      if (!r.cut || r.value === undefined) return undefined;
      return r.value;
    } catch {
      return undefined;
    }
  }

  private ws(): boolean {
    while (this.at < this.text.length && /\s/.test(this.text[this.at]!)) this.at++;
    return this.at >= this.text.length;
  }

  private value(): Read {
    if (this.ws()) return { value: undefined, cut: true };
    const c = this.text[this.at];
    if (c === "[" || c === "{") return this.container(c === "[");
    SCALAR.lastIndex = this.at;
    const m = SCALAR.exec(this.text);
    const after = m ? this.at + m[0].length : this.at;
    // A number or word at the very end may itself be cut short.
    if (m && (m[0].startsWith('"') || !/^[\w.+-]*$/.test(this.text.slice(after, after + 32)))) {
      this.at = after;
      return { value: JSON.parse(m[0]), cut: false };
    }
    if (CUT_SCALAR.test(this.text.slice(this.at))) return { value: undefined, cut: true };
    throw new SyntaxError(`unexpected ${JSON.stringify(c)}`);
  }

  private container(array: boolean): Read {
    this.at++;
    const list: unknown[] = [];
    const obj: Data = {};
    const done = (cut: boolean): Read => ({ value: array ? list : obj, cut });
    const close = array ? "]" : "}";
    for (let first = true; ; first = false) {
      if (this.ws()) return done(true);
      if (first && this.text[this.at] === close) {
        this.at++;
        return done(false);
      }
      let key = "";
      if (!array) {
        const k = this.value();
        if (k.cut) return done(true);
        if (typeof k.value !== "string") throw new SyntaxError("a key is not a string");
        key = k.value;
        if (this.ws()) return done(true);
        if (this.text[this.at++] !== ":") throw new SyntaxError("no colon after a key");
      }
      const v = this.value();
      // Arrays cut inside keep their complete part; an object cut inside is incomplete: left out.
      const keep = !v.cut || Array.isArray(v.value);
      if (keep && v.value !== undefined) {
        if (array) list.push(v.value);
        else obj[key] = v.value;
      }
      if (v.cut || this.ws()) return done(true);
      const sep = this.text[this.at++];
      if (sep === close) return done(false);
      if (sep !== ",") throw new SyntaxError(`unexpected ${JSON.stringify(sep)}`);
    }
  }
}

/** One model-visible item with the agent it belongs to, as the run recorded it. */
interface Item {
  kind: "input" | "output" | "tool_output" | "handoff" | "history";
  raw: Data;
  agent: string;
  index: number;
  /** tool_output: the output as the tool returned it. handoff: source and target. */
  output?: unknown;
  from?: string;
  to?: string;
}

/** One run: the state's or the item list's content. */
interface Run {
  input: Data[];
  items: Item[];
  final: string | null;
  taskId: string | null;
  traceId: string | null;
  /** For messages: where the run is, e.g. `run 2` or `line 3`. */
  where: string;
  line: number;
}

const KNOWN_HISTORY = new Set([
  "tool_search_call_item",
  "tool_search_output_item",
  "compaction_item",
  "input_item",
]);

const agentName = (v: unknown, fallback: string): string =>
  isData(v) && typeof v.name === "string" ? v.name : fallback;

/** A plain protocol item (`result.history`, or the input): what a model sees, with no agent named. */
function plainItem(raw: Data, index: number, seenOutput: boolean): Item {
  const type = raw.type ?? (raw.role ? "message" : undefined);
  const agent = "assistant";
  if (type === "message" && raw.role !== "assistant")
    return { kind: seenOutput ? "history" : "input", raw, agent, index };
  if (type === "message" || type === "function_call" || type === "reasoning" || type === "hosted_tool_call")
    return { kind: "output", raw, agent, index };
  if (type === "function_call_result" || type === "function_call_output")
    return { kind: "tool_output", raw, agent, index, output: raw.output };
  return { kind: seenOutput ? "history" : "input", raw, agent, index };
}

/** A list of items (RunItem JSON or plain protocol items) as a run's items; bad ones become issues. */
function readItems(
  list: unknown[],
  where: string,
  file: string,
  line: number,
  issues: ImportIssue[],
): Item[] {
  const items: Item[] = [];
  let seenOutput = false;
  for (const [index, el] of list.entries()) {
    const bad = (detail: string) =>
      issues.push({ reason: "unknown_item_type", file, line, detail: `${where} item ${index}: ${detail}` });
    if (!isData(el)) {
      bad("not an object");
      continue;
    }
    if (!("rawItem" in el)) {
      const item = plainItem(el, index, seenOutput);
      seenOutput ||= item.kind === "output";
      items.push(item);
      continue;
    }
    const raw = el.rawItem;
    if (!isData(raw)) {
      bad("rawItem is not an object");
      continue;
    }
    const agent = agentName(el.agent, "assistant");
    switch (el.type) {
      case "message_output_item":
      case "tool_call_item":
      case "reasoning_item":
      case "handoff_call_item":
        seenOutput = true;
        items.push({ kind: "output", raw, agent, index });
        continue;
      case "tool_call_output_item":
        items.push({ kind: "tool_output", raw, agent, index, output: el.output ?? raw.output });
        continue;
      case "handoff_output_item":
        items.push({
          kind: "handoff",
          raw,
          agent: agentName(el.targetAgent, ""),
          index,
          from: agentName(el.sourceAgent, ""),
          to: agentName(el.targetAgent, ""),
        });
        continue;
      case "tool_approval_item":
        // A call waiting for approval: it reached no model and ran nothing yet.
        continue;
      default:
        if (typeof el.type === "string" && KNOWN_HISTORY.has(el.type))
          items.push({ kind: "history", raw, agent, index });
        else bad(`unknown item type ${JSON.stringify(el.type)}, skipped`);
    }
  }
  return items;
}

/** A tool's output as text: the SDK's `output` (a string) or the raw result's text parts. */
function outputText(output: unknown): string {
  if (typeof output === "string") return output;
  if (isData(output) && typeof output.text === "string") return output.text;
  if (Array.isArray(output))
    return output.map((p) => (isData(p) && typeof p.text === "string" ? p.text : asText(p))).join("");
  return asText(output);
}

const messageText = (raw: Data): string => {
  const content = raw.content;
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((p) =>
      isData(p) ? (typeof p.text === "string" ? p.text : typeof p.refusal === "string" ? p.refusal : "") : "",
    )
    .join("");
};

function stateRun(state: Data, where: string, file: string, line: number, issues: ImportIssue[]): Run {
  const original = state.originalInput;
  const input: Data[] =
    typeof original === "string"
      ? [{ role: "user", content: original }]
      : Array.isArray(original)
        ? original.filter(isData)
        : [];
  const list = Array.isArray(state.generatedItems) ? state.generatedItems : [];
  const step = isData(state.currentStep) ? state.currentStep : null;
  const trace = isData(state.trace) ? state.trace : null;
  const taskId = isData(trace?.metadata) ? trace.metadata.task_id : undefined;
  return {
    input,
    items: readItems(list, where, file, line, issues),
    final: step?.type === "next_step_final_output" ? outputText(step.output) : null,
    taskId: typeof taskId === "string" ? taskId : null,
    traceId: typeof trace?.id === "string" && trace.id !== "no-op" ? trace.id : null,
    where,
    line,
  };
}

function itemsRun(list: unknown[], where: string, file: string, line: number, issues: ImportIssue[]): Run {
  const all = readItems(list, where, file, line, issues);
  const input = all.filter((i) => i.kind === "input").map((i) => i.raw);
  const items = all.filter((i) => i.kind !== "input");
  // An item list ends with the answer when its last item is a message with no call after it.
  const last = items.at(-1);
  const final =
    last?.kind === "output" && (last.raw.type ?? "message") === "message" ? messageText(last.raw) : null;
  return { input, items, final, taskId: null, traceId: null, where, line };
}

const isState = (v: unknown): v is Data => isData(v) && "$schemaVersion" in v;

/** The runs of one file's JSON value: a state, an array of states, or an item list. */
function runsOf(value: unknown, where: string, file: string, line: number, issues: ImportIssue[]): Run[] {
  if (isState(value)) return [stateRun(value, where, file, line, issues)];
  if (Array.isArray(value) && value.length > 0 && value.every(isState))
    return value.map((s, i) => stateRun(s, `run ${i}`, file, line, issues));
  if (Array.isArray(value)) return [itemsRun(value, where, file, line, issues)];
  issues.push({
    reason: "not_a_record",
    file,
    line,
    detail: `${where}: neither a run state ($schemaVersion) nor a list of run items`,
  });
  return [];
}

/** `{"input": "…"}`: the arguments `agent.asTool()` takes by default. */
function agentToolInput(args: unknown): string | null {
  if (typeof args !== "string") return null;
  try {
    const parsed: unknown = JSON.parse(args);
    if (isData(parsed) && Object.keys(parsed).length === 1 && typeof parsed.input === "string")
      return parsed.input;
  } catch {
    // Not JSON: an ordinary tool's text.
  }
  return null;
}

/** Turns runs into steps, placing nested runs (agents used as tools) at the calls that ran them. */
class RunWalk {
  private readonly used = new Set<Run>();

  constructor(
    private readonly runs: readonly Run[],
    private readonly file: string,
    private readonly issues: ImportIssue[],
  ) {}

  isUsed(run: Run): boolean {
    return this.used.has(run);
  }

  /**
   * The nested runs of `run`'s agent-tool calls, by the output item that ends each call. A nested run
   * finishes, and is written, after the runs nested in it and before the run that called it: the last
   * call's run is the nearest earlier run (not yet placed) with the call's input and output, the call
   * before it the nearest one before that, and so on.
   */
  private nestedRuns(run: Run): Map<Item, Run> {
    const inputs = new Map<unknown, string>();
    for (const i of run.items) {
      const input = i.kind === "output" && i.raw.type === "function_call" && agentToolInput(i.raw.arguments);
      if (typeof input === "string") inputs.set(i.raw.callId ?? i.raw.call_id, input);
    }
    const out = new Map<Item, Run>();
    let bound = this.runs.indexOf(run);
    for (const item of [...run.items].reverse()) {
      const input = item.kind === "tool_output" ? inputs.get(item.raw.callId ?? item.raw.call_id) : undefined;
      if (input === undefined) continue;
      const output = outputText(item.output).trim();
      for (let at = bound - 1; at >= 0; at--) {
        const r = this.runs[at]!;
        const fits =
          !this.used.has(r) &&
          r.input.length === 1 &&
          r.input[0]!.content === input &&
          r.final?.trim() === output &&
          (r.traceId === null || run.traceId === null || r.traceId === run.traceId);
        if (!fits) continue;
        out.set(item, r);
        this.used.add(r);
        bound = at;
        break;
      }
    }
    return out;
  }

  /** The steps of one run; `root` is the agent whose items come first. */
  walk(run: Run): { steps: GenericStep[]; root: string | null } {
    this.used.add(run);
    const nested = this.nestedRuns(run);
    const steps: GenericStep[] = [];
    const sent: Data[] = [...run.input];
    const calls = new Map<string, { raw: Data; agent: string; index: number }>();
    const root = run.items.find((i) => i.kind === "output")?.agent ?? null;
    let group: Item[] = [];
    const flush = () => {
      if (!group.length) return;
      const agent = group[0]!.agent;
      const input: CallInput = sent.slice(0, sent.length - group.length);
      const texts: string[] = [];
      const outputCalls: string[] = [];
      for (const { raw } of group) {
        const type = raw.type ?? "message";
        if (type === "message") texts.push(messageText(raw));
        else outputCalls.push(renderItem(raw));
      }
      steps.push({ type: "llm", agent, input, tools: [], output: texts.join("\n"), outputCalls });
      group = [];
    };
    for (const item of run.items) {
      if (item.kind === "output") {
        if (group.length && group[0]!.agent !== item.agent) flush();
        group.push(item);
        sent.push(item.raw);
        const callId = item.raw.callId ?? item.raw.call_id ?? item.raw.id;
        const type = item.raw.type;
        if ((type === "function_call" || type === "hosted_tool_call") && typeof callId === "string")
          calls.set(callId, { raw: item.raw, agent: item.agent, index: item.index });
        continue;
      }
      flush();
      sent.push(item.raw);
      if (item.kind === "handoff") {
        const callId = item.raw.callId;
        if (typeof callId === "string") calls.delete(callId);
        steps.push({ type: "delegate", from: item.from ?? "", to: item.to ?? "", input: null });
      } else if (item.kind === "tool_output") this.toolOutput(run, item, calls, steps, nested.get(item));
    }
    flush();
    for (const [callId, call] of calls)
      this.issues.push({
        reason: "unanswered_tool_call",
        file: this.file,
        line: run.line,
        detail: `${run.where} item ${call.index}: call ${callId} to ${String(call.raw.name)} has no output (an interrupted run?)`,
      });
    return { steps, root };
  }

  private toolOutput(
    run: Run,
    item: Item,
    calls: Map<string, { raw: Data; agent: string; index: number }>,
    steps: GenericStep[],
    sub: Run | undefined,
  ): void {
    const callId = item.raw.callId ?? item.raw.call_id;
    const call = typeof callId === "string" ? calls.get(callId) : undefined;
    if (!call) {
      this.issues.push({
        reason: "tool_output_without_call",
        file: this.file,
        line: run.line,
        detail: `${run.where} item ${item.index}: output for call ${String(callId)} with no call before it, skipped`,
      });
      return;
    }
    calls.delete(callId as string);
    const name = String(call.raw.name ?? item.raw.name ?? "");
    const result = outputText(item.output);
    const delegated = agentToolInput(call.raw.arguments);
    if (delegated === null) {
      steps.push({
        type: "tool",
        agent: call.agent,
        tool: name,
        arguments: asText(call.raw.arguments),
        result,
        error: null,
      });
      return;
    }
    // An agent used as a tool: its nested run (when the file has it) happens inside the call.
    const inner = sub ? this.walk(sub) : null;
    const to = inner?.root ?? name;
    steps.push({ type: "delegate", from: call.agent, to, input: delegated });
    if (inner) steps.push(...inner.steps);
    steps.push({ type: "return", agent: to, output: result });
  }
}

/** The file's text as JSON: one document (pretty-printed or not), else one per line. */
const TRUNCATED =
  "the JSON ends early (a truncated file): the items before the cut are read, the run's answer is not";

/** A JSON value of the file; `truncated`: the text ended inside it (what was complete is kept). */
interface Doc {
  value: unknown;
  line: number;
  where: string;
  truncated: boolean;
}

function documents(
  lines: readonly { line: number; text: string }[],
  file: string,
  issues: ImportIssue[],
): Doc[] {
  const whole = lines.map((l) => l.text).join("\n");
  const parsed = parsePartialJson(whole);
  if (parsed.error === null) return [{ value: parsed.value, line: 0, where: "file", truncated: false }];
  // One JSON value per line (several runs appended), when the first line is one by itself.
  if (lines.length > 1 && parsePartialJson(lines[0]!.text).error === null) {
    const out: Doc[] = [];
    for (const { line, text } of lines) {
      const one = parsePartialJson(text);
      if (one.error === null || one.truncated)
        out.push({ value: one.value, line, where: `line ${line}`, truncated: one.truncated });
      if (one.error !== null)
        issues.push({
          reason: "invalid_json",
          file,
          line,
          detail: one.truncated ? TRUNCATED : "not JSON (a torn or mixed line?)",
        });
    }
    return out;
  }
  if (!parsed.truncated) {
    issues.push({ reason: "invalid_json", file, line: 0, detail: `not JSON: ${parsed.error}` });
    return [];
  }
  issues.push({
    reason: "invalid_json",
    file,
    line: lines.at(-1)?.line ?? 0,
    detail: TRUNCATED,
  });
  return [{ value: parsed.value, line: 0, where: "file", truncated: true }];
}

/** Generic traces from one file of run states or run items (module doc). */
export function parseRunResult(
  lines: readonly { line: number; text: string }[],
  file: string,
): { traces: Parsed<GenericTrace>[]; issues: ImportIssue[] } {
  const issues: ImportIssue[] = [];
  const runs = documents(lines, file, issues).flatMap((d) => {
    const read = runsOf(d.value, d.where, file, d.line, issues);
    // A run cut off has lost its last items: whatever it seems to end with is not its answer. (In a
    // cut list of states, the states read are whole: the one cut inside is left out.)
    if (d.truncated && !(Array.isArray(d.value) && d.value.length > 0 && d.value.every(isState)))
      for (const r of read) r.final = null;
    return read;
  });
  const walk = new RunWalk(runs, file, issues);
  const traces: Parsed<GenericTrace>[] = [];
  // Nested runs finish (and are written) before the run that called them: the last run is a root.
  for (const run of [...runs].reverse()) {
    if (walk.isUsed(run)) continue;
    const { steps, root } = walk.walk(run);
    if (root !== null && run.final !== null) steps.push({ type: "return", agent: root, output: run.final });
    traces.unshift({
      file,
      line: run.line,
      trace: {
        format: "coa-generic/1",
        traceId: run.traceId ?? `${path.basename(file)}#${run.where}`,
        taskId: run.taskId,
        question: null,
        rootAgent: root,
        steps,
        wallMs: 0,
      },
    });
  }
  return { traces, issues };
}
