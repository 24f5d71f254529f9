import { mkdir, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { setTraceProcessors, setTracingDisabled } from "@openai/agents";
import type { Command } from "commander";
import { z } from "zod";
import { JsonlTraceProcessor } from "../../importers/index.js";
import { ByteTokenizer } from "../../model/index.js";
import { loadTasks } from "../../tasks/index.js";
import { endpointProvider } from "../../teacher/agents-sdk/endpoint.js";
import { ExpertModelProvider } from "../../teacher/agents-sdk/expert-model.js";
import { runReferenceTeam } from "../../teacher/agents-sdk/team.js";
import { ExpertDriver } from "../../teacher/index.js";
import { CorpusIndex, createToolset } from "../../tools/index.js";
import { findCorpus, requireCorpus } from "../corpus.js";
import {
  modelApiKey,
  parseFlags,
  REQUEST_TIMEOUT_OPTION,
  RETRIES_OPTION,
  RequestTimeout,
  Retries,
  requestOptions,
  SEARCH_TOP_K_OPTION,
  SearchTopK,
} from "../flags.js";
import { itemProgress } from "../progress.js";

const Count = z.coerce.number().int().positive();
const ROLES = ["manager", "searcher", "coder", "critic", "verifier"] as const;

/** The file `coa team` writes: the framework's own trace spans, what `coa import --from openai-agents` reads. */
export const TEAM_SPANS_FILE = "spans.jsonl";

/** The flags of `coa team`, checked at the edge. */
export const TeamFlags = z.object({
  tasks: z.string().min(1),
  split: z.string().min(1),
  corpus: z.string().optional(),
  out: z.string().min(1),
  limit: Count.optional(),
  seed: z.coerce.number().int(),
  searchTool: z.enum(["web_search", "wiki_search"]),
  searchTopK: SearchTopK,
  unsafeNoSandbox: z.boolean().default(false),
  /** An OpenAI-compatible endpoint plays every agent; without it, the expert driver, offline. */
  model: z.string().min(1).optional(),
  modelName: z.string().min(1).optional(),
  apiKey: z.string().optional(),
  requestTimeout: RequestTimeout,
  retries: Retries,
});
export type TeamFlags = z.infer<typeof TeamFlags>;

/** What `coa team` did: also written to `<out>/team.json`. */
export interface TeamSummary {
  spans: string;
  /** `coa-expert` offline, else the endpoint's model name. */
  model: string;
  tasks: number;
  answered: number;
  /** Tasks whose run failed (an HTTP error, max turns…); the other tasks' traces are kept. */
  failed: { taskId: string; error: string }[];
}

/**
 * Runs the reference team (src/teacher/agents-sdk) on the tasks, one at a time, and writes the SDK's
 * traces to `<out>/spans.jsonl` (replacing an earlier run's) for `coa import --from openai-agents`.
 * Offline the expert driver plays every agent; with `--model` an OpenAI-compatible endpoint does,
 * through the SDK's own OpenAI provider in chat-completions mode. A task whose run fails is counted
 * and the run goes on.
 */
export async function runTeamSummary(flags: TeamFlags, log: (line: string) => void): Promise<TeamSummary> {
  const { tasks, file } = await loadTasks(flags.tasks, { split: flags.split, limit: flags.limit });
  const corpus = requireCorpus(flags.corpus ?? (await findCorpus(flags.tasks)), flags.tasks);
  const online = flags.model
    ? await endpointProvider({
        baseUrl: flags.model,
        modelName: flags.modelName,
        apiKey: modelApiKey(flags.apiKey),
        ...requestOptions(flags),
      })
    : null;
  const tools = createToolset({
    index: (await CorpusIndex.open(corpus)).index,
    // The tools as `coa teach` sets them up, so the two teams see the same observations.
    search: { provider: "local", topK: flags.searchTopK },
    crawl: { offline: true },
    code: { unsafeNoSandbox: flags.unsafeNoSandbox },
  });
  await mkdir(flags.out, { recursive: true });
  const spans = path.join(flags.out, TEAM_SPANS_FILE);
  await rm(spans, { force: true });
  const processor = new JsonlTraceProcessor(spans);
  setTraceProcessors([processor]);
  setTracingDisabled(false);
  const player = online ? `${online.model} at ${flags.model}` : "the expert driver";
  log(`team: ${tasks.length} tasks from ${file} · @openai/agents played by ${player} · out ${spans}`);
  const expert = new ExpertDriver({ seed: flags.seed, searchTool: flags.searchTool });
  // Online, every agent asks the endpoint for its one model.
  const models = online && {
    models: Object.fromEntries(ROLES.map((role) => [role, online.model])),
  };
  const progress = itemProgress("team");
  const summary: TeamSummary = {
    spans,
    model: online?.model ?? "coa-expert",
    tasks: tasks.length,
    answered: 0,
    failed: [],
  };
  try {
    for (const [i, task] of tasks.entries()) {
      const expertModel = online
        ? null
        : new ExpertModelProvider(expert.episode(task), new ByteTokenizer(), flags.searchTool);
      try {
        const answer = await runReferenceTeam(task, {
          provider: expertModel ?? online!.provider,
          tools,
          toolOk: expertModel?.toolOk,
          searchTool: flags.searchTool,
          ...models,
        });
        if (answer !== null) summary.answered++;
      } catch (err) {
        summary.failed.push({ taskId: task.id, error: (err as Error).message });
      }
      progress.update(i + 1, tasks.length, `${summary.answered} answered, ${summary.failed.length} failed`);
    }
  } finally {
    progress.stop();
    setTraceProcessors([]);
  }
  for (const f of summary.failed.slice(0, 5)) log(`team: task ${f.taskId} failed: ${f.error}`);
  if (summary.failed.length > 5) log(`team: … and ${summary.failed.length - 5} more failed (team.json)`);
  await writeFile(path.join(flags.out, "team.json"), `${JSON.stringify(summary, null, 2)}\n`);
  log(
    `team: ${summary.answered} of ${tasks.length} tasks answered, ${summary.failed.length} failed; traces in ${spans}`,
  );
  return summary;
}

/** `runTeamSummary`, returning the traces file. */
export async function runTeam(flags: TeamFlags, log: (line: string) => void): Promise<string> {
  return (await runTeamSummary(flags, log)).spans;
}

export function register(program: Command): void {
  program
    .command("team")
    .description(
      "run coa's team rebuilt on @openai/agents (offline, played by the expert driver, or on an OpenAI-compatible --model) and record its traces",
    )
    .requiredOption("--tasks <path>", "a task file or a world directory (with --split)")
    .option("--split <name>", "split of a world directory", "test")
    .option("--corpus <jsonl>", "corpus for search and crawl (default: corpus.jsonl of the world)")
    .requiredOption("--out <dir>", "run folder: spans.jsonl, team.json")
    .option("--limit <n>", "only the first N tasks")
    .option("--model <url>", "OpenAI-compatible server base URL to play every agent (default: offline)")
    .option("--model-name <name>", "with --model: model name (default: the first the server lists)")
    .option("--api-key <key>", "with --model: bearer key (default: $COA_API_KEY, then $OPENAI_API_KEY)")
    .option(...REQUEST_TIMEOUT_OPTION)
    .option(...RETRIES_OPTION)
    .option("--seed <n>", "expert driver: seed of its slips (as `coa teach --seed`)", "0")
    .option("--search-tool <tag>", "web_search | wiki_search", "web_search")
    .option(...SEARCH_TOP_K_OPTION)
    .option(
      "--unsafe-no-sandbox",
      "let the code tool run Python WITHOUT a sandbox when bubblewrap is missing",
    )
    .addHelpText(
      "after",
      "\nThen: coa import <out>/spans.jsonl --from openai-agents --tasks <same> --split <same> --out <dir>",
    )
    .action(async (raw: Record<string, unknown>) => {
      const summary = await runTeamSummary(parseFlags(TeamFlags, raw), (line) =>
        process.stdout.write(`${line}\n`),
      );
      if (summary.failed.length > 0) process.exitCode = 1;
    });
}
