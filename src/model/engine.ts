import path from "node:path";
import type { z } from "zod";
import { tokenizerFromSpec } from "./bpe-tokenizer.js";
import { type Tokenizer, TokenizerSpec } from "./byte-tokenizer.js";
import {
  CheckpointLoaded,
  CheckpointSaved,
  EngineInfo,
  EvalResult,
  OptimizerConfig,
  type PolicyStepRequest,
  PolicyStepResult,
  ScoreResult,
  type SftSequence,
  SftStepResult,
  type StepOptions,
} from "./engine-api.js";
import { CHECKPOINT_MANIFEST, readCheckpointManifest } from "./engine-checkpoint.js";
import { EngineLaunch, type EngineOptions, type EngineSource } from "./engine-launch.js";
import type { EngineProcess } from "./engine-process.js";
import { JsonHttp } from "./json-http.js";
import { OpenAICompatibleClient } from "./openai-client.js";
import { parseWire } from "./openai-wire.js";
import type { CallOptions, CompletionRequest, CompletionResult, ModelClient } from "./types.js";

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
    /** The served vocabulary rebuilt here (null for a Hugging Face model); kept where /info names it. */
    local: Tokenizer | null,
    options: EngineOptions,
  ) {
    this.name = startInfo.model;
    this.tokenizer = startInfo.tokenizer.name;
    this.contextLength = startInfo.max_model_len;
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
    const saved = savedTokenizer(launch.source);
    const { process: proc, url } = await launch.claim();
    try {
      const http = new JsonHttp(HEALTH);
      const info = parseWire(EngineInfo, await http.get(`${url}/info`), `${url}/info`);
      const served = async () =>
        tokenizerFromSpec(
          parseWire(TokenizerSpec, await http.get(`${url}/tokenizer`), `${url}/tokenizer`),
          `${url}/tokenizer`,
        );
      const own = await saved;
      const local = info.backend !== "coa" ? null : own?.name === info.tokenizer.name ? own : await served();
      return new Engine(proc, url, info, local, launch.options);
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

/**
 * A checkpoint's vocabulary as its manifest holds it, rebuilt while the engine starts: the one the
 * engine will serve, which `/info`'s name then confirms, so the first episode waits for neither a
 * `/tokenizer` round trip nor the rebuild (~20 and 5–50 ms on this project's machines). Null for
 * anything else, or a manifest that does not give one; `/tokenizer` answers then.
 */
async function savedTokenizer(source: EngineSource): Promise<Tokenizer | null> {
  if (!("checkpoint" in source)) return null;
  try {
    const manifest = await readCheckpointManifest(source.checkpoint);
    const spec = TokenizerSpec.safeParse(manifest.tokenizer);
    return spec.success
      ? tokenizerFromSpec(spec.data, path.join(source.checkpoint, CHECKPOINT_MANIFEST))
      : null;
  } catch {
    return null;
  }
}
