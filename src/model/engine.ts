import path from "node:path";
import type { z } from "zod";
import { tagTokens } from "../protocol/index.js";
import { tokenizerFromSpec } from "./bpe-tokenizer.js";
import { type Tokenizer, TokenizerSpec } from "./byte-tokenizer.js";
import {
  CheckpointLoaded,
  CheckpointSaved,
  EngineInfo,
  type EnginePreset,
  EvalResult,
  OptimizerConfig,
  type PolicyStepRequest,
  PolicyStepResult,
  ScoreResult,
  type SftSequence,
  SftStepResult,
  type StepOptions,
} from "./engine-api.js";
import { EngineProcess } from "./engine-process.js";
import { engineRoot, pythonCandidates, startWithPython } from "./engine-python.js";
import { JsonHttp } from "./json-http.js";
import { OpenAICompatibleClient } from "./openai-client.js";
import { parseWire } from "./openai-wire.js";
import type { CallOptions, CompletionRequest, CompletionResult, ModelClient } from "./types.js";

/** What the engine serves: a fresh preset, a saved checkpoint, or a Hugging Face model (needs transformers). */
export type EngineSource = { preset: EnginePreset } | { checkpoint: string } | { hfModel: string };

export interface EngineOptions {
  /** Loopback port; 0 (default) takes a free one. */
  port?: number;
  /** Python to run; default: COA_PYTHON, then /usr/bin/python3, python3, python (the first with torch). */
  python?: string;
  /** Arithmetic: `auto` (default) times fp32 and bf16 matmuls at start and takes the faster. */
  dtype?: "auto" | "fp32" | "bf16";
  /** `auto` (default): a CUDA GPU when torch sees one, else the CPU; `$COA_DEVICE` also sets it. */
  device?: "auto" | "cpu" | "cuda";
  /** torch intra-op threads; default: every CPU the process may use. */
  threads?: number;
  /**
   * torch threads while generating; default: `threads` minus one, at least one (the client driving
   * generation runs beside it; on 2 cores one thread evaluates 15–20% faster, docs/engine.md).
   */
  generationThreads?: number;
  /** Seed of a fresh model's weights (default 0, so a preset starts identical every time). */
  seed?: number;
  /** Overrides a preset's context length. */
  maxSeqLen?: number;
  /** A fresh preset's vocabulary: a tokenizer file such as the `tokenizer.json` of `coa distill` (default: bytes). */
  tokenizer?: string;
  /** Rows decoded together at most. */
  maxBatch?: number;
  /** Rows waiting to join the batch at most; a completion past it gets HTTP 503 (default 4 × maxBatch). */
  maxQueue?: number;
  /** Keys and values in memory at most, in MiB: running batch and prefix cache together (default 2048). */
  kvCacheMb?: number;
  /**
   * Speculative decoding: ids drafted per row and step from earlier text (the row's own context, then
   * what finished rows wrote) and checked by the model in the same step. The ids and logprobs sampled
   * are those of one id per step; only the step count falls. Default 4 (`$COA_DRAFT_TOKENS`); 0 turns it
   * off. coa models only (docs/engine.md, "Speculative decoding").
   */
  draftTokens?: number;
  /**
   * Times a completion the engine refused as full (HTTP 503, Retry-After) is sent again before the call
   * fails (default 10). Each wait is the engine's Retry-After or a doubling backoff from 0.5 s, whichever
   * is longer, at most 60 s: about 4 minutes in all.
   */
  busyRetries?: number;
  /** Receives each engine log line; default: written to stderr with an `[engine]` prefix. */
  onLog?: (line: string) => void;
  logRequests?: boolean;
  startTimeoutMs?: number;
  /** Limit for one completion request (default 10 minutes). */
  timeoutMs?: number;
  /** Completion requests in flight at once; the engine batches them together (default 64). */
  concurrency?: number;
}

const defaultLog = (line: string) => process.stderr.write(`[engine] ${line}\n`);

/** The engine's command line for a source and options. */
function engineArgs(source: EngineSource, options: EngineOptions): string[] {
  const args = ["--port", String(options.port ?? 0)];
  if ("preset" in source) args.push("--preset", source.preset);
  else if ("checkpoint" in source) args.push("--checkpoint", path.resolve(source.checkpoint));
  else args.push("--hf-model", source.hfModel);
  if (!("hfModel" in source)) args.push("--tags", JSON.stringify(tagTokens()));
  if (options.dtype) args.push("--dtype", options.dtype);
  if (options.device) args.push("--device", options.device);
  if (options.threads) args.push("--threads", String(options.threads));
  if (options.generationThreads) args.push("--generation-threads", String(options.generationThreads));
  if (options.seed !== undefined) args.push("--seed", String(options.seed));
  if (options.maxSeqLen) args.push("--max-seq-len", String(options.maxSeqLen));
  if (options.tokenizer) args.push("--tokenizer", path.resolve(options.tokenizer));
  if (options.maxBatch) args.push("--max-batch", String(options.maxBatch));
  if (options.maxQueue) args.push("--max-queue", String(options.maxQueue));
  if (options.kvCacheMb) args.push("--kv-cache-mb", String(options.kvCacheMb));
  if (options.draftTokens !== undefined) args.push("--draft-tokens", String(options.draftTokens));
  if (options.logRequests) args.push("--log-requests");
  return args;
}

/**
 * An engine process on its way up: started by `EngineLaunch.start`, connected to by `Engine.open`, which
 * takes it over. Its start (~2 s, most of it Python importing torch) then overlaps whatever the
 * caller loads meanwhile (`coa eval` loads its tools and tasks). `cancel` stops one nobody opened.
 */
export class EngineLaunch {
  private claimed = false;

  private constructor(
    readonly source: EngineSource,
    readonly options: EngineOptions,
    private readonly started: Promise<{ process: EngineProcess; url: string }>,
    private readonly abort: AbortController,
  ) {
    // A failed start is reported to whoever claims it, not as an unhandled rejection before then.
    started.catch(() => {});
  }

  /** Starts the engine process without waiting for it to listen. */
  static start(source: EngineSource, options: EngineOptions = {}): EngineLaunch {
    const abort = new AbortController();
    const log = options.onLog ?? defaultLog;
    const spawnWith = (python: string, onLog = log) =>
      EngineProcess.start({
        python,
        args: engineArgs(source, options),
        root: engineRoot(),
        onLog,
        startTimeoutMs: options.startTimeoutMs ?? 120_000,
        signal: abort.signal,
      });
    const started = (async () =>
      options.python
        ? spawnWith(options.python)
        : startWithPython(pythonCandidates(), spawnWith, log, abort.signal))();
    return new EngineLaunch(source, options, started, abort);
  }

  /** The process once it listens, for its one taker (`Engine.open`); rejects as the start failed. */
  claim(): Promise<{ process: EngineProcess; url: string }> {
    if (this.claimed) return Promise.reject(new Error("this engine launch was already opened"));
    this.claimed = true;
    return this.started;
  }

  /**
   * Stops the process unless it was claimed (its Engine stops it then): killed at once while it
   * starts, asked to exit once it listens. Safe to call twice.
   */
  async cancel(): Promise<void> {
    if (this.claimed) return;
    this.claimed = true;
    this.abort.abort();
    const started = await this.started.catch(() => null);
    await started?.process.stop();
  }
}

/**
 * The embedded PyTorch engine as a child process on loopback HTTP. It is a ModelClient exactly like a
 * vLLM server (completions go through OpenAICompatibleClient), plus typed training, scoring and
 * checkpoint calls. If the process dies, every later call fails with the reason; nothing restarts it.
 */
export class Engine implements ModelClient {
  readonly name: string;
  readonly tokenizer: string;
  readonly contextLength: number;
  /** The served vocabulary in TypeScript, when it is coa's own (null for a Hugging Face model). */
  readonly localTokenizer: Tokenizer | null;
  private readonly client: OpenAICompatibleClient;
  private readonly control: JsonHttp;

  private constructor(
    private readonly process: EngineProcess,
    /** Server root, e.g. http://127.0.0.1:41234. */
    readonly url: string,
    readonly startInfo: EngineInfo,
    spec: TokenizerSpec | null,
    options: EngineOptions,
  ) {
    this.name = startInfo.model;
    this.tokenizer = startInfo.tokenizer.name;
    this.contextLength = startInfo.max_model_len;
    const local = spec ? tokenizerFromSpec(spec, `${url}/tokenizer`) : null;
    this.localTokenizer =
      local?.name === this.tokenizer && local.vocabSize === startInfo.tokenizer.vocab_size ? local : null;
    this.client = new OpenAICompatibleClient({
      baseUrl: url,
      model: this.name,
      api: "completions",
      timeoutMs: options.timeoutMs ?? 600_000,
      maxRetries: 0,
      // …but a full engine (503) asked to come back later: wait and resend, a bounded number of times.
      busyRetries: options.busyRetries ?? 10,
      concurrency: options.concurrency ?? 64,
      // Same ids as the engine's (a test holds the two tokenizers equal), without a round trip.
      tokenizer: this.localTokenizer ?? undefined,
      tokenizerName: this.tokenizer,
      // Only the sampled ids' logprobs are read: alternatives cost the sampler a top-k per position and
      // the response a dictionary per token (an evaluation of the demo: ~0.8 s of sampling).
      logprobAlternatives: 0,
    });
    // Training steps are not idempotent: never retried.
    this.control = new JsonHttp({ timeoutMs: 24 * 3600_000, maxRetries: 0, concurrency: 4 });
  }

  static start(source: EngineSource, options: EngineOptions = {}): Promise<Engine> {
    return Engine.open(EngineLaunch.start(source, options));
  }

  /** Connects to a launched engine once it listens (`EngineLaunch`); stops it if that fails. */
  static async open(launch: EngineLaunch): Promise<Engine> {
    const { process: proc, url } = await launch.claim();
    try {
      const http = new JsonHttp(HEALTH);
      const info = parseWire(EngineInfo, await http.get(`${url}/info`), `${url}/info`);
      const spec =
        info.backend === "coa"
          ? parseWire(TokenizerSpec, await http.get(`${url}/tokenizer`), `${url}/tokenizer`)
          : null;
      return new Engine(proc, url, info, spec, launch.options);
    } catch (err) {
      await proc.stop();
      throw err;
    }
  }

  /** The OpenAI-compatible base URL, for clients such as the `openai` npm package. */
  get baseUrl(): string {
    return `${this.url}/v1`;
  }

  get pid(): number | undefined {
    return this.process.pid;
  }

  /**
   * Why the engine process died on its own (e.g. "engine process 21888 exited (signal SIGSEGV)"),
   * or null: while it runs, and after `close()` or a shutdown signal ended it on purpose.
   */
  get crashReason(): string | null {
    return this.process.crash;
  }

  complete(request: CompletionRequest, options?: CallOptions): Promise<CompletionResult> {
    return this.alive(() => this.client.complete(request, options));
  }

  tokenize(text: string, options?: CallOptions): Promise<number[]> {
    return this.alive(() => this.client.tokenize(text, options));
  }

  detokenize(ids: readonly number[], options?: CallOptions): Promise<string> {
    return this.alive(() => this.client.detokenize(ids, options));
  }

  info(): Promise<EngineInfo> {
    return this.call(EngineInfo, "/info");
  }

  /** One optimizer step of cross-entropy on the loss_mask = 1 tokens. */
  trainSft(req: { batch: SftSequence[] } & StepOptions): Promise<SftStepResult> {
    return this.call(SftStepResult, "/train/sft", req);
  }

  /** The SFT loss without a step (held-out evaluation). */
  evalSft(req: { batch: SftSequence[]; micro_batch_tokens?: number }): Promise<EvalResult> {
    return this.call(EvalResult, "/eval/sft", req);
  }

  /** One optimizer step of the clipped policy-gradient loss. */
  trainPolicy(req: PolicyStepRequest): Promise<PolicyStepResult> {
    return this.call(PolicyStepResult, "/train/policy", req);
  }

  /** Changes optimizer settings (AdamW lr, betas, weight decay, grad clip, micro-batch size); returns them all. */
  configureOptimizer(changes: Partial<OptimizerConfig> = {}): Promise<OptimizerConfig> {
    return this.call(OptimizerConfig, "/train/config", changes);
  }

  /** Freezes the current weights as the KL reference. */
  async setReference(): Promise<void> {
    await this.alive(() => this.control.post(`${this.url}/train/reference`, {}));
  }

  /**
   * Logprob of every token given its prefix under the current weights, aligned with the ids (null first),
   * at the given sampling temperature.
   */
  async score(sequences: number[][], temperature = 1): Promise<(number | null)[][]> {
    return (await this.call(ScoreResult, "/score", { sequences, temperature })).logprobs;
  }

  /** Weights, optimizer, tokenizer and step, written so that a kill never leaves a torn checkpoint. */
  saveCheckpoint(dir: string): Promise<CheckpointSaved> {
    return this.call(CheckpointSaved, "/checkpoint/save", { dir: path.resolve(dir) });
  }

  loadCheckpoint(dir: string): Promise<CheckpointLoaded> {
    return this.call(CheckpointLoaded, "/checkpoint/load", { dir: path.resolve(dir) });
  }

  /** Stops the engine process; safe to call twice. */
  async close(): Promise<void> {
    await this.process.stop();
  }

  private call<T>(schema: z.ZodType<T>, route: string, body?: unknown): Promise<T> {
    const url = `${this.url}${route}`;
    return this.alive(async () =>
      parseWire(
        schema,
        body === undefined ? await this.control.get(url) : await this.control.post(url, body),
        url,
      ),
    );
  }

  private async alive<T>(fn: () => Promise<T>): Promise<T> {
    if (this.process.failure) throw this.process.error("the engine is not running");
    try {
      return await fn();
    } catch (err) {
      // A dropped connection usually means the process died; its exit event may come a moment later.
      if (await this.process.exitsWithin(250)) throw this.process.error("the engine died during the request");
      throw err;
    }
  }
}

const HEALTH = { timeoutMs: 30_000, maxRetries: 2, concurrency: 1, retryBaseMs: 200 };
