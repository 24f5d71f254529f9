import {
  type AgentInputItem,
  type AgentOutputItem,
  type Model,
  type ModelProvider,
  type ModelRequest,
  type ModelResponse,
  Usage,
  withGenerationSpan,
} from "@openai/agents";
import { renderCall, renderItem } from "../../importers/render.js";
import type { Tokenizer } from "../../model/index.js";
import { extractCode, parseScore, REPLAN_SCORE, type ToolTag } from "../../protocol/index.js";
import type { DriverEpisode, Purpose } from "../agents.js";
import { DEFAULT_EPISODE } from "../episode.js";
import type { Role } from "../prompts.js";
import { parseManagerReply, parseWorkerReply } from "../replies.js";
import type { MasMessage } from "../trace.js";

/** What the model decides: text for the user or caller, and at most one tool call. */
interface Move {
  text: string;
  call?: { name: string; args: Record<string, string> };
}

const text = (item: AgentInputItem): string => {
  const r = item as Record<string, unknown>;
  if (r.type !== "function_call_result") return "";
  const out = r.output as unknown;
  if (typeof out === "string") return out;
  const o = out as { text?: string } | { text?: string }[];
  return Array.isArray(o) ? o.map((p) => p.text ?? "").join("") : (o.text ?? "");
};

/**
 * The offline stand-in for an LLM behind the reference team: one per task, it plays the expert
 * driver's decisions (src/teacher/expert) in the team's tool-calling form. The manager's model
 * delegates by calling the worker agents as tools, asks the critic after each sub-task (when the
 * expert has something to say), and sends every proposed answer to the verifier; a low score makes it
 * re-plan, as coa's own teacher does. The framework decides everything else: what each call is sent.
 */
export class ExpertModelProvider implements ModelProvider {
  private awaiting: Role | null = null;
  private proposal: string | null = null;
  private criticText = "";
  private rounds = 0;
  private replans = 0;
  private workerSteps = 0;
  /** Whether each tool call succeeded, by call id: the tools record it, the workers read it. */
  readonly toolOk = new Map<string, boolean>();

  constructor(
    private readonly expert: DriverEpisode,
    private readonly tokenizer: Tokenizer,
    private readonly searchTool: "web_search" | "wiki_search" = "web_search",
  ) {}

  getModel(name?: string): Model {
    const role = (name ?? "manager") as Role;
    return {
      getResponse: (request) => this.respond(role, request),
      getStreamedResponse: () => {
        throw new Error("the expert model answers whole responses only");
      },
    };
  }

  private async ask(role: Role, purpose: Purpose, messages: MasMessage[] = []): Promise<string | null> {
    const reply = await this.expert.call({ role, purpose, messages, context: "" });
    return reply?.text ?? null;
  }

  private async respond(role: Role, request: ModelRequest): Promise<ModelResponse> {
    const input: AgentInputItem[] =
      typeof request.input === "string"
        ? [{ type: "message", role: "user", content: request.input }]
        : request.input;
    const move = await this.move(role, input);
    const output: AgentOutputItem[] = [];
    if (move.text)
      output.push({
        type: "message",
        role: "assistant",
        status: "completed",
        content: [{ type: "output_text", text: move.text }],
      });
    if (move.call)
      output.push({
        type: "function_call",
        callId: `call_${role}_${this.rounds}_${this.workerSteps}_${output.length}_${input.length}`,
        name: move.call.name,
        arguments: JSON.stringify(move.call.args),
        status: "completed",
      });
    const sent = [
      ...(request.systemInstructions ? [{ role: "system", content: request.systemInstructions }] : []),
      ...(input as Record<string, unknown>[]),
    ];
    const tools = [
      ...request.tools,
      ...request.handoffs.map((h) => ({ name: h.toolName, description: h.toolDescription })),
    ] as Record<string, unknown>[];
    const written = output.map((o) => renderItem(o as Record<string, unknown>)).join("\n");
    const usage = new Usage({
      requests: 1,
      inputTokens: this.tokenizer.encode(renderCall(sent, tools)).length,
      outputTokens: this.tokenizer.encode(written).length,
    });
    // Framework models record their own generation span; with sensitive data off, without content.
    if (request.tracing === false) return { usage, output };
    const content = request.tracing === true;
    return withGenerationSpan(
      async (span) => {
        if (content) {
          span.spanData.input = sent;
          span.spanData.output = output as Record<string, unknown>[];
          span.spanData.model_config = { tools };
        }
        span.spanData.usage = { input_tokens: usage.inputTokens, output_tokens: usage.outputTokens };
        return { usage, output };
      },
      { data: { model: `coa-expert/${role}` } },
    );
  }

  private async move(role: Role, input: AgentInputItem[]): Promise<Move> {
    switch (role) {
      case "manager":
        return this.manager(text(input.at(-1)!));
      case "critic":
        return { text: this.criticText };
      case "verifier":
        return { text: (await this.ask("verifier", "verify")) ?? "SCORE: 3" };
      default:
        return this.worker(role, input);
    }
  }

  /** `result`: what the agent tool the manager last called answered (empty on its first call). */
  private async manager(result: string): Promise<Move> {
    const said: string[] = [];
    const was = this.awaiting;
    this.awaiting = null;
    if (was === null) said.push((await this.ask("manager", "plan")) ?? "");
    else if (was === "searcher" || was === "coder") {
      const review = await this.ask("critic", "review");
      if (review !== null) {
        this.criticText = review.trim();
        this.awaiting = "critic";
        return { text: "", call: { name: "critic", args: { input: "Review the latest sub-task." } } };
      }
    } else if (was === "verifier") {
      const score = parseScore(result) ?? 3;
      if (score > REPLAN_SCORE || this.replans >= DEFAULT_EPISODE.maxReplans)
        return { text: this.proposal ?? "" };
      this.replans++;
      said.push((await this.ask("manager", "replan")) ?? "");
    }
    return this.next(said);
  }

  private async next(said: string[]): Promise<Move> {
    this.rounds++;
    if (this.rounds > DEFAULT_EPISODE.maxRounds) return { text: this.proposal ?? "unknown" };
    const { thought, action } = parseManagerReply((await this.ask("manager", "next")) ?? "");
    const text = [...said, thought].filter(Boolean).join("\n");
    if (!action) return { text: this.proposal ?? "unknown" };
    const to: Role = action.kind === "search" ? "searcher" : action.kind === "code" ? "coder" : "verifier";
    if (action.kind === "answer") this.proposal = action.text;
    this.awaiting = to;
    return { text, call: { name: to, args: { input: action.text } } };
  }

  private async worker(role: Role, input: AgentInputItem[]): Promise<Move> {
    const last = input.at(-1)!;
    const result = (last as { type?: string }).type === "function_call_result";
    if (!result) this.workerSteps = 0;
    if (++this.workerSteps > DEFAULT_EPISODE.maxWorkerSteps)
      return { text: "No result: the step budget ran out." };
    const observation: MasMessage[] = result
      ? [
          {
            index: 0,
            from: "tool",
            to: role as "searcher",
            kind: "observation",
            content: text(last),
            ok: this.toolOk.get((last as { callId: string }).callId) ?? true,
            tokensIn: 0,
            tokensOut: 0,
            tokensCached: 0,
            ms: 0,
          },
        ]
      : [];
    const allowed: ToolTag[] = role === "coder" ? ["code"] : [this.searchTool, "crawl_page"];
    const move = parseWorkerReply((await this.ask(role, "work", observation)) ?? "", allowed);
    if (move.kind === "report") return { text: move.text };
    if (move.kind === "malformed") return { text: `No result: ${move.problem}.` };
    const args: Record<string, string> =
      move.tool === "code"
        ? { code: extractCode(move.args)?.code ?? move.args }
        : move.tool === "crawl_page"
          ? { url: move.args }
          : { query: move.args };
    return { text: move.thought, call: { name: move.tool, args } };
  }
}
