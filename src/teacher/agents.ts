import type { Task } from "../tasks/index.js";
import type { Role } from "./prompts.js";
import type { MasMessage } from "./trace.js";

/** What an agent call is for. */
export type Purpose = "plan" | "next" | "replan" | "work" | "review" | "verify";

/** One agent call: its role, what it is asked, and the messages it is given (its whole context). */
export interface AgentCall {
  role: Role;
  purpose: Purpose;
  messages: readonly MasMessage[];
  /** The role prompt and the messages rendered as one text: exactly what a model would read. */
  context: string;
}

/** What the agent wrote, and what the call cost in the driver's tokenizer. */
export interface AgentReply {
  text: string;
  tokensIn: number;
  tokensOut: number;
  ms: number;
}

/**
 * Who plays the agents. The orchestration (episode.ts) is the same for every driver: it decides who
 * is called with which messages, parses the replies, runs the tools and records the trace.
 */
export interface Driver {
  readonly name: "expert" | "llm";
  /** Model name as recorded in traces. */
  readonly model: string;
  /** Vocabulary the token counts are in. */
  readonly tokenizer: string;
  /** A fresh set of agents for one task. */
  episode(task: Task): DriverEpisode;
}

export interface DriverEpisode {
  /** The agent's reply; null when the agent had nothing to add (the expert critic, unprompted). */
  call(call: AgentCall): Promise<AgentReply | null>;
}
