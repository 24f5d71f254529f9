import type { SSEStreamingApi } from "hono/streaming";
import type { Trajectory } from "../protocol/index.js";
import type { RunEvent } from "../runtime/index.js";
import { type ApiError, errorBody } from "./errors.js";
import { chunkBody, type ReplyHead, type StepDelta, usageChunkBody } from "./wire.js";

/** What of an event is streamed as `delta.coa_step`; null for events that are not steps. */
export function stepDelta(event: RunEvent): StepDelta | null {
  if (event.type === "format_error")
    return { kind: "format_error", text: event.errors.map((e) => e.message).join("\n") };
  if (event.type !== "step") return null;
  const { step } = event;
  // The answer is the reply's content, sent once the episode is recorded.
  if (step.type === "answer") return null;
  if (step.type === "tool_call") return { kind: "tool_call", tool: step.tool, text: step.args };
  return { kind: step.type, text: step.text };
}

/**
 * Writes one request's chunks in order. Events arrive synchronously from the runtime while SSE
 * writes are asynchronous, so writes are chained; a client that left is not written to.
 */
export class ChunkWriter {
  private chain: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly stream: SSEStreamingApi,
    private readonly head: ReplyHead,
  ) {}

  private send(data: unknown): void {
    this.write(JSON.stringify(data));
  }

  private write(data: string): void {
    // A write fails only when the client has gone; the episode is aborted by then, nothing to tell.
    this.chain = this.chain
      .then(() => (this.stream.aborted ? undefined : this.stream.writeSSE({ data })))
      .catch(() => {});
  }

  start(): void {
    this.send(chunkBody(this.head, { role: "assistant", content: "" }));
  }

  event(event: RunEvent): void {
    const step = stepDelta(event);
    if (step) this.send(chunkBody(this.head, { coa_step: step }));
  }

  /** The answer, the finishing chunk, usage when asked for, then OpenAI's end marker. */
  async finish(t: Trajectory, includeUsage: boolean): Promise<void> {
    if (t.answer !== null) this.send(chunkBody(this.head, { content: t.answer }));
    this.send(chunkBody(this.head, {}, t.finishReason));
    if (includeUsage) this.send(usageChunkBody(this.head, t));
    await this.done();
  }

  /** Headers are gone by now, so a failure is an `error` event, which OpenAI's clients raise. */
  async fail(err: ApiError): Promise<void> {
    this.send(errorBody(err));
    await this.done();
  }

  private async done(): Promise<void> {
    this.write("[DONE]");
    await this.chain;
  }
}
