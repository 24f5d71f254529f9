import type { Purpose } from "./agents.js";
import { ROLE_PROMPTS, type Role } from "./prompts.js";
import type { MasMessage } from "./trace.js";

/** One message as an agent reads it: who said it to whom, what kind it is, and its text. */
export function renderMessage(m: MasMessage): string {
  const body =
    m.kind === "tool_call" && m.tool ? `<${m.tool.name}>${m.tool.args}</${m.tool.name}>` : m.content;
  const score = m.kind === "verdict" && m.score !== undefined ? ` (score ${m.score})` : "";
  return `[${m.from} -> ${m.to}] ${m.kind}${score}:\n${body}`;
}

const ASKS: Record<Purpose, string> = {
  plan: "Write the plan.",
  next: "Your next move.",
  replan: "The verifier rejected the answer. Write a revised plan.",
  work: "Your reply.",
  review: "Your review.",
  verify: "Your verdict.",
};

/** The full text of an agent call: role prompt, the given messages, and what is asked now. */
export function renderContext(role: Role, purpose: Purpose, messages: readonly MasMessage[]): string {
  return `${ROLE_PROMPTS[role]}\n\n${messages.map(renderMessage).join("\n\n")}\n\n[${role}] ${ASKS[purpose]}\n`;
}
