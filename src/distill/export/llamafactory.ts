import type { Tokenizer } from "../../model/index.js";
import { closeTag, openTag, PROFILES, type ToolTag, type Trajectory } from "../../protocol/index.js";
import { chatPrompt, decodeTurns, observationOf, splitToolCall } from "./turns.js";
import type { Exporter } from "./types.js";

/** LLaMA-Factory sharegpt roles (its defaults for `tags`). */
export interface SharegptTurn {
  from: "human" | "gpt" | "function_call" | "observation";
  value: string;
}

export interface SharegptRecord {
  conversations: SharegptTurn[];
  system: string;
  /** JSON list of function definitions (multi-turn variant only). */
  tools?: string;
}

/** Each tool as a function with one string parameter holding the tag's raw text. */
export const TOOL_FUNCTIONS: Readonly<Record<ToolTag, { param: string; description: string }>> = {
  web_search: {
    param: "query",
    description: "Search the web. Returns numbered results: title, url, snippet.",
  },
  crawl_page: { param: "urls", description: "Read web pages, urls separated by ' | '. Returns their text." },
  code: {
    param: "code",
    description: "Run a ```python fenced block (optional ```stdin block). Returns its output.",
  },
  wiki_search: { param: "query", description: "Search the encyclopedia. Returns numbered passages." },
};

export const SINGLE_FILE = "coa_single.json";
export const MULTITURN_FILE = "coa_multiturn.json";

/** Form (a): one assistant turn holding the whole trajectory, observations inline (mask them). */
export function singleTurnRecord(t: Trajectory, tok: Tokenizer): SharegptRecord {
  const [system, user] = chatPrompt(t);
  const completion = decodeTurns(t, tok)
    .map((turn) => turn.text)
    .join("");
  return {
    conversations: [
      { from: "human", value: user!.content },
      { from: "gpt", value: completion },
    ],
    system: system!.content,
  };
}

/**
 * Form (b): function_call / observation turns; the last turn is gpt. A function_call value is the
 * turn's role steps as one thought, `<think>\n…\n</think>\n\n`, then `{"name", "arguments"}` JSON.
 * LLaMA-Factory's FunctionFormatter cuts the thought with a non-greedy `<think>(.*?)</think>` and
 * parses the rest as JSON, so the thought must hold no `</think>` of its own: the turn's think steps
 * lose their tags and keep their text in place (`thoughtOf`). The newlines match both its old
 * (`<think>`, `</think>`) and current (`<think>\n`, `\n</think>\n\n`) thought words.
 */
export function multiTurnRecord(t: Trajectory, tok: Tokenizer): SharegptRecord {
  const [system, user] = chatPrompt(t);
  const conversations: SharegptTurn[] = [{ from: "human", value: user!.content }];
  for (const turn of decodeTurns(t, tok)) {
    if (turn.source === "tool") {
      conversations.push({ from: "observation", value: observationOf(turn) });
      continue;
    }
    const { before, call } = splitToolCall(turn);
    if (!call) {
      conversations.push({ from: "gpt", value: turn.text });
      continue;
    }
    const fn = { name: call.tool, arguments: { [TOOL_FUNCTIONS[call.tool].param]: call.args } };
    conversations.push({ from: "function_call", value: `${thoughtOf(before)}${JSON.stringify(fn)}` });
  }
  return { conversations, system: system!.content, tools: JSON.stringify(toolDefinitions(t)) };
}

/**
 * A function_call turn's role steps as the call's thought. Written even when empty (LLaMA-Factory's
 * reasoning templates add an empty one themselves) so a `<think>` inside the JSON is never taken for it.
 */
function thoughtOf(roleSteps: string): string {
  const flat = roleSteps.replaceAll(openTag("think"), "").replaceAll(closeTag("think"), "");
  return `${openTag("think")}\n${flat}\n${closeTag("think")}\n\n`;
}

function toolDefinitions(t: Trajectory) {
  return PROFILES[t.profile].tools.map((name) => {
    const { param, description } = TOOL_FUNCTIONS[name];
    return {
      name,
      description,
      parameters: { type: "object", properties: { [param]: { type: "string" } }, required: [param] },
    };
  });
}

/** The `dataset_info.json` entries: point LLaMA-Factory's `dataset_dir` at this folder. */
export const DATASET_INFO = {
  coa_single: {
    file_name: SINGLE_FILE,
    formatting: "sharegpt",
    columns: { messages: "conversations", system: "system" },
    tags: { role_tag: "from", content_tag: "value", user_tag: "human", assistant_tag: "gpt" },
  },
  coa_multiturn: {
    file_name: MULTITURN_FILE,
    formatting: "sharegpt",
    columns: { messages: "conversations", system: "system", tools: "tools" },
    tags: {
      role_tag: "from",
      content_tag: "value",
      user_tag: "human",
      assistant_tag: "gpt",
      observation_tag: "observation",
      function_tag: "function_call",
    },
  },
} as const;

/** A JSON array, one record per line, so big files stay greppable. */
const jsonArray = (records: readonly unknown[]): string =>
  records.length ? `[\n${records.map((r) => JSON.stringify(r)).join(",\n")}\n]\n` : "[]\n";

export const exportLlamaFactory: Exporter = ({ trajectories, tokenizer }) => [
  {
    path: `llamafactory/${SINGLE_FILE}`,
    content: jsonArray(trajectories.map((t) => singleTurnRecord(t, tokenizer))),
    records: trajectories.length,
  },
  {
    path: `llamafactory/${MULTITURN_FILE}`,
    content: jsonArray(trajectories.map((t) => multiTurnRecord(t, tokenizer))),
    records: trajectories.length,
  },
  {
    path: "llamafactory/dataset_info.json",
    content: `${JSON.stringify(DATASET_INFO, null, 2)}\n`,
    records: 2,
  },
];
