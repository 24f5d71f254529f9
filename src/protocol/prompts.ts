import { REPLAN_SCORE } from "./rules.js";
import { PROFILES, type ProfileName, type RoleTag, type ToolTag } from "./tags.js";

// Our own wording, kept short on purpose: the embedded model reads the prompt on every example,
// so every character costs. Each line shows a tag in use, with its argument syntax.
const ROLE_LINES: Record<RoleTag, string> = {
  think: "<think>reasoning</think>",
  plan: "<plan>next steps</plan>",
  reflection: "<reflection>what went wrong</reflection>",
  suggested_answer: "<suggested_answer>candidate answer</suggested_answer>",
  double_check: "<double_check>verify it; end with Score: 1-5 (5 = surely right)</double_check>",
  answer: "<answer>final answer only</answer>",
};
const TOOL_LINES: Record<ToolTag, string> = {
  web_search: "<web_search>plain-text query</web_search>",
  crawl_page: "<crawl_page>url1 | url2</crawl_page>",
  wiki_search: "<wiki_search>plain-text query</wiki_search>",
  code: "<code>```python\nprint(2 + 2)\n```</code>",
};

/**
 * The system prompt that teaches a profile's format: one usage line per enabled tag (roles, then
 * tools, then the closing roles), then the rules. It names no tag the profile disables.
 */
export function systemPrompt(profile: ProfileName): string {
  const p = PROFILES[profile];
  const has = (role: RoleTag) => p.roles.includes(role);
  const opening: RoleTag[] = ["think", "plan", "reflection"];
  const closing: RoleTag[] = ["suggested_answer", "double_check", "answer"];
  const lines = [
    "Solve the question step by step, each step inside its tag:",
    ...opening.filter(has).map((r) => ROLE_LINES[r]),
    ...p.tools.map((t) => TOOL_LINES[t]),
    ...closing.filter(has).map((r) => ROLE_LINES[r]),
    "One tool call per turn. The system puts each result in <observation>; never write that tag yourself.",
  ];
  if (has("suggested_answer") && has("double_check"))
    lines.push(`Double check every suggested answer; a score of ${REPLAN_SCORE} or less means plan again.`);
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
