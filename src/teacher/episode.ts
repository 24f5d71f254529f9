import { parseScore, REPLAN_SCORE, type ToolTag } from "../protocol/index.js";
import { scoreTask } from "../rewards/index.js";
import type { Task } from "../tasks/index.js";
import { type Tool, ToolCaller } from "../tools/index.js";
import type { AgentReply, Driver, DriverEpisode, Purpose } from "./agents.js";
import { renderContext } from "./context.js";
import type { Role } from "./prompts.js";
import { isNoIssues, parseManagerReply, parseWorkerReply } from "./replies.js";
import type { AgentName, MasMessage, MasTrace, MessageKind } from "./trace.js";

/** The tools the team may call, by tag (what `createToolset` returns). */
export type Toolbox = ReadonlyMap<ToolTag, Tool>;

export interface EpisodeOptions {
  /** Manager moves before the episode stops. */
  maxRounds: number;
  maxToolCalls: number;
  /** Replies a worker gets per delegated sub-task. */
  maxWorkerSteps: number;
  maxReplans: number;
  /** The searcher's search tool (its other tool is crawl_page). */
  searchTool: "web_search" | "wiki_search";
  /** Per tool call, held by ToolCaller's deadline guard as in the runtime. */
  toolTimeoutMs: number;
  /** Cap on an observation's text, held by ToolCaller as in the runtime. */
  observationChars: number;
}

export const DEFAULT_EPISODE: EpisodeOptions = {
  maxRounds: 14,
  maxToolCalls: 14,
  maxWorkerSteps: 4,
  maxReplans: 2,
  searchTool: "web_search",
  toolTimeoutMs: 15_000,
  observationChars: 1200,
};

type Extra = Pick<MasMessage, "tool" | "score" | "ok">;

type Charge = AgentReply & { tokensCached: number };

/** Characters at the start of `a` and `b` that are the same. */
function sharedPrefix(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}

/** The growing trace of one episode; each agent reply's cost goes on the first message it produced. */
class TraceLog {
  readonly messages: MasMessage[] = [];
  private cost: Charge | null = null;

  charge(reply: Charge): void {
    this.cost = reply;
  }

  add(from: AgentName, to: AgentName, kind: MessageKind, content: string, extra: Extra = {}): MasMessage {
    const c = this.cost;
    this.cost = null;
    const m: MasMessage = {
      index: this.messages.length,
      from,
      to,
      kind,
      content,
      ...extra,
      tokensIn: c?.tokensIn ?? 0,
      tokensOut: c?.tokensOut ?? 0,
      tokensCached: c?.tokensCached ?? 0,
      ms: c?.ms ?? 0,
    };
    this.messages.push(m);
    return m;
  }

  /** What the manager sees: everything said to or by it, never the workers' raw tool traffic. */
  managerView(): MasMessage[] {
    return this.messages.filter((m) => m.from === "manager" || m.to === "manager");
  }

  count(pred: (m: MasMessage) => boolean): number {
    return this.messages.filter(pred).length;
  }
}

const WORKER_TOOLS = (opts: EpisodeOptions): Record<"searcher" | "coder", ToolTag[]> => ({
  searcher: [opts.searchTool, "crawl_page"],
  coder: ["code"],
});

/**
 * Runs the multi-agent team on one task: the manager plans and delegates, workers call tools, the
 * critic reviews each finished sub-task, the verifier scores each proposed answer and a low score
 * sends the manager back to planning. Never throws: a broken driver ends the episode with `error`.
 */
export async function runEpisode(
  task: Task,
  driver: Driver,
  tools: Toolbox,
  options: Partial<EpisodeOptions> = {},
): Promise<MasTrace> {
  const opts = { ...DEFAULT_EPISODE, ...options };
  const started = performance.now();
  const log = new TraceLog();
  const agents: DriverEpisode = driver.episode(task);
  let agentCalls = 0;
  let toolCalls = 0;
  let replans = 0;
  let final: string | null = null;
  let proposal: string | null = null;
  let error: string | null = null;

  // Every earlier call's context and reply: what a prefix cache would hold.
  const served: string[] = [];
  const ask = async (
    role: Role,
    purpose: Purpose,
    given: readonly MasMessage[],
  ): Promise<AgentReply | null> => {
    const context = renderContext(role, purpose, given);
    const reply = await agents.call({ role, purpose, messages: given, context });
    if (reply) {
      agentCalls++;
      const shared = Math.max(0, ...served.map((s) => sharedPrefix(s, context)));
      log.charge({ ...reply, tokensCached: Math.round((reply.tokensIn * shared) / (context.length || 1)) });
      served.push(context + reply.text);
    }
    return reply;
  };
  const required = (reply: AgentReply | null, role: Role): AgentReply => {
    if (!reply) throw new Error(`the ${role} gave no reply`);
    return reply;
  };

  // The runtime's tool path, so the observations the student is distilled from read as at inference.
  const caller = new ToolCaller(tools);
  const toolLimits = { timeoutMs: opts.toolTimeoutMs, maxChars: opts.observationChars, goal: task.question };

  /** One delegated sub-task: the worker's replies, tool calls and observations, ending in a report. */
  const work = async (worker: "searcher" | "coder", delegate: MasMessage): Promise<MasMessage[]> => {
    const sub: MasMessage[] = [delegate];
    for (let step = 0; step < opts.maxWorkerSteps; step++) {
      const reply = required(await ask(worker, "work", sub), worker);
      const move = parseWorkerReply(reply.text, WORKER_TOOLS(opts)[worker]);
      if (move.thought) sub.push(log.add(worker, worker, "reasoning", move.thought));
      if (move.kind === "report") {
        sub.push(log.add(worker, "manager", "report", move.text));
        return sub;
      }
      if (move.kind === "malformed") {
        sub.push(log.add("tool", worker, "observation", `Format error: ${move.problem}.`, { ok: false }));
        continue;
      }
      if (toolCalls >= opts.maxToolCalls) {
        sub.push(
          log.add("tool", worker, "observation", "Tool budget spent: report what you have.", { ok: false }),
        );
        continue;
      }
      sub.push(
        log.add(worker, "tool", "tool_call", move.args, { tool: { name: move.tool, args: move.args } }),
      );
      toolCalls++;
      const { observation: obs } = await caller.call(move.tool, move.args, toolLimits);
      sub.push(log.add("tool", worker, "observation", obs.text, { ok: obs.ok }));
    }
    sub.push(log.add(worker, "manager", "report", "No result: the step budget ran out."));
    return sub;
  };

  try {
    const taskMessage = log.add("user", "manager", "task", task.question);
    let plan = log.add(
      "manager",
      "manager",
      "plan",
      required(await ask("manager", "plan", [taskMessage]), "manager").text.trim(),
    );

    for (let round = 0; round < opts.maxRounds && final === null; round++) {
      const reply = required(await ask("manager", "next", log.managerView()), "manager");
      const { thought, action } = parseManagerReply(reply.text);
      if (thought) log.add("manager", "manager", "reasoning", thought);
      if (!action) {
        log.add(
          "tool",
          "manager",
          "observation",
          "Format error: end with one line SEARCH: …, CODE: … or ANSWER: ….",
          {
            ok: false,
          },
        );
        continue;
      }
      if (action.kind === "answer") {
        proposal = action.text;
        log.add("manager", "verifier", "proposal", action.text);
        const verdict = required(await ask("verifier", "verify", log.managerView()), "verifier");
        const score = parseScore(verdict.text) ?? undefined;
        log.add("verifier", "manager", "verdict", verdict.text.trim(), score === undefined ? {} : { score });
        if ((score ?? 3) > REPLAN_SCORE || replans >= opts.maxReplans) {
          final = action.text;
          break;
        }
        replans++;
        plan = log.add(
          "manager",
          "manager",
          "plan",
          required(await ask("manager", "replan", log.managerView()), "manager").text.trim(),
        );
        continue;
      }
      const worker = action.kind === "search" ? "searcher" : "coder";
      const sub = await work(worker, log.add("manager", worker, "delegate", action.text));
      const review = await ask("critic", "review", [taskMessage, plan, ...sub]);
      if (review) {
        const text = review.text.trim();
        log.add("critic", "manager", isNoIssues(text) ? "reasoning" : "reflection", text);
      }
    }
    final ??= proposal;
  } catch (err) {
    error = (err as Error).message;
    final = proposal;
  }

  if (final !== null && error === null) log.add("manager", "user", "final", final);
  const scored = error ? null : await scoreTask(task, final);
  const reward = scored && scored.error === null ? scored.score : null;
  const sum = (key: "tokensIn" | "tokensOut" | "tokensCached") =>
    log.messages.reduce((n, m) => n + m[key], 0);
  return {
    version: 1,
    taskId: task.id,
    question: task.question,
    answers: task.answers,
    taskKind: task.kind,
    source: task.source,
    driver: driver.name,
    model: driver.model,
    tokenizer: driver.tokenizer,
    messages: log.messages,
    finalAnswer: final,
    reward,
    error,
    stats: {
      agentCalls,
      toolCalls,
      replans,
      reflections: log.count((m) => m.kind === "reflection"),
      tokensIn: sum("tokensIn"),
      tokensOut: sum("tokensOut"),
      tokensCached: sum("tokensCached"),
      wallMs: Math.round(performance.now() - started),
    },
  };
}
