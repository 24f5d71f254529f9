import { ByteTokenizer } from "./byte-tokenizer.js";
import { Engine, type EngineOptions, type EngineSource } from "./engine.js";
import { EnginePreset } from "./engine-api.js";
import { OpenAICompatibleClient } from "./openai-client.js";
import type { CompletionResult, ModelClient } from "./types.js";

export interface OpenModelOptions {
  /** Model name for HTTP servers; default: the first model the server lists. */
  modelName?: string;
  api?: "completions" | "chat";
  apiKey?: string;
  /** The server takes and returns text only; ids come from the byte tokenizer (inexact). */
  textOnly?: boolean;
  /** Limit for one attempt of one request (`--request-timeout`); also the engine's completion limit. */
  timeoutMs?: number;
  /** Extra attempts after the first on transient failures (`--retries`); HTTP servers only. */
  maxRetries?: number;
  concurrency?: number;
  /** Bounds the `GET /v1/models` that finds the model name (an episode's deadline, for `coa run`). */
  signal?: AbortSignal;
  /** For `engine` specs: how to start the engine. */
  engine?: EngineOptions;
}

/** What a `--model` value names. */
export type ModelSpec = { kind: "http"; baseUrl: string } | { kind: "engine"; source: EngineSource };

/**
 * Reads a `--model` value: an http(s) base URL, or the embedded engine as `engine` (the micro
 * preset), `engine:<preset>`, `engine:hf:<hugging-face-model>` or `engine:<checkpoint-dir>`.
 */
export function parseModelSpec(spec: string): ModelSpec {
  if (/^https?:\/\//i.test(spec)) return { kind: "http", baseUrl: spec };
  const engine = /^engine(?::(.+))?$/.exec(spec);
  if (!engine)
    throw new Error(
      `--model must be an http(s) base URL, engine, engine:<preset>, engine:hf:<model> or engine:<checkpoint-dir>; got "${spec}"`,
    );
  const target = engine[1] ?? "micro";
  if (target.startsWith("hf:")) return { kind: "engine", source: { hfModel: target.slice(3) } };
  const preset = EnginePreset.safeParse(target);
  return { kind: "engine", source: preset.success ? { preset: preset.data } : { checkpoint: target } };
}

/** Opens the model a `--model` value names; close it when done. */
export async function openModel(spec: string, options: OpenModelOptions = {}): Promise<ModelClient> {
  const parsed = parseModelSpec(spec);
  if (parsed.kind === "engine")
    return Engine.start(parsed.source, {
      ...options.engine,
      timeoutMs: options.engine?.timeoutMs ?? options.timeoutMs,
    });
  const connect = (model: string) =>
    new OpenAICompatibleClient({
      baseUrl: parsed.baseUrl,
      model,
      api: options.api,
      apiKey: options.apiKey,
      timeoutMs: options.timeoutMs,
      maxRetries: options.maxRetries,
      concurrency: options.concurrency,
      ...(options.textOnly
        ? { textOnly: true, tokenizer: new ByteTokenizer(), serverExtensions: false }
        : {}),
    });
  if (options.modelName) return connect(options.modelName);
  const [first] = await connect("").listModels({ signal: options.signal });
  if (!first) throw new Error(`${parsed.baseUrl} lists no models; name one with --model-name`);
  return connect(first);
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
