import { ByteTokenizer } from "../byte-tokenizer.js";
import { type FixtureReply, type FixtureRequest, FixtureServer } from "../fixture-server.js";
import type { ChatMessage } from "../types.js";

// Loopback stand-ins for the server families coa meets, each built from the family's documented
// request and response shapes (not from our client), so a test against them shows what a real one
// would do to us. The "model" behind every family is a function of the text it reads, its ids the
// byte tokenizer's.

/** Which server family a fake behaves like. */
export type ServerFamily = "vllm" | "llamacpp" | "ollama" | "openai";

/** The fake model: what it writes after reading `context` (the prompt, its chat template applied). */
export type FakeModel = (context: string) => string;

export interface FakeServerOptions {
  /** Served model name (`GET /v1/models`). */
  name?: string;
  /** vLLM only: the model has a chat template (a base model has none, and `/tokenize` refuses messages). */
  chatTemplate?: boolean;
}

const bytes = new ByteTokenizer();

/** Qwen's ChatML, default system turn included: what Qwen2.5 and the AFM models it grew into read. */
export const DEFAULT_SYSTEM = "You are a helpful assistant.";

/**
 * Messages through ChatML as Hugging Face's `apply_chat_template` renders them: a final assistant
 * message is left open when continued, else a generation prompt opens a new assistant turn.
 */
export function chatml(messages: readonly ChatMessage[], opts: { continueFinal: boolean }): string {
  const all =
    messages[0]?.role === "system" ? messages : [{ role: "system", content: DEFAULT_SYSTEM }, ...messages];
  let out = "";
  all.forEach((m, i) => {
    out += `<|im_start|>${m.role}\n${m.content}`;
    if (!(opts.continueFinal && i === all.length - 1)) out += "<|im_end|>\n";
  });
  return opts.continueFinal ? out : `${out}<|im_start|>assistant\n`;
}

interface Generated {
  text: string;
  ids: number[];
  finish: "stop" | "length";
  /** The stop string matched, null at EOS. */
  stop: string | null;
}

/** Runs the model on `context` and cuts at the first stop string (kept or not) or at `maxTokens`. */
function generate(
  model: FakeModel,
  context: string,
  body: { stop?: string[] | string; max_tokens?: number },
  keepStop: boolean,
): Generated {
  const full = model(context);
  const stops = typeof body.stop === "string" ? [body.stop] : (body.stop ?? []);
  let cut = full.length;
  let stop: string | null = null;
  for (const s of stops) {
    const at = full.indexOf(s);
    if (at >= 0 && at < cut) {
      cut = at;
      stop = s;
    }
  }
  const kept = stop !== null && keepStop ? full.slice(0, cut + stop.length) : full.slice(0, cut);
  let ids = bytes.encode(kept);
  const max = body.max_tokens ?? 16;
  if (ids.length > max) {
    ids = ids.slice(0, max);
    return { text: bytes.decode(ids), ids, finish: "length", stop: null };
  }
  return { text: kept, ids, finish: "stop", stop };
}

const json = (body: unknown, status = 200): FixtureReply => ({ status, json: body });
const error = (status: number, message: string): FixtureReply => json({ error: { message } }, status);
const usage = (prompt: number, completion: number) => ({
  prompt_tokens: prompt,
  completion_tokens: completion,
  total_tokens: prompt + completion,
});

type Body = Record<string, unknown>;
const bodyOf = (r: FixtureRequest): Body => (r.body ?? {}) as Body;

/** vLLM's OpenAI server: ids in and out, `/tokenize` with messages, stop strings kept on request. */
function vllmRoutes(model: FakeModel, name: string, templated: boolean) {
  const noTemplate = () =>
    error(
      400,
      "As of transformers v4.44, default chat template is no longer allowed, so you must provide a chat template if the tokenizer does not define one.",
    );
  return {
    "POST /tokenize": (r: FixtureRequest) => {
      const b = bodyOf(r);
      let text: string;
      if (Array.isArray(b.messages)) {
        if (!templated) return noTemplate();
        if (b.add_generation_prompt !== false && b.continue_final_message === true)
          return error(400, "Cannot set both `continue_final_message` and `add_generation_prompt` to True.");
        text = chatml(b.messages as ChatMessage[], { continueFinal: b.continue_final_message === true });
      } else text = String(b.prompt);
      const tokens = bytes.encode(text);
      return json({ count: tokens.length, max_model_len: 32768, tokens });
    },
    "POST /detokenize": (r: FixtureRequest) => json({ prompt: bytes.decode(bodyOf(r).tokens as number[]) }),
    "POST /v1/completions": (r: FixtureRequest) => {
      const b = bodyOf(r);
      const promptIds = Array.isArray(b.prompt) ? (b.prompt as number[]) : bytes.encode(String(b.prompt));
      const out = generate(model, bytes.decode(promptIds), b as Body, b.include_stop_str_in_output === true);
      const asIds = b.return_tokens_as_token_ids === true;
      return json({
        id: "cmpl-fake",
        object: "text_completion",
        model: name,
        choices: [
          {
            index: 0,
            text: out.text,
            finish_reason: out.finish,
            stop_reason: out.stop,
            ...(b.return_token_ids === true ? { token_ids: out.ids, prompt_token_ids: promptIds } : {}),
            logprobs: b.logprobs
              ? {
                  tokens: out.ids.map((id) => (asIds ? `token_id:${id}` : bytes.decode([id]))),
                  token_logprobs: out.ids.map(() => -0.5),
                }
              : null,
          },
        ],
        usage: usage(promptIds.length, out.ids.length),
      });
    },
    "POST /v1/chat/completions": (r: FixtureRequest) => {
      const b = bodyOf(r);
      if (!templated) return noTemplate();
      const context = chatml(b.messages as ChatMessage[], {
        continueFinal: b.continue_final_message === true,
      });
      const out = generate(model, context, b as Body, b.include_stop_str_in_output === true);
      return json({
        model: name,
        choices: [
          {
            index: 0,
            message: { role: "assistant", content: out.text },
            finish_reason: out.finish,
            stop_reason: out.stop,
          },
        ],
        usage: usage(bytes.encode(context).length, out.ids.length),
      });
    },
  };
}

/**
 * The OpenAI-compatible routes of llama.cpp's server and Ollama: text in, text out, the matched stop
 * string dropped and not named, no ids. A final assistant message is continued (llama.cpp's
 * assistant prefill). llama.cpp's own `/tokenize` takes `content`, so a vLLM-shaped request gets no
 * tokens from it; Ollama has none.
 */
function textRoutes(model: FakeModel, name: string, family: "llamacpp" | "ollama") {
  const routes: Record<string, (r: FixtureRequest) => FixtureReply> = {
    "POST /v1/completions": (r) => {
      const b = bodyOf(r);
      if (typeof b.prompt !== "string") return error(400, "prompt must be a string");
      const out = generate(model, b.prompt, b, false);
      return json({
        model: name,
        choices: [{ index: 0, text: out.text, finish_reason: out.finish, logprobs: null }],
        usage: usage(bytes.encode(b.prompt).length, out.ids.length),
      });
    },
    "POST /v1/chat/completions": (r) => {
      const b = bodyOf(r);
      const messages = b.messages as ChatMessage[];
      const context = chatml(messages, { continueFinal: messages.at(-1)?.role === "assistant" });
      const out = generate(model, context, b, false);
      return json({
        model: name,
        choices: [{ index: 0, message: { role: "assistant", content: out.text }, finish_reason: out.finish }],
        usage: usage(bytes.encode(context).length, out.ids.length),
      });
    },
  };
  if (family === "llamacpp")
    routes["POST /tokenize"] = (r) => {
      const content = bodyOf(r).content;
      return json({ tokens: typeof content === "string" ? bytes.encode(content) : [] });
    };
  return routes;
}

/** Fields OpenAI's chat completions take (of those a client like ours might send); others are refused. */
const OPENAI_FIELDS = new Set([
  "model",
  "messages",
  "max_tokens",
  "max_completion_tokens",
  "temperature",
  "top_p",
  "n",
  "stop",
  "seed",
  "logprobs",
  "top_logprobs",
  "stream",
]);

/**
 * OpenAI's API for a chat model: chat completions only (`/v1/completions` is 404 for chat models),
 * unknown request fields refused, at most 4 stop strings, the matched one dropped unnamed, and a
 * final assistant message answered by a new assistant turn rather than continued.
 */
function openaiRoutes(model: FakeModel, name: string) {
  return {
    "POST /v1/completions": () =>
      error(
        404,
        "This is a chat model and not supported in the v1/completions endpoint. Did you mean to use v1/chat/completions?",
      ),
    "POST /v1/chat/completions": (r: FixtureRequest) => {
      const b = bodyOf(r);
      const unknown = Object.keys(b).find((k) => !OPENAI_FIELDS.has(k));
      if (unknown) return error(400, `Unrecognized request argument supplied: ${unknown}`);
      if (Array.isArray(b.stop) && b.stop.length > 4)
        return error(400, "'stop' may hold at most 4 sequences");
      const context = chatml(b.messages as ChatMessage[], { continueFinal: false });
      const out = generate(model, context, b, false);
      return json({
        model: name,
        choices: [{ index: 0, message: { role: "assistant", content: out.text }, finish_reason: out.finish }],
        usage: usage(bytes.encode(context).length, out.ids.length),
      });
    },
  };
}

/** Starts a fake of `family` on 127.0.0.1 serving `model`; close it when done. */
export function startFakeServer(
  family: ServerFamily,
  model: FakeModel,
  options: FakeServerOptions = {},
): Promise<FixtureServer> {
  const name = options.name ?? `fake-${family}`;
  const routes =
    family === "vllm"
      ? vllmRoutes(model, name, options.chatTemplate ?? true)
      : family === "openai"
        ? openaiRoutes(model, name)
        : textRoutes(model, name, family);
  return FixtureServer.start({
    "GET /v1/models": () => json({ object: "list", data: [{ id: name }] }),
    ...routes,
  });
}
