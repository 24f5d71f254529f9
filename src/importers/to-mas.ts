import type { Tokenizer } from "../model/index.js";
import { parseScore } from "../protocol/index.js";
import { scoreTask } from "../rewards/index.js";
import type { Task } from "../tasks/index.js";
import type { AgentName, MasMessage, MasTrace, MessageKind } from "../teacher/index.js";
import type { GenericTrace, LlmStep, ToolStep } from "./generic.js";
import { PrefixCache } from "./prefix-cache.js";
import { renderCall } from "./render.js";
import { type RoleTable, resolveAgent, resolveTool, type TeamRole } from "./roles.js";
import { coaToolArgs } from "./tool-args.js";

const MAS_NAME: Readonly<Record<TeamRole, AgentName>> = {
  manager: "manager",
  planner: "manager",
  searcher: "searcher",
  coder: "coder",
  critic: "critic",
  verifier: "verifier",
};

export interface BuildOptions {
  roles: RoleTable;
  tokenizer: Tokenizer;
  /** Recorded as the trace's model, e.g. "openai-agents:expert-v1". */
  model: string;
}

/** What the build noticed besides the trace itself: names it had to guess. */
export interface BuildNotes {
  /** Agents no table entry or name pattern placed; played as a searcher (the root as the manager). */
  guessedAgents: string[];
}

/** A critic's all-clear: plain reasoning, not a reflection. */
const NO_ISSUES = /^\W*no[_ ]issues?\b/i;

type Charge = Pick<MasMessage, "tokensIn" | "tokensOut" | "tokensCached">;
type Extra = Pick<MasMessage, "tool" | "score" | "ok">;

/** Builds the `MasTrace` of one imported episode: messages, what each model call cost, the reward. */
export async function toMasTrace(
  trace: GenericTrace,
  task: Task,
  opts: BuildOptions,
): Promise<{ trace: MasTrace; notes: BuildNotes }> {
  const first = trace.steps[0];
  const root = trace.rootAgent ?? (first ? (first.type === "delegate" ? first.from : first.agent) : "");
  const guessed = new Set<string>();
  const roleOf = (agent: string): TeamRole => {
    const r = resolveAgent(opts.roles, agent);
    if (r.value) return r.value;
    guessed.add(agent);
    return agent === root ? "manager" : "searcher";
  };
  // The agent the user talks to answers the user: in a MAS trace that is the manager's part.
  const nameOf = (agent: string): AgentName => (agent === root ? "manager" : MAS_NAME[roleOf(agent)]);

  const messages: MasMessage[] = [];
  let charge: Charge | null = null;
  const add = (from: AgentName, to: AgentName, kind: MessageKind, content: string, extra: Extra = {}) => {
    const c = charge ?? { tokensIn: 0, tokensOut: 0, tokensCached: 0 };
    charge = null;
    messages.push({ index: messages.length, from, to, kind, content, ...extra, ...c, ms: 0 });
  };

  const cache = new PrefixCache();
  const count = (text: string) => opts.tokenizer.encode(text).length;
  let redacted = 0;
  let unmapped: string | null = null;
  let agentCalls = 0;
  let toolCalls = 0;
  let finalAnswer: string | null = null;

  const llm = (step: LlmStep) => {
    agentCalls++;
    if (step.input === null || step.output === null) {
      redacted++;
      return;
    }
    const context = renderCall(step.input, step.tools);
    const reply = [step.output, ...step.outputCalls].filter(Boolean).join("\n");
    const tokensIn = count(context);
    charge = { tokensIn, tokensOut: count(reply), tokensCached: cache.cached(context, reply, tokensIn) };
    const text = step.output.trim();
    if (!text) return;
    const role = roleOf(step.agent);
    // The manager's first words, before it hands out any work, are its plan.
    const opening =
      step.agent === root && !messages.some((m) => m.kind === "delegate" || m.kind === "tool_call");
    if (role === "planner" || opening) add("manager", "manager", "plan", text);
    else if (role === "critic")
      add("critic", "manager", NO_ISSUES.test(text) ? "reasoning" : "reflection", text);
    else if (role === "verifier") {
      const score = parseScore(text);
      add("verifier", "manager", "verdict", text, score === null ? {} : { score });
    } else add(nameOf(step.agent), nameOf(step.agent), "reasoning", text);
  };

  const tool = (step: ToolStep) => {
    toolCalls++;
    const tag = resolveTool(opts.roles, step.tool).value;
    if (!tag) {
      unmapped ??= `tool "${step.tool}" has no CoA tag: name it in --roles (tools)`;
      return;
    }
    if (step.arguments === null || step.result === null) {
      redacted++;
      return;
    }
    const args = coaToolArgs(tag, step.arguments);
    if (args === null) {
      unmapped ??= `tool "${step.tool}": no argument fits <${tag}>`;
      return;
    }
    const by = nameOf(step.agent);
    add(by, "tool", "tool_call", args, { tool: { name: tag, args } });
    add("tool", by, "observation", step.result, { ok: step.error === null });
  };

  /** An agent's final output: the answer (root), a worker's report, or nothing new (already said). */
  const ret = (agent: string, output: string | null) => {
    if (output === null) {
      redacted++;
      return;
    }
    const text = output.trim();
    const by = nameOf(agent);
    const isRoot = agent === root;
    if (isRoot) finalAnswer = text;
    // A critic's or verifier's output that no call of its own said first (an agent-tool run the input
    // does not hold) is still its reflection or verdict.
    const score = by === "verifier" ? parseScore(text) : null;
    const [kind, to]: [MessageKind, AgentName] = isRoot
      ? ["final", "user"]
      : by === "searcher" || by === "coder"
        ? ["report", "manager"]
        : by === "critic"
          ? [NO_ISSUES.test(text) ? "reasoning" : "reflection", "manager"]
          : by === "verifier"
            ? ["verdict", "manager"]
            : ["reasoning", by];
    const last = messages.at(-1);
    if (last?.from === by && last.content === text) {
      // The call's own text was the output: it becomes the answer or report instead of a repeat.
      if (last.kind === "reasoning") {
        Object.assign(last, { kind, to });
        return;
      }
      if (!isRoot) return;
    }
    add(by, to, kind, text, score === null ? {} : { score });
  };

  add("user", "manager", "task", task.question);
  for (const step of trace.steps) {
    if (step.type === "llm") llm(step);
    else if (step.type === "tool") tool(step);
    else if (step.type === "return") ret(step.agent, step.output);
    // A handoff (no input) passes the conversation on and says nothing itself.
    else if (step.input !== null) add("manager", nameOf(step.to), "delegate", step.input.trim());
  }

  const scored = finalAnswer === null ? null : await scoreTask(task, finalAnswer);
  const sum = (key: keyof Charge) => messages.reduce((n, m) => n + m[key], 0);
  const plans = messages.filter((m) => m.kind === "plan").length;
  const unusable: MasTrace["unusable"] = redacted
    ? {
        reason: "redacted",
        detail: `${redacted} step(s) have no content: the framework recorded them without sensitive data`,
      }
    : unmapped
      ? { reason: "unmapped_tool", detail: unmapped }
      : undefined;
  const mas: MasTrace = {
    version: 1,
    taskId: task.id,
    question: task.question,
    answers: task.answers,
    taskKind: task.kind,
    source: task.source,
    driver: "import",
    model: opts.model,
    tokenizer: opts.tokenizer.name,
    messages: messages.map((m, index) => ({ ...m, index })),
    finalAnswer,
    reward: scored && scored.error === null ? scored.score : null,
    error: null,
    ...(unusable ? { unusable } : {}),
    stats: {
      agentCalls,
      toolCalls,
      replans: Math.max(0, plans - 1),
      reflections: messages.filter((m) => m.kind === "reflection").length,
      tokensIn: sum("tokensIn"),
      tokensOut: sum("tokensOut"),
      tokensCached: sum("tokensCached"),
      wallMs: trace.wallMs,
    },
  };
  return { trace: mas, notes: { guessedAgents: [...guessed] } };
}
