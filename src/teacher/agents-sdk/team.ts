import { Agent, type ModelProvider, Runner, type RunResult, tool } from "@openai/agents";
import { z } from "zod";
import type { ToolTag } from "../../protocol/index.js";
import type { Task } from "../../tasks/index.js";
import type { Toolbox } from "../episode.js";

// The team's instructions, written for a tool-calling framework; about as long as coa's own role
// prompts (src/teacher/prompts.ts), so that neither side of the cost comparison is padded.
const INSTRUCTIONS = {
  manager: [
    "You lead a research team. Tools: searcher (finds one fact in the encyclopedia), coder (runs one",
    "computation in Python), critic (reviews the latest sub-task), verifier (scores a proposed answer 1-5).",
    "Start with a short numbered plan. Delegate one fact or computation at a time. Before answering, send",
    "the answer to the verifier; a score of 2 or less means revise the plan. Your final reply is the answer",
    "only: a name, a word or a number.",
  ].join("\n"),
  searcher: [
    "You are the searcher. Find the fact you were asked for with web_search and crawl_page. Prefer the",
    "encyclopedia article whose title is exactly the name you need; blogs and forums are weak. Reply with",
    "the fact and its source: <fact>. Source: <title> (<url>)",
  ].join("\n"),
  coder:
    "You are the coder. Compute what you were asked with the code tool (print only the result), then reply with the result.",
  critic: [
    "You are the critic. Look for a wrong entity, a weak source, disagreeing sources, a failed tool call or",
    "an impossible result in the latest sub-task; name it and what to redo. Otherwise reply NO_ISSUES.",
  ].join("\n"),
  verifier: [
    "You are the verifier. Check the proposed answer against the question and the team's findings.",
    "Reply in one or two sentences, then a last line: SCORE: <1-5> (5 = surely right, 2 or less = redo).",
  ].join("\n"),
};

export interface ReferenceTeamOptions {
  /** Plays every agent: the offline ExpertModelProvider, or an OpenAI-compatible endpoint's provider. */
  provider: ModelProvider;
  /** coa's real tools (search, crawl, sandboxed code) for this task's world. */
  tools: Toolbox;
  /** Each tool's success, by call id (the expert model reads it); optional for online models. */
  toolOk?: Map<string, boolean>;
  searchTool?: "web_search" | "wiki_search";
  /** Model names asked of the provider, per role (default: the role's name). */
  models?: Partial<Record<keyof typeof INSTRUCTIONS, string>>;
  observationChars?: number;
  /** False: the SDK traces the run without content, as with sensitive data turned off. */
  traceContent?: boolean;
  /**
   * Given every finished run: each agent-as-tool's nested run (when it returns) and the manager's run
   * last, for `coa import --from openai-agents-run` (docs/import.md).
   */
  // biome-ignore lint/suspicious/noExplicitAny: the results of agents of any context and output
  onResult?: (result: RunResult<any, any>) => void;
}

/** A coa tool as a function tool; a failed call throws, so the framework records a span error. */
function coaTool(tag: ToolTag, field: "query" | "url" | "code", task: Task, opts: ReferenceTeamOptions) {
  const wrapped = opts.tools.get(tag);
  if (!wrapped) throw new Error(`the reference team needs the ${tag} tool`);
  const what = { query: "the search query", url: "the page's URL", code: "a Python program" }[field];
  return tool({
    name: tag,
    description: `${wrapped.description ?? tag}`.slice(0, 300),
    parameters: z.object({ [field]: z.string().describe(what) }),
    // The failure's text goes to the model as is, as coa's own tools report it.
    errorFunction: (_ctx, err) => (err as Error).message,
    execute: async (input, _ctx, details) => {
      const raw = (input as Record<string, string>)[field];
      const args = field === "code" ? `\`\`\`python\n${raw}\n\`\`\`` : raw;
      const obs = await wrapped.run(wrapped.parseArgs(args), {
        timeoutMs: 15_000,
        maxChars: opts.observationChars ?? 1200,
        goal: task.question,
      });
      const callId = details?.toolCall?.callId;
      if (callId) opts.toolOk?.set(callId, obs.ok);
      if (!obs.ok) throw new Error(obs.text);
      return obs.text;
    },
  });
}

/**
 * coa's manager/searcher/coder/critic/verifier team built with the OpenAI Agents SDK: the workers,
 * critic and verifier are agents the manager calls as tools, and the workers' tools wrap coa's.
 * Runs one task; the SDK's tracing records it (add a JsonlTraceProcessor to keep the traces).
 */
export async function runReferenceTeam(task: Task, opts: ReferenceTeamOptions): Promise<string | null> {
  const model = (role: keyof typeof INSTRUCTIONS) => opts.models?.[role] ?? role;
  const search = opts.searchTool ?? "web_search";
  // A nested run's output is its final text, as the SDK's default extractor gives it for a text agent.
  const onResult = opts.onResult;
  const nested = onResult && {
    // biome-ignore lint/suspicious/noExplicitAny: any agent's nested run
    customOutputExtractor: (r: RunResult<any, any>) => {
      onResult(r);
      return typeof r.finalOutput === "string" ? r.finalOutput : "";
    },
  };
  const worker = (name: "searcher" | "coder", tools: ReturnType<typeof coaTool>[]) =>
    new Agent({ name, instructions: INSTRUCTIONS[name], model: model(name), tools });
  const searcher = worker("searcher", [
    coaTool(search, "query", task, opts),
    coaTool("crawl_page", "url", task, opts),
  ]);
  const coder = worker("coder", [coaTool("code", "code", task, opts)]);
  const plain = (name: "critic" | "verifier") =>
    new Agent({ name, instructions: INSTRUCTIONS[name], model: model(name) });
  const manager = new Agent({
    name: "manager",
    instructions: INSTRUCTIONS.manager,
    model: model("manager"),
    tools: [
      searcher.asTool({
        toolName: "searcher",
        toolDescription: "Finds one fact in the encyclopedia.",
        ...nested,
      }),
      coder.asTool({ toolName: "coder", toolDescription: "Runs one computation in Python.", ...nested }),
      plain("critic").asTool({
        toolName: "critic",
        toolDescription: "Reviews the latest sub-task.",
        ...nested,
      }),
      plain("verifier").asTool({
        toolName: "verifier",
        toolDescription: "Scores a proposed answer 1-5.",
        ...nested,
      }),
    ],
  });
  const runner = new Runner({
    modelProvider: opts.provider,
    workflowName: "coa reference team",
    traceMetadata: { task_id: task.id },
    traceIncludeSensitiveData: opts.traceContent ?? true,
  });
  const result = await runner.run(manager, task.question, { maxTurns: 40 });
  onResult?.(result);
  return typeof result.finalOutput === "string" ? result.finalOutput : null;
}
