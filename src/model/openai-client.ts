import type { z } from "zod";
import type { Tokenizer } from "./byte-tokenizer.js";
import { refuses } from "./detect.js";
import { JsonHttp } from "./json-http.js";
import {
  ApplyTemplateResponse,
  LlamaCompletionResponse,
  llamaChoice,
  type NativeFamily,
  SglangGenerateResponse,
  sglangChoices,
} from "./native-wire.js";
import {
  ChatResponse,
  CompletionsResponse,
  chatChoices,
  completionsChoices,
  DetokenizeResponse,
  idsFromTokenStrings,
  ModelsResponse,
  parseWire,
  TokenizeResponse,
  type WireChoice,
} from "./openai-wire.js";
import {
  type CallOptions,
  type ChatMessage,
  type ChatPrompt,
  type CompletionChoice,
  CompletionRequest,
  type CompletionResult,
  type ModelClient,
} from "./types.js";

type ParsedRequest = z.output<typeof CompletionRequest>;

export interface OpenAICompatibleOptions {
  /** Server root, with or without a trailing `/v1` (e.g. `http://127.0.0.1:8000/v1`). */
  baseUrl: string;
  model: string;
  apiKey?: string;
  /** `completions` (default) sends prompt text or ids; `chat` continues a final assistant message. */
  api?: "completions" | "chat";
  /**
   * Whether prompts go through the model's chat template (`chatPrompt`): `auto` (default) where the
   * server's `/tokenize` renders messages, `on` requires it (a server without fails), `off` never.
   */
  chatTemplate?: "auto" | "on" | "off";
  /** Told once, in one line, when the model's chat template cannot be applied. */
  onNotice?: (line: string) => void;
  timeoutMs?: number;
  maxRetries?: number;
  /** Retries of 429 and 503 (a full server), apart from `maxRetries`; default `maxRetries`. */
  busyRetries?: number;
  concurrency?: number;
  /** First retry delay (doubles per attempt, with jitter). */
  retryBaseMs?: number;
  /**
   * A local tokenizer to use instead of the server's `/tokenize` and `/detokenize`. Give it when the
   * server has no such endpoints, together with `textOnly` unless its ids are the server's own.
   */
  tokenizer?: Tokenizer;
  /** Names the vocabulary in records; defaults to the local tokenizer's name, else the model name. */
  tokenizerName?: string;
  /**
   * The server neither takes nor returns token ids (plain OpenAI, Ollama): prompts go as text and
   * returned ids are re-tokenized from text, marked `exactIds: false`.
   */
  textOnly?: boolean;
  /**
   * Send vLLM's request extensions (`include_stop_str_in_output`, `return_token_ids`,
   * `return_tokens_as_token_ids`). Default true; turn off for servers that reject unknown fields.
   */
  serverExtensions?: boolean;
  /** Chat API only: a user turn sent before the assistant prefix, for templates that require one. */
  chatUserMessage?: string;
  /**
   * Generate through the family's own route, which returns the sampled ids where its OpenAI routes
   * give none: SGLang's `/generate`, llama.cpp's `/completion` (with its `/tokenize`, `/detokenize`
   * and `/apply-template` shapes). Only with `api: "completions"` and not `textOnly`.
   */
  native?: NativeFamily;
  /**
   * Alternatives asked per position with the sampled token's logprob (`logprobs: k` of
   * `/v1/completions`). Default 1, which every OpenAI-compatible server reads as "with logprobs"; the
   * embedded engine reads 0 as the sampled token's alone (as vLLM does), and gets 0 (`Engine`).
   */
  logprobAlternatives?: number;
}

/**
 * ModelClient over an OpenAI-compatible HTTP server: vLLM (token-exact: ids in, ids out), SGLang and
 * llama.cpp through their native routes (`native`, token-exact as well), the embedded engine (same
 * API), and Ollama, OpenAI itself or any of them when forced, in text mode.
 */
export class OpenAICompatibleClient implements ModelClient {
  readonly name: string;
  readonly tokenizer: string;
  private readonly root: string;
  private readonly http: JsonHttp;
  private readonly api: "completions" | "chat";
  private readonly extensions: boolean;
  /** Whether the server's /tokenize renders messages: unknown until the first `chatPrompt`. */
  private templated: boolean | undefined;

  constructor(private readonly options: OpenAICompatibleOptions) {
    this.name = options.model;
    this.tokenizer = options.tokenizerName ?? options.tokenizer?.name ?? options.model;
    this.root = serverRoot(options.baseUrl);
    this.api = options.api ?? "completions";
    this.extensions = options.serverExtensions ?? true;
    if (options.textOnly && !options.tokenizer)
      throw new Error("OpenAICompatibleClient: textOnly needs a local tokenizer (option `tokenizer`)");
    this.http = new JsonHttp({
      apiKey: options.apiKey,
      timeoutMs: options.timeoutMs ?? 120_000,
      maxRetries: options.maxRetries ?? 3,
      busyRetries: options.busyRetries,
      concurrency: options.concurrency ?? 8,
      retryBaseMs: options.retryBaseMs,
    });
  }

  async complete(request: CompletionRequest, options: CallOptions = {}): Promise<CompletionResult> {
    const req = CompletionRequest.parse(request);
    const { signal } = options;
    const sampling = {
      model: this.options.model,
      max_tokens: req.maxTokens,
      temperature: req.temperature,
      top_p: req.topP,
      n: req.n,
      stop: req.stop.length ? req.stop : undefined,
      seed: req.seed,
      ...(this.extensions
        ? { include_stop_str_in_output: true, return_token_ids: true, return_tokens_as_token_ids: true }
        : {}),
    };
    const { wire, body } =
      this.api === "chat"
        ? await this.postChat(req, sampling, signal)
        : this.native === "sglang"
          ? await this.postSglang(req, signal)
          : this.native === "llamacpp"
            ? await this.postLlamacpp(req, signal)
            : await this.postCompletions(req, sampling, signal);
    wire.sort((a, b) => a.index - b.index);
    const choices = await Promise.all(wire.map((c) => this.toChoice(c, req, signal)));
    return {
      model: body.model ?? this.name,
      choices,
      usage: body.usage
        ? { promptTokens: body.usage.prompt_tokens, completionTokens: body.usage.completion_tokens }
        : {
            promptTokens: req.promptIds?.length ?? 0,
            completionTokens: choices.reduce((n, c) => n + c.tokenIds.length, 0),
          },
    };
  }

  /** The native route in use, if any: only for id prompts on the completions route. */
  private get native(): NativeFamily | undefined {
    return this.api === "completions" && !this.options.textOnly ? this.options.native : undefined;
  }

  /**
   * SGLang's `/generate`: ids in (`input_ids`), ids out (`output_ids`), the stop string kept
   * (`no_stop_trim`) and named (`meta_info.finish_reason.matched`), logprobs per output token.
   */
  private async postSglang(
    req: ParsedRequest,
    signal?: AbortSignal,
  ): Promise<{ wire: WireChoice[]; body: WireBody }> {
    const url = `${this.root}/generate`;
    const input = req.promptIds ? { input_ids: req.promptIds } : { text: req.prompt };
    const body = {
      ...input,
      sampling_params: {
        max_new_tokens: req.maxTokens,
        temperature: req.temperature,
        top_p: req.topP,
        n: req.n,
        stop: req.stop.length ? req.stop : undefined,
        no_stop_trim: true,
        ...(req.seed === undefined ? {} : { sampling_seed: req.seed }),
      },
      ...(req.logprobs ? { return_logprob: true, logprob_start_len: -1 } : {}),
    };
    const answer = parseWire(SglangGenerateResponse, await this.http.post(url, body, signal), url);
    const outputs = Array.isArray(answer) ? answer : [answer];
    const usage = {
      prompt_tokens: outputs[0]?.meta_info.prompt_tokens ?? req.promptIds?.length ?? 0,
      completion_tokens: outputs.reduce((n, o) => n + (o.meta_info.completion_tokens ?? 0), 0),
    };
    return { wire: sglangChoices(answer), body: { usage } };
  }

  /**
   * llama.cpp's `/completion`, once per choice: ids in (`prompt` as ids), ids out (`return_tokens`),
   * the stopping word cut from `content` but named (`stopping_word`) and kept in `tokens`.
   */
  private async postLlamacpp(
    req: ParsedRequest,
    signal?: AbortSignal,
  ): Promise<{ wire: WireChoice[]; body: WireBody }> {
    const url = `${this.root}/completion`;
    const prompt = req.promptIds ?? req.prompt;
    const answers = await Promise.all(
      Array.from({ length: req.n }, async (_, i) => {
        const body = {
          prompt,
          n_predict: req.maxTokens,
          temperature: req.temperature,
          top_p: req.topP,
          stop: req.stop,
          return_tokens: true,
          cache_prompt: true,
          ...(req.seed === undefined ? {} : { seed: req.seed + i }),
          ...(req.logprobs ? { n_probs: 1 } : {}),
        };
        return parseWire(LlamaCompletionResponse, await this.http.post(url, body, signal), url);
      }),
    );
    const usage = {
      prompt_tokens: answers[0]?.tokens_evaluated ?? req.promptIds?.length ?? 0,
      completion_tokens: answers.reduce((n, a) => n + (a.tokens_predicted ?? 0), 0),
    };
    return { wire: answers.map(llamaChoice), body: { model: answers[0]?.model, usage } };
  }

  private async postCompletions(
    req: ParsedRequest,
    sampling: Record<string, unknown>,
    signal?: AbortSignal,
  ): Promise<{ wire: WireChoice[]; body: WireBody }> {
    const url = `${this.root}/v1/completions`;
    const prompt =
      req.promptIds && !this.options.textOnly ? req.promptIds : await this.promptText(req, signal);
    const response = parseWire(
      CompletionsResponse,
      await this.http.post(
        url,
        { ...sampling, prompt, logprobs: req.logprobs ? (this.options.logprobAlternatives ?? 1) : undefined },
        signal,
      ),
      url,
    );
    return { wire: completionsChoices(response), body: response };
  }

  /**
   * Chat completions: the assistant's text so far goes as a final assistant message to continue
   * (vLLM and SGLang's `continue_final_message`). A prompt from `chatPrompt` sends its messages
   * before it, and a reply not yet begun asks for a fresh assistant turn instead.
   */
  private async postChat(
    req: ParsedRequest,
    sampling: Record<string, unknown>,
    signal?: AbortSignal,
  ): Promise<{ wire: WireChoice[]; body: WireBody }> {
    const url = `${this.root}/v1/chat/completions`;
    let messages: ChatMessage[];
    if (req.chat && req.promptIds) {
      const reply = await this.detokenize(req.promptIds.slice(req.chat.promptTokens), { signal });
      messages = reply ? [...req.chat.messages, { role: "assistant", content: reply }] : req.chat.messages;
    } else {
      const user = this.options.chatUserMessage;
      messages = [
        ...(user ? [{ role: "user" as const, content: user }] : []),
        { role: "assistant", content: await this.promptText(req, signal) },
      ];
    }
    const continues = messages.at(-1)?.role === "assistant";
    const response = parseWire(
      ChatResponse,
      await this.http.post(
        url,
        {
          ...sampling,
          messages,
          // Servers that reject unknown fields (OpenAI) get neither; they cannot continue a message.
          ...(this.extensions
            ? { continue_final_message: continues, add_generation_prompt: !continues }
            : {}),
          logprobs: req.logprobs || undefined,
        },
        signal,
      ),
      url,
    );
    return { wire: chatChoices(response), body: response };
  }

  /**
   * The prompt ids of `messages` through the model's chat template: vLLM's (and SGLang's) `/tokenize`
   * with `messages` and `add_generation_prompt`, so every id is the server's. Null when the template
   * is off, or the server renders no messages (a 4xx on the first try; told once by `onNotice`). A
   * chat-only server (`api: "chat"`) gets the messages themselves with each request, so the ids
   * returned here only stand for them: the messages' text tokenized as it stands, marked inexact.
   */
  async chatPrompt(messages: readonly ChatMessage[], options: CallOptions = {}): Promise<ChatPrompt | null> {
    const mode = this.options.chatTemplate ?? "auto";
    if (mode === "off") return null;
    if (this.api === "chat") {
      const text = messages.map((m) => `${m.role}: ${m.content}`).join("\n\n");
      return { ids: await this.tokenize(text, options), exact: false };
    }
    if (this.templated === false) return this.noTemplate(mode, null);
    if (this.options.textOnly) {
      this.templated = false;
      return this.noTemplate(mode, "it takes text only");
    }
    const llama = this.native === "llamacpp";
    const url = `${this.root}/${llama ? "apply-template" : "tokenize"}`;
    // llama.cpp's /apply-template takes the messages alone and always adds the generation prompt.
    const body = llama
      ? { messages }
      : { model: this.options.model, messages, add_generation_prompt: true, add_special_tokens: false };
    let answer: unknown;
    try {
      answer = await this.http.post(url, body, options.signal);
    } catch (err) {
      // A server that never rendered messages refuses them (400/404/422); later failures are failures.
      if (this.templated || !refuses(err)) throw err;
      this.templated = false;
      const route = llama ? "/apply-template" : "/tokenize";
      return this.noTemplate(mode, `its ${route} renders no chat messages (HTTP ${err.status})`);
    }
    this.templated = true;
    // llama.cpp renders text; its own /tokenize reads the template's special tokens as such.
    const ids = llama
      ? await this.tokenize(parseWire(ApplyTemplateResponse, answer, url).prompt, options)
      : parseWire(TokenizeResponse, answer, url).tokens;
    return { ids, exact: true };
  }

  /** No template to apply: an error where one is required, else null (and a notice the first time). */
  private noTemplate(mode: "auto" | "on", why: string | null): null {
    if (mode === "on")
      throw new Error(`${this.root}: cannot apply the model's chat template: ${why ?? "none"}`);
    if (why) this.options.onNotice?.(`${this.root}: no chat template (${why}); prompts go as plain text`);
    return null;
  }

  async tokenize(text: string, options: CallOptions = {}): Promise<number[]> {
    if (this.options.tokenizer) return this.options.tokenizer.encode(text);
    const url = `${this.root}/tokenize`;
    const body =
      this.options.native === "llamacpp"
        ? { content: text, add_special: false }
        : { model: this.options.model, prompt: text, add_special_tokens: false };
    return parseWire(TokenizeResponse, await this.http.post(url, body, options.signal), url).tokens;
  }

  async detokenize(ids: readonly number[], options: CallOptions = {}): Promise<string> {
    if (this.options.tokenizer) return this.options.tokenizer.decode(ids);
    const url = `${this.root}/detokenize`;
    const body = { model: this.options.model, tokens: ids };
    return parseWire(DetokenizeResponse, await this.http.post(url, body, options.signal), url);
  }

  /** The ids of the models the server serves (`GET /v1/models`). */
  async listModels(options: CallOptions = {}): Promise<string[]> {
    const url = `${this.root}/v1/models`;
    return parseWire(ModelsResponse, await this.http.get(url, options.signal), url).data.map((m) => m.id);
  }

  async close(): Promise<void> {}

  private promptText(req: ParsedRequest, signal?: AbortSignal): Promise<string> {
    return req.prompt !== undefined
      ? Promise.resolve(req.prompt)
      : this.detokenize(req.promptIds!, { signal });
  }

  /**
   * Normalizes one choice to the contract: the stop string is kept at the end of text and ids, ids
   * come from the server when it sent them, and are re-tokenized (and marked inexact) when not.
   */
  private async toChoice(c: WireChoice, req: ParsedRequest, signal?: AbortSignal): Promise<CompletionChoice> {
    const finishReason = c.finishReason === "length" ? "length" : "stop";
    let text = c.text;
    let ids = this.options.textOnly ? undefined : (c.tokenIds ?? idsFromTokenStrings(c.tokenStrings));
    let exact = ids !== undefined;
    let logprobs = req.logprobs ? c.logprobs : undefined;

    const named = typeof c.stopReason === "string" && req.stop.includes(c.stopReason) ? c.stopReason : null;
    const kept = req.stop.some((s) => text.endsWith(s));
    // vLLM and SGLang say which stop matched (null at EOS), and a server sent vLLM's
    // `include_stop_str_in_output` keeps it. Servers in text mode that say nothing (OpenAI,
    // llama.cpp, Ollama) drop the stop unnamed: infer it from the tag left open.
    const unnamed = c.stopReason === undefined && !this.extensions;
    const reported =
      named ?? (finishReason === "stop" && unnamed && !kept ? openStopTag(text, req.stop) : null);
    if (finishReason === "stop" && reported !== null && !text.endsWith(reported)) {
      // The server dropped the matched stop string; put it back so "stop string kept" holds.
      text += reported;
      if (ids) ids = [...ids, ...(await this.tokenize(reported, { signal }))];
      exact = false;
    }
    const stopSequence =
      finishReason === "stop" ? (reported ?? req.stop.find((s) => text.endsWith(s)) ?? null) : null;
    if (!ids) {
      ids = await this.tokenize(text, { signal });
      exact = false;
    }
    if (logprobs && logprobs.length !== ids.length) logprobs = undefined;
    return {
      text,
      tokenIds: ids,
      logprobs,
      finishReason,
      stopSequence,
      ...(exact ? {} : { exactIds: false }),
    };
  }
}

type WireBody = { model?: string; usage?: { prompt_tokens: number; completion_tokens: number } | null };

/** `http://host:8000/v1/` → `http://host:8000`: /tokenize and /detokenize live at the root in vLLM. */
export function serverRoot(baseUrl: string): string {
  return baseUrl.replace(/\/+$/, "").replace(/\/v1$/, "");
}

/**
 * The closing-tag stop (`</x>`) whose `<x>` was opened last in `text` and not closed after it, or
 * null. A server that drops the stop string without naming it leaves exactly such an open tag; text
 * with no open tag ended at EOS.
 */
export function openStopTag(text: string, stops: readonly string[]): string | null {
  let best: string | null = null;
  let bestAt = -1;
  for (const stop of stops) {
    if (!stop.startsWith("</") || !stop.endsWith(">")) continue;
    const opened = text.lastIndexOf(`<${stop.slice(2)}`);
    if (opened > bestAt && text.lastIndexOf(stop) < opened) {
      best = stop;
      bestAt = opened;
    }
  }
  return best;
}
