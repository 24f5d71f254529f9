import type { Tokenizer } from "../../model/index.js";
import { parseCoa, type Step, systemPrompt, type Trajectory } from "../../protocol/index.js";

/** A segment's text, decoded from its ids (text views always come from ids, never the reverse). */
export interface Turn {
  source: "model" | "tool";
  text: string;
}

export function decodeTurns(t: Trajectory, tok: Tokenizer): Turn[] {
  return t.segments.map((s) => ({ source: s.source, text: tok.decode(s.ids) }));
}

/** The observation inside a tool turn (`\n<observation>…</observation>\n`), as the model reads it. */
export function observationOf(turn: Turn): string {
  const step = parseCoa(turn.text).steps[0];
  if (step?.type !== "observation")
    throw new Error(`tool segment holds no observation: ${turn.text.slice(0, 80)}`);
  return step.text;
}

/** A model turn split at its tool call: the role steps' text before it, and the call. */
export function splitToolCall(turn: Turn): {
  before: string;
  call: Extract<Step, { type: "tool_call" }> | null;
} {
  const last = parseCoa(turn.text).steps.at(-1);
  if (last?.type !== "tool_call" || !last.span) return { before: turn.text, call: null };
  return { before: turn.text.slice(0, last.span.start).trimEnd(), call: last };
}

export interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool";
  content: string;
}

/**
 * The prompt as chat messages, shared by every chat export so SFT (LLaMA-Factory, TRL, OpenAI) and
 * RL (verl) data agree: the profile's system prompt, then the bare question as the user turn. The
 * native export keeps `renderPrompt`'s exact completion-style ids instead.
 */
export function chatPrompt(t: Pick<Trajectory, "profile" | "question">): ChatMessage[] {
  return [
    { role: "system", content: systemPrompt(t.profile) },
    { role: "user", content: t.question.trim() },
  ];
}
