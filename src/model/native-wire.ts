import { z } from "zod";
import type { WireChoice } from "./openai-wire.js";

// The native generation routes of two server families, each giving the sampled ids exactly where
// their OpenAI-compatible routes give none: SGLang's `/generate` and llama.cpp's `/completion`. Only
// the fields we read are listed; the rest pass unchecked.

/** A server family whose own generation route coa speaks. */
export type NativeFamily = "sglang" | "llamacpp";

const Id = z.number().int();

/** One output of SGLang's `/generate` (a request with `n` > 1 answers a list of them). */
const SglangOutput = z.object({
  text: z.string(),
  /** The generated ids (the matched stop string's included). */
  output_ids: z.array(Id).nullish(),
  meta_info: z.object({
    /** `{type: "stop", matched: "<stop string>" | <eos id>}` or `{type: "length", length}`. */
    finish_reason: z
      .object({ type: z.string(), matched: z.union([z.string(), z.number()]).nullish() })
      .nullish(),
    prompt_tokens: Id.optional(),
    completion_tokens: Id.optional(),
    /** `[logprob, id, text | null]` for each generated token, when `return_logprob` was asked. */
    output_token_logprobs: z.array(z.tuple([z.number().nullable(), Id]).rest(z.unknown())).nullish(),
  }),
});
export const SglangGenerateResponse = z.union([SglangOutput, z.array(SglangOutput).min(1)]);
export type SglangGenerateResponse = z.infer<typeof SglangGenerateResponse>;

export function sglangChoices(body: SglangGenerateResponse): WireChoice[] {
  const outputs = Array.isArray(body) ? body : [body];
  return outputs.map((o, index) => {
    const logprobs = o.meta_info.output_token_logprobs ?? undefined;
    const finish = o.meta_info.finish_reason;
    return {
      index,
      text: o.text,
      tokenIds: o.output_ids ?? logprobs?.map((l) => l[1]),
      logprobs: logprobs?.map((l) => l[0] ?? 0),
      finishReason: finish?.type ?? null,
      // A stop string by name; an EOS token (a number) or no stop is null.
      stopReason: typeof finish?.matched === "string" ? finish.matched : null,
    };
  });
}

/** llama.cpp's `/completion` answer (not streamed). */
export const LlamaCompletionResponse = z.object({
  /** The text, without the stopping word. */
  content: z.string(),
  /** The sampled ids when `return_tokens` was asked (the stopping word's included). */
  tokens: z.array(Id).nullish(),
  model: z.string().optional(),
  /** `eos`, `limit` (n_predict reached) or `word` (a stop string, named in `stopping_word`). */
  stop_type: z.string().nullish(),
  stopping_word: z.string().nullish(),
  tokens_predicted: Id.optional(),
  tokens_evaluated: Id.optional(),
  completion_probabilities: z.array(z.object({ id: Id, logprob: z.number() })).nullish(),
});
export type LlamaCompletionResponse = z.infer<typeof LlamaCompletionResponse>;

/** One choice from llama.cpp: the stopping word it cut from `content` put back, its ids being in `tokens`. */
export function llamaChoice(body: LlamaCompletionResponse, index: number): WireChoice {
  const word = body.stop_type === "word" && body.stopping_word ? body.stopping_word : null;
  const probs = body.completion_probabilities ?? undefined;
  return {
    index,
    text: body.content + (word ?? ""),
    tokenIds: body.tokens?.length ? body.tokens : probs?.map((p) => p.id),
    logprobs: probs?.map((p) => p.logprob),
    finishReason: body.stop_type === "limit" ? "length" : "stop",
    stopReason: word,
  };
}

/** `/apply-template` (llama.cpp): the conversation as its chat template writes it. */
export const ApplyTemplateResponse = z.object({ prompt: z.string() });
