import { z } from "zod";
import { ModelResponseError } from "./errors.js";

// The response shapes of OpenAI-compatible servers, with the extensions vLLM and SGLang add. Only
// the fields we read are listed; the rest pass unchecked.

const StopReason = z.union([z.string(), z.number()]).nullish();

const choiceExtras = {
  index: z.number().int().default(0),
  finish_reason: z.string().nullish(),
  /** vLLM: the stop string (or stop token id) that ended generation. */
  stop_reason: StopReason,
  /** SGLang's name for the same thing. */
  matched_stop: StopReason,
  /** vLLM `return_token_ids` (and the embedded engine): the sampled ids. */
  token_ids: z.array(z.number().int()).nullish(),
};

const WireUsage = z.object({ prompt_tokens: z.number().int(), completion_tokens: z.number().int() });

/** A response body: the choices of one endpoint, plus the model name and usage both share. */
const responseOf = <C extends z.ZodRawShape>(choice: C) =>
  z.object({
    model: z.string().optional(),
    choices: z.array(z.object({ ...choiceExtras, ...choice })).min(1),
    usage: WireUsage.nullish(),
  });

export const CompletionsResponse = responseOf({
  text: z.string(),
  logprobs: z
    .object({
      tokens: z.array(z.string()).nullish(),
      token_logprobs: z.array(z.number().nullable()).nullish(),
    })
    .nullish(),
});

export const ChatResponse = responseOf({
  message: z.object({ content: z.string().nullish() }),
  logprobs: z
    .object({ content: z.array(z.object({ token: z.string(), logprob: z.number() })).nullish() })
    .nullish(),
});

export const TokenizeResponse = z.object({ tokens: z.array(z.number().int()) });
/** The text of `/detokenize`: vLLM and the engine answer `prompt`, SGLang `text`, llama.cpp `content`. */
export const DetokenizeResponse = z.union([
  z.object({ prompt: z.string() }).transform((b) => b.prompt),
  z.object({ text: z.string() }).transform((b) => b.text),
  z.object({ content: z.string() }).transform((b) => b.content),
]);
export const ModelsResponse = z.object({ data: z.array(z.object({ id: z.string() })) });

/** One choice, whichever endpoint produced it. */
export interface WireChoice {
  index: number;
  text: string;
  tokenIds?: number[];
  /** Token strings from logprobs; vLLM writes them as "token_id:N" when asked to. */
  tokenStrings?: string[];
  logprobs?: number[];
  finishReason: string | null;
  /** The stop that matched, null at EOS; undefined when the server never says (OpenAI, llama.cpp). */
  stopReason: string | number | null | undefined;
}

export function completionsChoices(body: z.infer<typeof CompletionsResponse>): WireChoice[] {
  return body.choices.map((c) => ({
    index: c.index,
    text: c.text,
    tokenIds: c.token_ids ?? undefined,
    tokenStrings: c.logprobs?.tokens ?? undefined,
    // The first prompt token has a null logprob when echoing; generated tokens never do.
    logprobs: c.logprobs?.token_logprobs?.map((l) => l ?? 0),
    finishReason: c.finish_reason ?? null,
    stopReason: stopReasonOf(c),
  }));
}

export function chatChoices(body: z.infer<typeof ChatResponse>): WireChoice[] {
  return body.choices.map((c) => ({
    index: c.index,
    text: c.message.content ?? "",
    tokenIds: c.token_ids ?? undefined,
    tokenStrings: c.logprobs?.content?.map((t) => t.token),
    logprobs: c.logprobs?.content?.map((t) => t.logprob),
    finishReason: c.finish_reason ?? null,
    stopReason: stopReasonOf(c),
  }));
}

/** vLLM's `stop_reason` or SGLang's `matched_stop`; undefined when the body has neither field. */
function stopReasonOf(c: { stop_reason?: string | number | null; matched_stop?: string | number | null }) {
  if (c.stop_reason === undefined && c.matched_stop === undefined) return undefined;
  return c.stop_reason ?? c.matched_stop ?? null;
}

/** Validates a response body, naming the first field that does not fit. */
export function parseWire<T>(schema: z.ZodType<T>, body: unknown, url: string): T {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const field = issue.path.length ? issue.path.join(".") : "(body)";
  throw new ModelResponseError(`${url} returned an unexpected body: ${field}: ${issue.message}`, url);
}

const TOKEN_ID = /^token_id:(\d+)$/;

/** Ids from vLLM's `return_tokens_as_token_ids` strings, or undefined unless every entry has that form. */
export function idsFromTokenStrings(tokens: readonly string[] | undefined): number[] | undefined {
  if (!tokens?.length) return undefined;
  const ids: number[] = [];
  for (const t of tokens) {
    const m = TOKEN_ID.exec(t);
    if (!m) return undefined;
    ids.push(Number(m[1]));
  }
  return ids;
}
