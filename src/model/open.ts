import { ByteTokenizer } from "./byte-tokenizer.js";
import { detectServer } from "./detect.js";
import { Engine } from "./engine.js";
import { EngineLaunch, type EngineOptions, parseModelSpec } from "./engine-launch.js";
import { JsonHttp } from "./json-http.js";
import type { NativeFamily } from "./native-wire.js";
import { OpenAICompatibleClient, type OpenAICompatibleOptions, serverRoot } from "./openai-client.js";
import type { CompletionResult, ModelClient } from "./types.js";

export interface OpenModelOptions {
  /** Model name for HTTP servers; default: the first model the server lists. */
  modelName?: string;
  /** Which route generates; default: completions, or chat where the server has no `/v1/completions`. */
  api?: "completions" | "chat";
  apiKey?: string;
  /**
   * The server takes and returns text only; ids come from the byte tokenizer (inexact). Default: so
   * when the server has no vLLM-style `/tokenize`.
   */
  textOnly?: boolean;
  /** Prompts through the model's chat template: `auto` (default), `on` (required) or `off`. */
  chatTemplate?: OpenAICompatibleOptions["chatTemplate"];
  /** One line for each fallback found (text mode, chat route, no chat template). */
  onNotice?: (line: string) => void;
  /** Limit for one attempt of one request (`--request-timeout`); also the engine's completion limit. */
  timeoutMs?: number;
  /** Extra attempts after the first on transient failures (`--retries`); HTTP servers only. */
  maxRetries?: number;
  concurrency?: number;
  /** Bounds the `GET /v1/models` that finds the model name (an episode's deadline, for `coa run`). */
  signal?: AbortSignal;
  /** For `engine` specs: how to start the engine. */
  engine?: EngineOptions;
  /** For `engine` specs: the engine `launchModel` started for this spec, taken over instead of a new one. */
  launched?: EngineLaunch;
}

/** The options an `engine` spec's engine starts with. */
const engineOptions = (options: OpenModelOptions): EngineOptions => ({
  ...options.engine,
  timeoutMs: options.engine?.timeoutMs ?? options.timeoutMs,
});

/**
 * Starts the engine a `--model` value names, without waiting for it, so that its start overlaps the
 * caller's own loading; undefined for a server's URL. Hand it to `openModel` as `launched`, or `cancel`
 * it if that never happens. `started`, an engine already launched (`coa` starts one from its raw
 * arguments), is taken over instead where it is the same process (`EngineLaunch.adopt`).
 */
export function launchModel(
  spec: string,
  options: Pick<OpenModelOptions, "engine" | "timeoutMs"> = {},
  started?: EngineLaunch,
): EngineLaunch | undefined {
  const parsed = parseModelSpec(spec);
  if (parsed.kind !== "engine") return undefined;
  const engine = engineOptions(options);
  return started?.adopt(parsed.source, engine) ?? EngineLaunch.start(parsed.source, engine);
}

/** Opens the model a `--model` value names; close it when done. */
export async function openModel(spec: string, options: OpenModelOptions = {}): Promise<ModelClient> {
  const parsed = parseModelSpec(spec);
  if (
    options.launched &&
    (parsed.kind !== "engine" || JSON.stringify(parsed.source) !== JSON.stringify(options.launched.source))
  )
    throw new Error(
      `--model ${spec} is not the engine launched (${JSON.stringify(options.launched.source)})`,
    );
  if (parsed.kind === "engine")
    return options.launched
      ? Engine.open(options.launched)
      : Engine.start(parsed.source, engineOptions(options));
  const base = {
    baseUrl: parsed.baseUrl,
    apiKey: options.apiKey,
    timeoutMs: options.timeoutMs,
    maxRetries: options.maxRetries,
    concurrency: options.concurrency,
    chatTemplate: options.chatTemplate,
    onNotice: options.onNotice,
  };
  let model = options.modelName;
  if (!model) {
    [model] = await new OpenAICompatibleClient({ ...base, model: "" }).listModels({ signal: options.signal });
    if (!model) throw new Error(`${parsed.baseUrl} lists no models; name one with --model-name`);
  }
  const { textOnly, api, native } = await serverMode(serverRoot(parsed.baseUrl), model, options);
  return new OpenAICompatibleClient({
    ...base,
    model,
    api,
    ...(native ? { native } : {}),
    ...(textOnly ? { textOnly: true, tokenizer: new ByteTokenizer(), serverExtensions: false } : {}),
  });
}

/**
 * Text mode and route, as the options force them or as the server shows them (`detectServer`);
 * each fallback is told in one line. Nothing is asked when both are forced.
 */
async function serverMode(
  root: string,
  model: string,
  options: OpenModelOptions,
): Promise<{ textOnly: boolean; api: "completions" | "chat"; native?: NativeFamily }> {
  if (options.textOnly !== undefined && options.api) return { textOnly: options.textOnly, api: options.api };
  const http = new JsonHttp({
    apiKey: options.apiKey,
    timeoutMs: options.timeoutMs ?? 120_000,
    maxRetries: options.maxRetries ?? 3,
    concurrency: 1,
  });
  const found = await detectServer(http, root, model, options.signal);
  const textOnly = options.textOnly ?? !found.tokenize;
  const api = options.api ?? (found.completions ? "completions" : "chat");
  if (textOnly && options.textOnly === undefined)
    options.onNotice?.(
      `${root} has no /tokenize: text mode, ids re-tokenized by the byte tokenizer and marked inexact (--text-only says so up front)`,
    );
  if (api === "chat" && !options.api)
    options.onNotice?.(`${root} has no /v1/completions: generating through /v1/chat/completions`);
  // The family's own route gives exact ids; forcing text mode or the chat route forgoes it.
  const native = !textOnly && api === "completions" ? found.native : undefined;
  return { textOnly, api, ...(native ? { native } : {}) };
}

/**
 * A model that could not be opened (its server hung or failed on `GET /v1/models`): every call
 * rejects with `error`, so an episode run on it is still recorded, ending as the runtime ends any
 * episode whose model fails (`model_error`, or `max_time` when the deadline passed).
 */
export function unavailableModel(name: string, error: unknown): ModelClient {
  const fail = (): Promise<never> => Promise.reject(error);
  return {
    name,
    // It produced no ids, so it names no vocabulary.
    tokenizer: "unavailable",
    complete: fail as () => Promise<CompletionResult>,
    tokenize: fail,
    detokenize: fail,
  };
}
