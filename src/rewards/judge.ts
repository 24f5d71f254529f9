import { createHash } from "node:crypto";
import { appendFile, mkdir, readFile } from "node:fs/promises";
import { dirname } from "node:path";
import { z } from "zod";
import type { ModelClient } from "../model/index.js";

export interface JudgeInput {
  question: string;
  golds: readonly string[];
  prediction: string;
}

export const JudgeVerdict = z.object({ correct: z.boolean(), reason: z.string().default("") });
export type JudgeVerdict = z.infer<typeof JudgeVerdict>;

export type JudgeOutcome = { verdict: JudgeVerdict; cached: boolean } | { error: string };

export function judgePrompt({ question, golds, prediction }: JudgeInput): string {
  return [
    "You grade answers to questions. Decide whether the candidate answer says the same thing as at least",
    "one reference answer. Wording, formatting, capitalisation and harmless extra detail do not matter.",
    "A candidate that contradicts the references, answers only part of what is asked, or hedges between",
    "several options is incorrect.",
    "",
    `Question: ${question}`,
    "Reference answers:",
    ...golds.map((g) => `- ${g}`),
    `Candidate answer: ${prediction}`,
    "",
    'Reply with one JSON object and nothing else: {"correct": true or false, "reason": "one short sentence"}',
    "",
  ].join("\n");
}

/** The first JSON object in a judge's reply that carries a boolean `correct`; null when there is none. */
export function parseVerdict(text: string): JudgeVerdict | null {
  for (const m of text.matchAll(/\{[^{}]*\}/g)) {
    try {
      const parsed = JudgeVerdict.safeParse(JSON.parse(m[0]));
      if (parsed.success) return parsed.data;
    } catch {}
  }
  return null;
}

export interface LlmJudgeOptions {
  model: ModelClient;
  /** Extra attempts after a malformed verdict or a failed call (default 2). */
  retries?: number;
  /** JSONL file that keeps verdicts across runs; verdicts are always cached in memory too. */
  cachePath?: string;
  maxTokens?: number;
}

const CacheLine = z.object({ key: z.string(), verdict: JudgeVerdict });

/**
 * An LLM judge over any ModelClient. Verdicts are cached by (model, prompt); failures are never cached
 * and come back as `{ error }`, so a judge that is down is not mistaken for a wrong answer.
 */
export class LlmJudge {
  private readonly memory = new Map<string, JudgeVerdict>();
  private readonly pending = new Map<string, Promise<JudgeOutcome>>();
  private diskLoaded: Promise<void> | null = null;
  /** The cache file ends in a line torn by a crash; the next entry must start on a fresh line. */
  private tornTail = false;

  constructor(private readonly opts: LlmJudgeOptions) {}

  async judge(input: JudgeInput, signal?: AbortSignal): Promise<JudgeOutcome> {
    const prompt = judgePrompt(input);
    const key = createHash("sha256").update(`${this.opts.model.name}\0${prompt}`).digest("hex");
    await this.loadDisk();
    const hit = this.memory.get(key);
    if (hit) return { verdict: hit, cached: true };
    const running = this.pending.get(key);
    if (running) return running;
    const call = this.ask(prompt, key, signal).finally(() => this.pending.delete(key));
    this.pending.set(key, call);
    return call;
  }

  private async ask(prompt: string, key: string, signal?: AbortSignal): Promise<JudgeOutcome> {
    const attempts = 1 + (this.opts.retries ?? 2);
    let problem = "";
    for (let attempt = 0; attempt < attempts; attempt++) {
      try {
        const result = await this.opts.model.complete(
          // a retry samples, since a greedy judge would repeat its malformed reply
          { prompt, maxTokens: this.opts.maxTokens ?? 200, temperature: attempt === 0 ? 0 : 0.7 },
          { signal },
        );
        const text = result.choices[0]!.text;
        const verdict = parseVerdict(text);
        if (verdict) {
          await this.remember(key, verdict);
          return { verdict, cached: false };
        }
        problem = `malformed verdict: ${JSON.stringify(text.slice(0, 120))}`;
      } catch (err) {
        if (signal?.aborted) return { error: "judge call aborted" };
        problem = `judge call failed: ${(err as Error).message}`;
      }
    }
    return { error: `${problem} (after ${attempts} attempts)` };
  }

  private async remember(key: string, verdict: JudgeVerdict): Promise<void> {
    this.memory.set(key, verdict);
    if (!this.opts.cachePath) return;
    await mkdir(dirname(this.opts.cachePath), { recursive: true });
    const line = `${JSON.stringify({ key, verdict })}\n`;
    await appendFile(this.opts.cachePath, this.tornTail ? `\n${line}` : line);
    this.tornTail = false;
  }

  private loadDisk(): Promise<void> {
    this.diskLoaded ??= this.readDisk();
    return this.diskLoaded;
  }

  private async readDisk(): Promise<void> {
    const path = this.opts.cachePath;
    if (!path) return;
    const text = await readFile(path, "utf8").catch(() => "");
    this.tornTail = text.length > 0 && !text.endsWith("\n");
    for (const line of text.split("\n")) {
      if (!line.trim()) continue;
      try {
        // a line cut short by a crash is skipped; its verdict is simply asked again
        const entry = CacheLine.parse(JSON.parse(line));
        this.memory.set(entry.key, entry.verdict);
      } catch {}
    }
  }
}
