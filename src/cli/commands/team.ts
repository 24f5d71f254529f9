import { rm } from "node:fs/promises";
import path from "node:path";
import { setTraceProcessors, setTracingDisabled } from "@openai/agents";
import type { Command } from "commander";
import { z } from "zod";
import { JsonlTraceProcessor } from "../../importers/index.js";
import { ByteTokenizer } from "../../model/index.js";
import { loadTasks } from "../../tasks/index.js";
import { ExpertModelProvider } from "../../teacher/agents-sdk/expert-model.js";
import { runReferenceTeam } from "../../teacher/agents-sdk/team.js";
import { ExpertDriver } from "../../teacher/index.js";
import { CorpusIndex, createToolset } from "../../tools/index.js";
import { findCorpus } from "../corpus.js";
import { parseFlags, SEARCH_TOP_K_OPTION, SearchTopK } from "../flags.js";
import { itemProgress } from "../progress.js";

const Count = z.coerce.number().int().positive();

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
});
export type TeamFlags = z.infer<typeof TeamFlags>;

/**
 * Runs the reference team (src/teacher/agents-sdk) on the tasks, offline, the expert driver playing
 * every agent, and writes the SDK's traces to `<out>/spans.jsonl` (replacing an earlier run's) for
 * `coa import --from openai-agents`. Returns that file.
 */
export async function runTeam(flags: TeamFlags, log: (line: string) => void): Promise<string> {
  const { tasks, file } = await loadTasks(flags.tasks, { split: flags.split, limit: flags.limit });
  const corpus = flags.corpus ?? (await findCorpus(flags.tasks));
  if (!corpus) throw new Error(`--corpus: no corpus.jsonl next to ${flags.tasks}; name one with --corpus`);
  const tools = createToolset({
    index: (await CorpusIndex.open(corpus)).index,
    // The tools as `coa teach` sets them up, so the two teams see the same observations.
    search: { provider: "local", topK: flags.searchTopK },
    crawl: { offline: true },
    code: { unsafeNoSandbox: flags.unsafeNoSandbox },
  });
  const spans = path.join(flags.out, "spans.jsonl");
  await rm(spans, { force: true });
  setTraceProcessors([new JsonlTraceProcessor(spans)]);
  setTracingDisabled(false);
  log(`team: ${tasks.length} tasks from ${file} · @openai/agents played by the expert driver · out ${spans}`);
  const expert = new ExpertDriver({ seed: flags.seed, searchTool: flags.searchTool });
  const progress = itemProgress("team");
  let answered = 0;
  try {
    for (const [i, task] of tasks.entries()) {
      const provider = new ExpertModelProvider(expert.episode(task), new ByteTokenizer(), flags.searchTool);
      const answer = await runReferenceTeam(task, {
        provider,
        tools,
        toolOk: provider.toolOk,
        searchTool: flags.searchTool,
      });
      if (answer !== null) answered++;
      progress.update(i + 1, tasks.length, `${answered} answered`);
    }
  } finally {
    progress.stop();
    setTraceProcessors([]);
  }
  log(`team: ${answered} of ${tasks.length} tasks answered; traces in ${spans}`);
  return spans;
}

export function register(program: Command): void {
  program
    .command("team")
    .description(
      "run coa's team rebuilt on @openai/agents (offline, played by the expert driver) and record its traces",
    )
    .requiredOption("--tasks <path>", "a task file or a world directory (with --split)")
    .option("--split <name>", "split of a world directory", "test")
    .option("--corpus <jsonl>", "corpus for search and crawl (default: corpus.jsonl of the world)")
    .requiredOption("--out <dir>", "run folder: spans.jsonl")
    .option("--limit <n>", "only the first N tasks")
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
      await runTeam(parseFlags(TeamFlags, raw), (line) => process.stdout.write(`${line}\n`));
    });
}
