import { ByteTokenizer } from "../byte-tokenizer.js";
import type { ChatMessage } from "../types.js";
import { type FixtureReply, type FixtureRequest, FixtureServer } from "./fixture-server.js";

// Loopback stand-ins for the server families coa meets, each built from the family's documented
// request and response shapes (not from our client), so a test against them shows what a real one
// would do to us. The "model" behind every family is a function of the text it reads, its ids the
// byte tokenizer's.

/** Which server family a fake behaves like. */
export type ServerFamily = "vllm" | "sglang" | "llamacpp" | "ollama" | "openai";

/** The fake model: what it writes after reading `context` (the prompt, its chat template applied). */
export type FakeModel = (context: string) => string;

export interface FakeServerOptions {
  /** Served model name (`GET /v1/models`). */
  name?: string;
  /**
   * vLLM only: the model has a chat template (a base model has none, and `/tokenize` refuses
   * messages). llama.cpp always has one: without the model's own it renders ChatML.
   */
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
  /** The ids of `text`. */
  ids: number[];
  /** Every id sampled, the matched stop string's included even where `text` drops it (llama.cpp's `tokens`). */
  sampled: number[];
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
  const withStop = full.slice(0, stop === null ? cut : cut + stop.length);
  const kept = keepStop ? withStop : full.slice(0, cut);
  let ids = bytes.encode(withStop);
  const max = body.max_tokens ?? 16;
  if (max >= 0 && ids.length > max) {
    ids = ids.slice(0, max);
    return { text: bytes.decode(ids), ids, sampled: ids, finish: "length", stop: null };
  }
  return { text: kept, ids: bytes.encode(kept), sampled: ids, finish: "stop", stop };
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

/**
 * Chat completions as vLLM and SGLang serve them: ChatML, a final assistant message continued on
 * `continue_final_message`, the matched stop named in the family's field and kept only when the
 * family's flag for that is sent.
 */
function continuedChat(
  model: FakeModel,
  name: string,
  b: Body,
  family: { stopField: "stop_reason" | "matched_stop"; keepStop: string },
): FixtureReply {
  const context = chatml(b.messages as ChatMessage[], { continueFinal: b.continue_final_message === true });
  const out = generate(model, context, b, b[family.keepStop] === true);
  return json({
    model: name,
    choices: [
      {
        index: 0,
        message: { role: "assistant", content: out.text },
        finish_reason: out.finish,
        [family.stopField]: out.stop,
      },
    ],
    usage: usage(bytes.encode(context).length, out.sampled.length),
  });
}

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
    "POST /v1/chat/completions": (r: FixtureRequest) =>
      templated
        ? continuedChat(model, name, bodyOf(r), {
            stopField: "stop_reason",
            keepStop: "include_stop_str_in_output",
          })
        : noTemplate(),
  };
}

/**
 * The OpenAI-compatible routes of llama.cpp's server and Ollama: text in, text out, the matched stop
 * string dropped and not named, no ids. A final assistant message is continued (llama.cpp's
 * assistant prefill). llama.cpp adds its native routes (`llamacppRoutes`); Ollama has no others.
 */
function textRoutes(model: FakeModel, name: string) {
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
  return routes;
}

/** The sampling parameters SGLang's `/generate` takes (of those a client like ours might send); others fail. */
const SGLANG_SAMPLING = new Set([
  "max_new_tokens",
  "stop",
  "stop_token_ids",
  "temperature",
  "top_p",
  "top_k",
  "n",
  "no_stop_trim",
  "skip_special_tokens",
  "ignore_eos",
  "sampling_seed",
]);

/** The id the fake model ends on at EOS (Qwen's `<|im_end|>`), as SGLang reports it in `matched`. */
const EOS_ID = 151645;

/**
 * SGLang's server: the native `/generate` (text or `input_ids`, `sampling_params`, output ids and
 * `meta_info`, the stop string trimmed unless `no_stop_trim`), `/tokenize` with `prompt` only (no
 * messages) answering vLLM's shape, `/detokenize` answering `text`, `/get_model_info`, and its
 * OpenAI routes: completions with `matched_stop` and no ids, the stop trimmed.
 */
function sglangRoutes(model: FakeModel, name: string) {
  const refused = (message: string) =>
    json({ object: "error", message, type: "BadRequestError", param: null, code: 400 }, 400);
  const meta = (out: Generated, promptTokens: number, logprob: boolean) => ({
    id: "fake-rid",
    finish_reason:
      out.finish === "length"
        ? { type: "length", length: out.ids.length }
        : { type: "stop", matched: out.stop ?? EOS_ID },
    prompt_tokens: promptTokens,
    completion_tokens: out.sampled.length,
    cached_tokens: 0,
    e2e_latency: 0.01,
    ...(logprob ? { output_token_logprobs: out.sampled.map((id) => [-0.5, id, null]) } : {}),
  });
  return {
    "GET /get_model_info": () =>
      json({ model_path: name, tokenizer_path: name, is_generation: true, preferred_sampling_params: null }),
    "POST /tokenize": (r: FixtureRequest) => {
      const prompt = bodyOf(r).prompt;
      if (typeof prompt !== "string") return refused("1 validation error: prompt: Field required");
      const tokens = bytes.encode(prompt);
      return json({ tokens, count: tokens.length, max_model_len: 32768 });
    },
    "POST /detokenize": (r: FixtureRequest) => json({ text: bytes.decode(bodyOf(r).tokens as number[]) }),
    "POST /generate": (r: FixtureRequest) => {
      const b = bodyOf(r);
      if ((b.text === undefined) === (b.input_ids === undefined))
        return refused("Either text, input_ids or input_embeds should be provided.");
      const sp = (b.sampling_params ?? {}) as Body;
      const unknown = Object.keys(sp).find((k) => !SGLANG_SAMPLING.has(k));
      if (unknown)
        return refused(`SamplingParams.__init__() got an unexpected keyword argument '${unknown}'`);
      const promptIds = Array.isArray(b.input_ids) ? (b.input_ids as number[]) : bytes.encode(String(b.text));
      const limits = {
        stop: sp.stop as string[] | string | undefined,
        max_tokens: (sp.max_new_tokens as number) ?? 128,
      };
      const runs = Array.from({ length: (sp.n as number) ?? 1 }, () => {
        const out = generate(model, bytes.decode(promptIds), limits, sp.no_stop_trim === true);
        return {
          text: out.text,
          output_ids: out.sampled,
          meta_info: meta(out, promptIds.length, b.return_logprob === true),
        };
      });
      return json(runs.length === 1 ? runs[0] : runs);
    },
    "POST /v1/completions": (r: FixtureRequest) => {
      const b = bodyOf(r);
      const promptIds = Array.isArray(b.prompt) ? (b.prompt as number[]) : bytes.encode(String(b.prompt));
      const out = generate(model, bytes.decode(promptIds), b, b.no_stop_trim === true);
      return json({
        id: "cmpl-fake",
        object: "text_completion",
        model: name,
        choices: [
          { index: 0, text: out.text, logprobs: null, finish_reason: out.finish, matched_stop: out.stop },
        ],
        usage: usage(promptIds.length, out.sampled.length),
      });
    },
    "POST /v1/chat/completions": (r: FixtureRequest) =>
      continuedChat(model, name, bodyOf(r), { stopField: "matched_stop", keepStop: "no_stop_trim" }),
  };
}

/**
 * llama.cpp's server, native routes: `/completion` (prompt as text or ids, `n_predict`, `stop`,
 * `return_tokens`, `n_probs`; `content` without the stopping word, `tokens` with it, `stop_type`
 * and `stopping_word`), `/tokenize` with `content` (a request without it gets no tokens),
 * `/detokenize` answering `content`, `/apply-template` (the model's template, ChatML here, which
 * llama.cpp also uses for a model without one), `/props`.
 */
function llamacppRoutes(model: FakeModel, name: string) {
  return {
    "GET /props": () =>
      json({
        default_generation_settings: { n_ctx: 4096, params: {} },
        total_slots: 1,
        model_path: `/models/${name}.gguf`,
        chat_template: "{%- for message in messages %}…chatml…{%- endfor %}",
        bos_token: "",
        eos_token: "<|im_end|>",
        build_info: "b1-fake",
      }),
    "POST /tokenize": (r: FixtureRequest) => {
      const content = bodyOf(r).content;
      return json({ tokens: typeof content === "string" ? bytes.encode(content) : [] });
    },
    "POST /detokenize": (r: FixtureRequest) =>
      json({ content: bytes.decode((bodyOf(r).tokens as number[] | undefined) ?? []) }),
    "POST /apply-template": (r: FixtureRequest) =>
      json({ prompt: chatml(bodyOf(r).messages as ChatMessage[], { continueFinal: false }) }),
    "POST /completion": (r: FixtureRequest) => {
      const b = bodyOf(r);
      const prompt = b.prompt;
      let context: string;
      if (typeof prompt === "string") context = prompt;
      else if (Array.isArray(prompt))
        context = prompt.map((p) => (typeof p === "number" ? bytes.decode([p]) : String(p))).join("");
      else
        return json(
          { error: { code: 400, message: '"prompt" must be provided', type: "invalid_request_error" } },
          400,
        );
      const out = generate(
        model,
        context,
        { stop: b.stop as string[], max_tokens: (b.n_predict as number) ?? -1 },
        false,
      );
      const nProbs = (b.n_probs as number) ?? 0;
      return json({
        index: 0,
        content: out.text,
        tokens: b.return_tokens === true ? out.sampled : [],
        id_slot: 0,
        stop: true,
        model: name,
        tokens_predicted: out.sampled.length,
        tokens_evaluated: bytes.encode(context).length,
        generation_settings: { n_predict: b.n_predict ?? -1, stop: b.stop ?? [] },
        prompt: context,
        has_new_line: out.text.includes("\n"),
        truncated: false,
        stop_type: out.finish === "length" ? "limit" : out.stop === null ? "eos" : "word",
        stopping_word: out.stop ?? "",
        tokens_cached: 0,
        timings: { prompt_n: 1, predicted_n: out.sampled.length },
        ...(nProbs > 0
          ? {
              completion_probabilities: out.sampled.map((id) => ({
                id,
                token: bytes.decode([id]),
                bytes: [id],
                logprob: -0.5,
                top_logprobs: [{ id, token: bytes.decode([id]), bytes: [id], logprob: -0.5 }],
              })),
            }
          : {}),
      });
    },
  };
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

/**
 * What Ollama adds to the OpenAI routes: its model list (`owned_by: "library"`), and Go's plain-text
 * 404 for every route it lacks (`/tokenize`, `/get_model_info`, `/completion`…).
 */
function ollamaRoutes(name: string) {
  const missing = (): FixtureReply => ({ status: 404, text: "404 page not found" });
  return {
    "GET /v1/models": () =>
      json({
        object: "list",
        data: [{ id: name, object: "model", created: 1732300000, owned_by: "library" }],
      }),
    "POST /tokenize": missing,
    "POST /detokenize": missing,
    "GET /get_model_info": missing,
    "POST /completion": missing,
    "POST /generate": missing,
  };
}

/** Starts a fake of `family` on 127.0.0.1 serving `model`; close it when done. */
export function startFakeServer(
  family: ServerFamily,
  model: FakeModel,
  options: FakeServerOptions = {},
): Promise<FixtureServer> {
  const name = options.name ?? `fake-${family}`;
  const templated = options.chatTemplate ?? true;
  const routes =
    family === "vllm"
      ? vllmRoutes(model, name, templated)
      : family === "sglang"
        ? sglangRoutes(model, name)
        : family === "openai"
          ? openaiRoutes(model, name)
          : family === "llamacpp"
            ? { ...textRoutes(model, name), ...llamacppRoutes(model, name) }
            : { ...textRoutes(model, name), ...ollamaRoutes(name) };
  return FixtureServer.start({
    "GET /v1/models": () => json({ object: "list", data: [{ id: name, object: "model" }] }),
    ...routes,
  });
}
