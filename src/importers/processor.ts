import { appendFileSync, mkdirSync } from "node:fs";
import path from "node:path";
import type { Span, Trace, TracingProcessor } from "@openai/agents";

/**
 * A TracingProcessor for the OpenAI Agents SDK (JavaScript) that appends every trace and finished
 * span to a JSONL file, in the SDK's own JSON shape: what `coa import --from openai-agents` reads.
 *
 *   import { addTraceProcessor } from "@openai/agents";
 *   addTraceProcessor(new JsonlTraceProcessor("runs/agents/spans.jsonl"));
 *
 * Each record is one synchronous append, so a crash loses at most its last line, and the importer
 * counts a torn line as bad input rather than failing.
 */
export class JsonlTraceProcessor implements TracingProcessor {
  constructor(readonly file: string) {
    mkdirSync(path.dirname(file), { recursive: true });
  }

  private write(record: object | null): void {
    // A Noop trace or span (tracing disabled) serialises to null: nothing to keep.
    if (record) appendFileSync(this.file, `${JSON.stringify(record)}\n`);
  }

  async onTraceStart(trace: Trace): Promise<void> {
    this.write(trace.toJSON());
  }

  async onTraceEnd(): Promise<void> {}

  async onSpanStart(): Promise<void> {}

  async onSpanEnd(span: Span<never>): Promise<void> {
    this.write(span.toJSON());
  }

  async shutdown(): Promise<void> {}

  async forceFlush(): Promise<void> {}
}
