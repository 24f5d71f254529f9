import { REPLAN_SCORE } from "./rules.js";
import { PROFILES, type ProfileName, type RoleTag, type ToolTag } from "./tags.js";

// Our own wording, kept terse on purpose: the embedded model reads the prompt on every example
// and every call, so every token costs. It names each enabled tag once and shows how tools take
// their arguments.
const TOOL_SYNTAX: Record<ToolTag, string> = {
  web_search: "<web_search>query</web_search>",
  crawl_page: "<crawl_page>url1 | url2</crawl_page>",
  wiki_search: "<wiki_search>query</wiki_search>",
  code: "<code>```python\nprint(2 + 2)\n```</code>",
};
const CLOSING_ROLES: Partial<Record<RoleTag, string>> = {
  suggested_answer: "<suggested_answer>",
  double_check: "<double_check> ending Score: 1-5",
  answer: "<answer>",
};

/**
 * The system prompt that teaches a profile's format: its reasoning tags, its tools with their
 * argument syntax, its closing tags, then the re-plan rule where double checks exist. It names no
 * tag the profile disables.
 */
export function systemPrompt(profile: ProfileName): string {
  const p = PROFILES[profile];
  const opening = (["think", "plan", "reflection"] as const).filter((r) => p.roles.includes(r));
  const closing = (["suggested_answer", "double_check", "answer"] as const).filter((r) =>
    p.roles.includes(r),
  );
  const lines = [
    `Answer in tagged steps: ${opening.map((r) => `<${r}>`).join(", ")}.`,
    `Tools, one call per turn, each result in <observation>: ${p.tools.map((t) => TOOL_SYNTAX[t]).join(", ")}.`,
    `Finish with ${closing.map((r) => CLOSING_ROLES[r]).join(", ")}.`,
  ];
  if (closing.includes("double_check")) lines.push(`A score of ${REPLAN_SCORE} or less means plan again.`);
  return lines.join("\n");
}

/** What ends the prompt; the model's first token comes right after it. */
export const PROMPT_END = "\nSteps:\n";

/**
 * The full prompt text before the model's first token:
 * `systemPrompt(profile) + "\n\nQuestion: " + question.trim() + "\nSteps:\n"`.
 * Runtime, distiller, trainer and eval all build prompts here, so token ids agree everywhere.
 */
export function renderPrompt(opts: { profile: ProfileName; question: string }): string {
  return `${systemPrompt(opts.profile)}\n\nQuestion: ${opts.question.trim()}${PROMPT_END}`;
}
