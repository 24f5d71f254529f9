import type { Tokenizer } from "../../model/index.js";
import type { Trajectory } from "../../protocol/index.js";
import { jsonlText } from "../../util/index.js";
import { type ChatMessage, chatPrompt, decodeTurns } from "./turns.js";
import type { Exporter } from "./types.js";

export type OpenAiMessage = ChatMessage & { weight?: 0 | 1 };

/**
 * OpenAI fine-tuning chat JSONL. The trajectory stays one assistant voice, as in CoA: model turns
 * are assistant messages with weight 1, observations (as the runtime wraps them) are assistant
 * messages with weight 0, so they are context, never trained on. Joined, the assistant contents
 * are the completion text exactly.
 */
export function openAiRecord(t: Trajectory, tok: Tokenizer): { messages: OpenAiMessage[] } {
  const turns = decodeTurns(t, tok).map(
    (turn): OpenAiMessage => ({
      role: "assistant",
      content: turn.text,
      weight: turn.source === "model" ? 1 : 0,
    }),
  );
  return { messages: [...chatPrompt(t), ...turns] };
}

export const exportOpenAi: Exporter = ({ trajectories, tokenizer }) => [
  {
    path: "openai.jsonl",
    content: jsonlText(trajectories.map((t) => openAiRecord(t, tokenizer))),
    records: trajectories.length,
  },
];
