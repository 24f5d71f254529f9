import { setTimeout as sleep } from "node:timers/promises";
import type { z } from "zod";
import { BYTE_TOKENIZER_NAME, ByteTokenizer } from "../byte-tokenizer.js";
import {
  type CallOptions,
  type CompletionChoice,
  CompletionRequest,
  type CompletionResult,
  type ModelClient,
} from "../types.js";

export type ParsedCompletionRequest = z.output<typeof CompletionRequest>;

/** What a script function sees: the full prompt text and how many continuations were served before. */
export interface ScriptCall {
  prompt: string;
  index: number;
  request: ParsedCompletionRequest;
}

/** Continuations served in order, or computed from the prompt. */
export type Script = readonly string[] | ((call: ScriptCall) => string);

export interface ScriptedModelOptions {
  name?: string;
  /** Simulated generation time per call; honours the abort signal like a real request. */
  latencyMs?: number;
}

/**
 * A model for tests that behaves like a server: each choice takes the next prepared continuation,
 * which is cut right after the first stop string to complete (the string kept), then to `maxTokens`
 * ids (finish "length"). Ids are the ByteTokenizer's, so they round-trip exactly.
 *
 * Logprobs are FAKE but deterministic: token i of a choice with id t gets -((t + i) % 10 + 1) / 10.
 * A continuation with no stop string ends with finish "stop" and no stopSequence, as an EOS would.
 */
export class ScriptedModel implements ModelClient {
  readonly name: string;
  readonly tokenizer = BYTE_TOKENIZER_NAME;
  /** Every request received, in order, with defaults applied. */
  readonly requests: ParsedCompletionRequest[] = [];
  private readonly bytes = new ByteTokenizer();
  private served = 0;
  private inFlight = 0;
  /** The most calls that were in progress at once: what a caller's concurrency bound let through. */
  peakInFlight = 0;

  constructor(
    private readonly script: Script,
    private readonly options: ScriptedModelOptions = {},
  ) {
    this.name = options.name ?? "scripted";
  }

  /** Continuations served so far. */
  get calls(): number {
    return this.served;
  }

  async complete(request: CompletionRequest, options: CallOptions = {}): Promise<CompletionResult> {
    const req = CompletionRequest.parse(request);
    this.requests.push(req);
    this.peakInFlight = Math.max(this.peakInFlight, ++this.inFlight);
    try {
      if (this.options.latencyMs) await sleep(this.options.latencyMs, undefined, { signal: options.signal });
    } finally {
      this.inFlight--;
    }
    options.signal?.throwIfAborted();
    const promptIds = req.promptIds ?? this.bytes.encode(req.prompt!);
    const choices: CompletionChoice[] = [];
    for (let i = 0; i < req.n; i++) choices.push(this.generate(this.nextContinuation(req), req));
    return {
      model: this.name,
      choices,
      usage: {
        promptTokens: promptIds.length,
        completionTokens: choices.reduce((n, c) => n + c.tokenIds.length, 0),
      },
    };
  }

  async tokenize(text: string): Promise<number[]> {
    return this.bytes.encode(text);
  }

  async detokenize(ids: readonly number[]): Promise<string> {
    return this.bytes.decode(ids);
  }

  private nextContinuation(req: ParsedCompletionRequest): string {
    const index = this.served;
    let text: string | undefined;
    if (typeof this.script === "function") {
      const prompt = req.prompt ?? this.bytes.decode(req.promptIds!);
      text = this.script({ prompt, index, request: req });
    } else {
      text = this.script[index];
      if (text === undefined)
        throw new Error(`ScriptedModel: no continuation left (the script has ${this.script.length})`);
    }
    this.served++;
    return text;
  }

  private generate(continuation: string, req: ParsedCompletionRequest): CompletionChoice {
    const stop = firstStop(continuation, req.stop);
    let text = stop ? continuation.slice(0, stop.end) : continuation;
    let ids = this.bytes.encode(text);
    let finishReason: CompletionChoice["finishReason"] = "stop";
    if (ids.length > req.maxTokens) {
      ids = ids.slice(0, req.maxTokens);
      text = this.bytes.decode(ids);
      finishReason = "length";
    }
    return {
      text,
      tokenIds: ids,
      logprobs: req.logprobs ? ids.map((t, i) => -(((t + i) % 10) + 1) / 10) : undefined,
      finishReason,
      stopSequence: finishReason === "stop" && stop ? stop.stop : null,
    };
  }
}

/** The stop string whose first occurrence ends earliest: the one a streaming server would hit first. */
function firstStop(text: string, stops: readonly string[]): { stop: string; end: number } | null {
  let best: { stop: string; end: number } | null = null;
  for (const stop of stops) {
    if (!stop) continue;
    const at = text.indexOf(stop);
    if (at >= 0 && (!best || at + stop.length < best.end)) best = { stop, end: at + stop.length };
  }
  return best;
}
