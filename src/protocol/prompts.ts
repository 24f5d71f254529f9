import { DIALECTS, type DialectName, profileIn } from "./dialects.js";
import type { ProfileName, RoleTag, ToolTag } from "./tags.js";

// Our own wording, kept terse on purpose: the embedded model reads the prompt on every example
// and every call, so every token costs. It names each enabled tag once and shows how tools take
// their arguments.
const TOOL_SYNTAX: Record<ToolTag, string> = {
  web_search: "<web_search>query</web_search>",
  crawl_page: "<crawl_page>url1 | url2</crawl_page>",
  wiki_search: "<wiki_search>query</wiki_search>",
  code: "<code>```python\nprint(2 + 2)\n```</code>",
};
const closingRole = (role: RoleTag, dialect: DialectName): string => {
  const { score, answer } = DIALECTS[dialect];
  if (role === "double_check") return `<double_check> ending Score: 1-${score.max}`;
  if (role === "answer" && answer.boxed) return "<answer> holding \\boxed{answer}";
  if (role === "answer" && answer.separator)
    return `<answer> (several answers joined by ${answer.separator})`;
  return `<${role}>`;
};

/**
 * The system prompt that teaches a profile's format under a dialect: its reasoning tags, its tools
 * with their argument syntax, its closing tags, then the re-plan rule where double checks exist. It
 * names no tag the profile disables. A model trained on other words (the AFM agents) is given its own
 * prompt instead (`RenderPromptOptions.systemPrompt`).
 */
export function systemPrompt(profile: ProfileName, dialect: DialectName = "coa"): string {
  const p = profileIn(profile, dialect);
  const opening = (["think", "plan", "reflection"] as const).filter((r) => p.roles.includes(r));
  const closing = (["suggested_answer", "double_check", "answer"] as const).filter((r) =>
    p.roles.includes(r),
  );
  const lines = [
    `Answer in tagged steps: ${opening.map((r) => `<${r}>`).join(", ")}.`,
    `Tools, one call per turn, each result in <observation>: ${p.tools.map((t) => TOOL_SYNTAX[t]).join(", ")}.`,
    `Finish with ${closing.map((r) => closingRole(r, dialect)).join(", ")}.`,
  ];
  if (closing.includes("double_check"))
    lines.push(`A score of ${DIALECTS[dialect].score.replanAtMost} or less means plan again.`);
  return lines.join("\n");
}

/** What ends the prompt; the model's first token comes right after it. */
export const PROMPT_END = "\nSteps:\n";

export interface RenderPromptOptions {
  profile: ProfileName;
  question: string;
  dialect?: DialectName;
  /** The exact system prompt a model was trained with (`--system-prompt-file`); default `systemPrompt`. */
  systemPrompt?: string;
}

const systemOf = (opts: RenderPromptOptions): string =>
  opts.systemPrompt ?? systemPrompt(opts.profile, opts.dialect);

/**
 * The full prompt text before the model's first token, for models served without a chat template:
 * `systemPrompt(profile) + "\n\nQuestion: " + question.trim() + "\nSteps:\n"`.
 * Runtime, distiller, trainer and eval all build prompts here, so token ids agree everywhere.
 */
export function renderPrompt(opts: RenderPromptOptions): string {
  return `${systemOf(opts)}\n\nQuestion: ${opts.question.trim()}${PROMPT_END}`;
}

/** A chat turn as a chat template takes it. */
export interface PromptMessage {
  role: "system" | "user";
  content: string;
}

/**
 * The same prompt as chat messages, for a model served with its chat template: laid out as the
 * dialect's models were trained (see `Dialect.chat`). The template then adds the assistant's header,
 * after which the model's first token comes.
 */
export function promptMessages(opts: RenderPromptOptions): PromptMessage[] {
  const system = systemOf(opts);
  const question = opts.question.trim();
  return DIALECTS[opts.dialect ?? "coa"].chat === "user"
    ? [{ role: "user", content: `${system}\n\nQuestion: ${question}` }]
    : [
        { role: "system", content: system },
        { role: "user", content: question },
      ];
}
