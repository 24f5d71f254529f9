import { ModelHttpError } from "./errors.js";
import type { JsonHttp } from "./json-http.js";
import type { NativeFamily } from "./native-wire.js";
import { TokenizeResponse } from "./openai-wire.js";

/** What an OpenAI-compatible server turned out to support. */
export interface ServerSupport {
  /** `/tokenize` as vLLM and SGLang serve it (and so token-id prompts on `/v1/completions`). */
  tokenize: boolean;
  /** `/v1/completions` at all; chat-only servers (OpenAI's chat models) answer it 404. */
  completions: boolean;
  /**
   * A family whose own route returns exact ids: SGLang (`GET /get_model_info` answers, `/generate`)
   * or llama.cpp (`/tokenize` takes `content`, `/completion`).
   */
  native?: NativeFamily;
}

/** A 4xx other than a timeout or rate limit: the server does not serve the request as sent. */
export const refuses = (err: unknown): err is ModelHttpError =>
  err instanceof ModelHttpError &&
  err.status >= 400 &&
  err.status < 500 &&
  err.status !== 408 &&
  err.status !== 429;

/**
 * Asks a server what it supports, with two or three small requests. `/tokenize` of a short text in
 * vLLM's shape: tokens mean ids in and out, and then `GET /get_model_info` tells SGLang (whose
 * native `/generate` returns the ids its OpenAI routes do not) from vLLM. A `/tokenize` that answers
 * no tokens is llama.cpp's, which takes `content`: asked so, it names llama.cpp. Any other server gets
 * a one-token completion, refused by chat-only servers. Connection failures and 5xx are not
 * answers: they are thrown as the client would throw them.
 */
export async function detectServer(
  http: JsonHttp,
  root: string,
  model: string,
  signal?: AbortSignal,
): Promise<ServerSupport> {
  const tokens = (body: unknown) => TokenizeResponse.safeParse(body).data?.tokens.length ?? 0;
  const answer = await http
    .post(`${root}/tokenize`, { model, prompt: "ok", add_special_tokens: false }, signal)
    .catch(refusedAs(null));
  if (answer !== null && tokens(answer) > 0) {
    const info = await http.get(`${root}/get_model_info`, signal).catch(refusedAs(null));
    const sglang = typeof (info as { model_path?: unknown } | null)?.model_path === "string";
    return { tokenize: true, completions: true, ...(sglang ? { native: "sglang" as const } : {}) };
  }
  if (answer !== null) {
    const llama = await http.post(`${root}/tokenize`, { content: "ok" }, signal).catch(refusedAs(null));
    if (llama !== null && tokens(llama) > 0) return { tokenize: true, completions: true, native: "llamacpp" };
  }
  const tokenize = false;
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
