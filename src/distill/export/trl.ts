import type { Tokenizer } from "../../model/index.js";
import type { Trajectory } from "../../protocol/index.js";
import { jsonlText } from "../../util/index.js";
import { type ChatMessage, chatPrompt, decodeTurns, observationOf, splitToolCall } from "./turns.js";
import type { Exporter } from "./types.js";

export type TrlMessage = ChatMessage & { name?: string };

/**
 * TRL's conversational language-modeling format: model turns are assistant messages (each ending
 * at its tool call's closing tag), tool results are `tool` messages. Train with
 * `assistant_only_loss=True` so tool text gets no loss.
 */
export function trlRecord(t: Trajectory, tok: Tokenizer): { messages: TrlMessage[] } {
  const messages: TrlMessage[] = chatPrompt(t);
  let lastTool: string | undefined;
  for (const turn of decodeTurns(t, tok)) {
    if (turn.source === "model") {
      messages.push({ role: "assistant", content: turn.text });
      lastTool = splitToolCall(turn).call?.tool;
    } else
      messages.push({ role: "tool", ...(lastTool ? { name: lastTool } : {}), content: observationOf(turn) });
  }
  return { messages };
}

export const exportTrl: Exporter = ({ trajectories, tokenizer }) => [
  {
    path: "trl.jsonl",
    content: jsonlText(trajectories.map((t) => trlRecord(t, tokenizer))),
    records: trajectories.length,
  },
];
