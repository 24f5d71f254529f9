import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import {
  type CopyRate,
  EVAL_SUMMARY_FILE,
  EVAL_TRAJECTORIES_FILE,
  type EvalSummary,
  EvalTrajectory,
  evaluate,
} from "../../eval/index.js";
import {
  Engine,
  type EngineLaunch,
  engineLoadLine,
  openModel,
  prefixCacheCounters,
  prefixCacheDelta,
  saveTokenizerOf,
  TOKENIZER_FILE,
} from "../../model/index.js";
import { loadTasks } from "../../tasks/index.js";
import { CorpusIndex, createToolset, prepareToolset } from "../../tools/index.js";
import { pct, readJsonlTolerant } from "../../util/index.js";
import { agentPrompt } from "../agent-flags.js";
import { findCorpus } from "../corpus.js";
import { modelApiKey, requestOptions } from "../flags.js";
import { itemProgress } from "../progress.js";
import { openWebTools } from "../web-tools.js";
import type { EvalFlags } from "./eval.js";

const rate = (r: CopyRate) => (r.rate === null ? "–" : `${pct(r.rate)} (${r.copied} of ${r.episodes})`);

export function formatEvalSummary(s: EvalSummary): string {
  const c = s.cost;
  const kinds = Object.entries(s.byKind);
  return [
    `model ${s.model} · profile ${s.profile} · ${s.success.tasks} tasks × k=${s.success.k}`,
    `pass@1 ${pct(s.success.pass1)} · avg@k ${pct(s.success.avgK)} · pass@k ${pct(s.success.passK)} · best-of-k by self score ${pct(s.success.bestOfKBySelfScore)}`,
    ...(kinds.length > 1
      ? [
          `by kind: ${kinds.map(([kind, m]) => `${kind} ${pct(m.pass1)} of ${m.tasks} (avg@k ${pct(m.avgK)})`).join(" · ")}`,
        ]
      : []),
    ...(s.copy.entity.episodes || s.copy.value.episodes
      ? [
          `copy accuracy: the question's entity in the first tool call ${rate(s.copy.entity)} · the first lookup's value in the second ${rate(s.copy.value)}`,
        ]
      : []),
    `tokens/task ${c.billedTokensPerTask.toFixed(0)} billed, ${c.processedTokensPerTask.toFixed(0)} with a prefix cache · per solved task ${c.billedTokensPerSolvedTask?.toFixed(0) ?? "–"} billed, ${c.processedTokensPerSolvedTask?.toFixed(0) ?? "–"} cached · generated ${c.generatedTokensPerTask.toFixed(0)} · observations ${c.observationTokensPerTask.toFixed(0)}`,
    `model calls/task ${c.modelCallsPerTask.toFixed(2)} · tool calls/task ${c.toolCallsPerTask.toFixed(2)} · format-error rate ${pct(s.formatErrorRate)} · ${(c.wallMsPerTask / 1000).toFixed(2)} s/task`,
    `finish: ${Object.entries(s.finishReasons)
      .map(([k, v]) => `${k} ${v}`)
      .join(", ")}${s.success.scorerErrors ? ` · scorer errors ${s.success.scorerErrors}` : ""}`,
  ].join("\n");
}

/**
 * Episodes in flight when --concurrency is not given: the embedded engine batches every request in flight
 * into its decode steps (the demo's 200 test tasks: 25.1 s at 4, ~20 s at 32, docs/engine.md), a server
 * gets the cautious 4 it always had.
 */
export function defaultConcurrency(model: unknown): number {
  return model instanceof Engine ? 32 : 4;
}

/**
 * Runs `coa eval`: writes trajectories.jsonl and summary.json to --out and returns the summary. With
 * `launched` (`launchModel` of `flags.model`), takes that engine over instead of starting one; the
 * caller cancels it if this fails before then.
 */
export async function runEval(
  flags: EvalFlags,
  log: (line: string) => void,
  launched?: EngineLaunch,
): Promise<EvalSummary> {
  const loaded = await loadTasks(flags.tasks, { split: flags.split, limit: flags.limit });
  if (loaded.tasks.length === 0) throw new Error(`--tasks ${flags.tasks}: no tasks to evaluate`);
  const corpus = flags.corpus ?? (await findCorpus(flags.tasks));
  const web = await openWebTools(flags, flags.searchTopK);
  const tools = createToolset({
    profile: flags.profile,
    index: corpus ? (await CorpusIndex.open(corpus)).index : undefined,
    ...web,
    code: { unsafeNoSandbox: flags.unsafeNoSandbox },
  });
  prepareToolset(tools); // while the engine starts
  const apiKey = modelApiKey();
  const requests = requestOptions(flags);
  const model = await openModel(flags.model, {
    modelName: flags.modelName,
    api: flags.api,
    apiKey,
    textOnly: flags.textOnly,
    chatTemplate: flags.chatTemplate,
    onNotice: log,
    ...requests,
    launched,
  });
  const judge = flags.judge ? await openModel(flags.judge, { apiKey, ...requests }) : undefined;
  const progress = itemProgress(`eval ${path.basename(flags.out)}`);
  const started = performance.now();
  try {
    await mkdir(flags.out, { recursive: true });
    await saveTokenizerOf(model, path.join(flags.out, TOKENIZER_FILE));
    // The embedded engine's KV reuse across turns over these episodes: prompt tokens it did not
    // compute again (the counters are cumulative; read around the run, as RL reads them per step).
    // The engine was opened for this run just above, and its `/info` then is the "before": asking
    // again would hold the first episode back by a round trip.
    const cacheBefore = model instanceof Engine ? prefixCacheCounters(model.startInfo) : null;
    const summary = await evaluate({
      model,
      tools,
      tasks: loaded.tasks,
      profile: flags.profile,
      k: flags.k,
      outDir: flags.out,
      concurrency: flags.concurrency ?? defaultConcurrency(model),
      seed: flags.seed,
      sampling: { temperature: flags.temperature, maxTokensPerTurn: flags.maxTokensPerTurn },
      budget: { maxTurns: flags.maxTurns, maxTokens: flags.maxTokens },
      score: { judge },
      prompt: await agentPrompt(flags),
      onProgress: (p) => progress.update(p.done, p.total, `${p.correct} correct`),
    });
    progress.stop();
    const info = model instanceof Engine ? await model.info() : undefined;
    const cache = info ? prefixCacheDelta(cacheBefore, prefixCacheCounters(info)) : null;
    const prefixCache = cache
      ? {
          hits: cache.hits,
          savedPrefillTokens: cache.saved_prefill_tokens,
          prefillTokens: cache.prefill_tokens,
        }
      : null;
    const record = {
      ...summary,
      tasks: flags.tasks,
      split: flags.split ?? null,
      corpus: corpus ?? null,
      prefixCache,
    };
    await writeFile(path.join(flags.out, EVAL_SUMMARY_FILE), `${JSON.stringify(record, null, 2)}\n`);
    log(formatEvalSummary(summary));
    if (prefixCache)
      log(
        `prefix cache: ${prefixCache.hits} hits · ${prefixCache.savedPrefillTokens} prompt tokens reused, ${prefixCache.prefillTokens} computed`,
      );
    if (info) log(engineLoadLine(info.counters, (performance.now() - started) / 1000));
    if (flags.compareTraces?.length) {
      // The paper's cost claim on these very episodes: each MAS beside this model, per task kind.
      const trajectories = (
        await readJsonlTolerant(path.join(flags.out, EVAL_TRAJECTORIES_FILE), EvalTrajectory)
      ).records.filter((t) => t.meta.eval.sample === 0);
      // The model's own detokenizer gives the text of its ids, served or embedded alike.
      const texts = new Map<string, string>();
      for (const t of trajectories)
        for (const ids of [t.promptIds, ...t.segments.map((s) => s.ids)])
          if (!texts.has(ids.join())) texts.set(ids.join(), ids.length ? await model.detokenize(ids) : "");
      const { compareWithTraces } = await import("./compare-costs.js");
      const { markdown } = await compareWithTraces({
        traces: flags.compareTraces,
        trajectories,
        name: summary.model,
        tokenizerDir: flags.out,
        decoderOf: () => (ids) => texts.get(ids.join())!,
        out: flags.out,
        command: `coa ${process.argv.slice(2).join(" ")}`,
      });
      log(markdown);
    }
    return summary;
  } finally {
    progress.stop();
    await model.close?.();
    await judge?.close?.();
    await web.close();
  }
}
