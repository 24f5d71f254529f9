import { ModelHttpError } from "./errors.js";
import type { JsonHttp } from "./json-http.js";
import { TokenizeResponse } from "./openai-wire.js";

/** What an OpenAI-compatible server turned out to support. */
export interface ServerSupport {
  /** `/tokenize` as vLLM and SGLang serve it (and so token-id prompts on `/v1/completions`). */
  tokenize: boolean;
  /** `/v1/completions` at all; chat-only servers (OpenAI's chat models) answer it 404. */
  completions: boolean;
}

/** A 4xx other than a timeout or rate limit: the server does not serve the request as sent. */
export const refuses = (err: unknown): err is ModelHttpError =>
  err instanceof ModelHttpError &&
  err.status >= 400 &&
  err.status < 500 &&
  err.status !== 408 &&
  err.status !== 429;

/**
 * Asks a server what it supports, with at most two small requests: `/tokenize` of a short text
 * (vLLM's shape; llama.cpp's route takes another field and answers with no tokens, which counts as
 * none), then, only for a server without it, a one-token completion, refused by chat-only servers.
 * Connection failures and 5xx are not answers: they are thrown as the client would throw them.
 */
export async function detectServer(
  http: JsonHttp,
  root: string,
  model: string,
  signal?: AbortSignal,
): Promise<ServerSupport> {
  const tokenize = await http
    .post(`${root}/tokenize`, { model, prompt: "ok", add_special_tokens: false }, signal)
    .then((body) => (TokenizeResponse.safeParse(body).data?.tokens.length ?? 0) > 0, refusedAs(false));
  if (tokenize) return { tokenize, completions: true };
  const completions = await http
    .post(`${root}/v1/completions`, { model, prompt: "ok", max_tokens: 1 }, signal)
    .then(
      () => true,
      (err) => {
        if (refuses(err) && (err.status === 404 || err.status === 405)) return false;
        // Any other refusal (a field it dislikes) still shows the route exists.
        if (refuses(err)) return true;
        throw err;
      },
    );
  return { tokenize, completions };
}

const refusedAs =
  <T>(value: T) =>
  (err: unknown): T => {
    if (refuses(err)) return value;
    throw err;
  };
