import { z } from "zod";
import type { FinishReason, Trajectory } from "../protocol/index.js";

/**
 * The OpenAI chat-completions wire format, as much of it as the agent endpoint honours. Fields
 * outside this list are refused (400) rather than ignored: a caller sending `tools` or
 * `frequency_penalty` would otherwise believe they took effect.
 */
const TextPart = z.object({ type: z.literal("text"), text: z.string() });

// Messages stay open to extra keys: clients attach their own (`name`, `reasoning_content`), and only
// the last user message is read.
const Message = z.looseObject({
  role: z.enum(["system", "developer", "user", "assistant", "tool"]),
  content: z.union([z.string(), z.array(z.union([TextPart, z.looseObject({ type: z.string() })]))]).nullish(),
});

const Positive = z.number().int().positive();

export const ChatRequest = z.strictObject({
  model: z.string().min(1),
  messages: z.array(Message).min(1),
  stream: z.boolean().nullish(),
  stream_options: z.strictObject({ include_usage: z.boolean().nullish() }).nullish(),
  /** Bounds the whole episode's context (usage.total_tokens), not one model call. */
  max_tokens: Positive.nullish(),
  /** OpenAI's newer name for max_tokens; the same budget. */
  max_completion_tokens: Positive.nullish(),
  temperature: z.number().min(0).max(2).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  seed: z.number().int().nullish(),
  /** One episode per request. */
  n: z.literal(1).nullish(),
  user: z.string().nullish(),
});
export type ChatRequest = z.infer<typeof ChatRequest>;

/** The question: the text of the last user message. Undefined when there is none, or it is not text. */
export function questionOf(req: ChatRequest): string | undefined {
  const last = req.messages.findLast((m) => m.role === "user");
  const content = last?.content;
  if (typeof content === "string") return content.trim() ? content : undefined;
  if (!content?.every((p) => p.type === "text")) return undefined;
  const text = content.map((p) => (p as z.infer<typeof TextPart>).text).join("\n");
  return text.trim() ? text : undefined;
}

/** OpenAI's token counts for one episode; see docs/serve.md for what each covers. */
export function usageOf(t: Trajectory) {
  const prompt = t.stats.promptTokens + t.stats.toolTokens;
  return {
    prompt_tokens: prompt,
    completion_tokens: t.stats.modelTokens,
    total_tokens: prompt + t.stats.modelTokens,
  };
}

/** OpenAI has two endings: the model finished ("stop") or a budget cut it ("length"). */
export function openaiFinish(reason: FinishReason): "stop" | "length" {
  return reason === "answer" || reason === "promoted_suggested_answer" ? "stop" : "length";
}

/** The header fields every response and chunk of one request share. */
export interface ReplyHead {
  id: string;
  created: number;
  model: string;
}

export function completionBody(head: ReplyHead, t: Trajectory) {
  return {
    ...head,
    object: "chat.completion" as const,
    choices: [
      {
        index: 0,
        message: { role: "assistant" as const, content: t.answer ?? "" },
        finish_reason: openaiFinish(t.finishReason),
        coa_finish_reason: t.finishReason,
        logprobs: null,
      },
    ],
    usage: usageOf(t),
  };
}

/** One step of the episode as streamed in `delta.coa_step`. */
export interface StepDelta {
  kind: string;
  text: string;
  /** The tool's tag, on `tool_call` steps. */
  tool?: string;
}

export function chunkBody(
  head: ReplyHead,
  delta: { role?: "assistant"; content?: string; coa_step?: StepDelta },
  finish?: FinishReason,
) {
  return {
    ...head,
    object: "chat.completion.chunk" as const,
    choices: [
      {
        index: 0,
        delta,
        finish_reason: finish === undefined ? null : openaiFinish(finish),
        ...(finish === undefined ? {} : { coa_finish_reason: finish }),
        logprobs: null,
      },
    ],
  };
}

/** The last chunk when the client asked for `stream_options.include_usage`: usage, no choices. */
export function usageChunkBody(head: ReplyHead, t: Trajectory) {
  return { ...head, object: "chat.completion.chunk" as const, choices: [], usage: usageOf(t) };
}
