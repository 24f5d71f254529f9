import { z } from "zod";

export const AgentName = z.enum(["user", "manager", "searcher", "coder", "critic", "verifier", "tool"]);
export type AgentName = z.infer<typeof AgentName>;

/** What a message does in the multi-agent conversation; the distiller maps these to CoA tags. */
export const MessageKind = z.enum([
  "task", // user → manager: the question
  "plan", // manager's plan or re-plan
  "delegate", // manager → worker: a sub-task
  "reasoning", // any agent's thinking before acting
  "tool_call", // worker → tool
  "observation", // tool → worker: the tool's result, verbatim
  "report", // worker → manager: what the sub-task found
  "reflection", // critic → manager: progress, conflicts, mistakes
  "proposal", // manager → verifier: a candidate answer
  "verdict", // verifier → manager: a 1–5 score and its reasons
  "final", // manager → user: the answer
]);
export type MessageKind = z.infer<typeof MessageKind>;

export const MasMessage = z.object({
  index: z.number().int().nonnegative(),
  from: AgentName,
  to: AgentName,
  kind: MessageKind,
  content: z.string(),
  /** For tool_call: the tool and its plain-text arguments, as a CoA tool tag would hold them. */
  tool: z
    .object({ name: z.enum(["web_search", "crawl_page", "code", "wiki_search"]), args: z.string() })
    .optional(),
  /** For verdict: the verifier's 1–5 score. */
  score: z.number().int().min(1).max(5).optional(),
  /** For observation: whether the tool succeeded. */
  ok: z.boolean().optional(),
  /** Tokens the producing agent call read and wrote (0 for tool messages), counted with `MasTrace.tokenizer`. */
  tokensIn: z.number().int().nonnegative().default(0),
  tokensOut: z.number().int().nonnegative().default(0),
  /**
   * Of `tokensIn`, those a server's prefix cache would not recompute: the longest start the call's
   * context shares with an earlier call's context and reply in this episode (in proportion to text).
   */
  tokensCached: z.number().int().nonnegative().default(0),
  ms: z.number().nonnegative().default(0),
});
export type MasMessage = z.infer<typeof MasMessage>;

/**
 * Why `coa import` could not turn a framework's trace into a distillable one: the framework recorded
 * it without content (sensitive data off), or a tool has no CoA tag. The distiller drops such a
 * trace with this reason at its parse stage.
 */
export const ImportDropReason = z.enum(["redacted", "unmapped_tool"]);
export type ImportDropReason = z.infer<typeof ImportDropReason>;

/** The file of a teacher run (and of `coa import`): one `MasTrace` per line, what `coa distill` reads. */
export const MAS_TRACES_FILE = "traces.jsonl";

/** One multi-agent episode on one task: every message, who said it to whom, and what it cost. */
export const MasTrace = z.object({
  version: z.literal(1),
  taskId: z.string(),
  question: z.string(),
  answers: z.array(z.string()),
  taskKind: z.string(),
  source: z.string(),
  /** "import": a team from another framework, brought in by `coa import`. */
  driver: z.enum(["expert", "llm", "import"]),
  model: z.string(),
  tokenizer: z.string(),
  messages: z.array(MasMessage),
  finalAnswer: z.string().nullable(),
  reward: z.number().nullable(),
  /** Set when the episode broke (model down, all retries spent); distinct from a wrong answer. */
  error: z.string().nullable().default(null),
  /** Imported traces only: set when the trace is kept for its cost but cannot be distilled. */
  unusable: z.object({ reason: ImportDropReason, detail: z.string() }).optional(),
  stats: z.object({
    agentCalls: z.number().int().nonnegative(),
    toolCalls: z.number().int().nonnegative(),
    replans: z.number().int().nonnegative(),
    reflections: z.number().int().nonnegative(),
    tokensIn: z.number().int().nonnegative(),
    tokensOut: z.number().int().nonnegative(),
    tokensCached: z.number().int().nonnegative().default(0),
    wallMs: z.number().nonnegative(),
  }),
});
export type MasTrace = z.infer<typeof MasTrace>;
