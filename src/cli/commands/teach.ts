import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import type { Command } from "commander";
import { z } from "zod";
import { type ModelClient, openModel, readTokenizerFile } from "../../model/index.js";
import {
  type Driver,
  ExpertDriver,
  formatSummary,
  LlmDriver,
  runTeach,
  type TeachResult,
  type Toolbox,
} from "../../teacher/index.js";
import { CorpusIndex, createToolset, type ToolsetConfig } from "../../tools/index.js";
import { requireCorpus, taskGround } from "../corpus.js";
import {
  addWebToolOptions,
  modelApiKey,
  parseFlags,
  REQUEST_TIMEOUT_OPTION,
  RETRIES_OPTION,
  RequestTimeout,
  Retries,
  requestOptions,
  SEARCH_TOP_K_OPTION,
  SearchTopK,
  WebToolFlags,
} from "../flags.js";
import { itemProgress } from "../progress.js";
import { openWebTools } from "../web-tools.js";

const Count = z.coerce.number().int().positive();

/** The flags of `coa teach`, checked at the edge. */
export const TeachFlags = z
  .object({
    ...WebToolFlags.shape,
    tasks: z.string().min(1),
    split: z.string().min(1),
    driver: z.enum(["expert", "llm"]),
    model: z.string().min(1).optional(),
    modelName: z.string().optional(),
    api: z.enum(["completions", "chat"]),
    apiKey: z.string().optional(),
    textOnly: z.boolean().default(false),
    requestTimeout: RequestTimeout,
    retries: Retries,
    corpus: z.string().optional(),
    out: z.string().min(1),
    limit: Count.optional(),
    concurrency: Count,
    seed: z.coerce.number().int(),
    searchTool: z.enum(["web_search", "wiki_search"]),
    maxTokens: Count.optional(),
    temperature: z.coerce.number().min(0).optional(),
    unsafeNoSandbox: z.boolean().default(false),
    searchTopK: SearchTopK,
    tokenizer: z.string().optional(),
    cache: z.boolean().default(true),
  })
  .refine((f) => f.driver !== "llm" || f.model, {
    message: "--model is required with --driver llm",
    path: ["model"],
  })
  .refine((f) => f.driver !== "llm" || !f.tokenizer, {
    message: "--tokenizer is for the expert driver; an llm driver counts the server's tokens",
    path: ["tokenizer"],
  });
export type TeachFlags = z.infer<typeof TeachFlags>;

/** Runs `coa teach` with parsed flags; `log` gets the human-readable lines. */
export async function teach(flags: TeachFlags, log: (line: string) => void): Promise<TeachResult> {
  const web = await openWebTools(flags, flags.searchTopK);
  const { tasks, tools, corpus, taskFile } = await teachingGround(flags, web);
  let model: ModelClient | null = null;
  let driver: Driver;
  if (flags.driver === "llm") {
    model = await openModel(flags.model!, {
      modelName: flags.modelName,
      api: flags.api,
      apiKey: modelApiKey(flags.apiKey),
      textOnly: flags.textOnly,
      ...requestOptions(flags),
    });
    driver = new LlmDriver({
      model,
      cacheDir: flags.cache ? path.join(flags.out, "cache") : undefined,
      maxTokens: flags.maxTokens,
      temperature: flags.temperature,
    });
  } else {
    driver = new ExpertDriver({
      seed: flags.seed,
      searchTool: flags.searchTool,
      tokenizer: flags.tokenizer ? await readTokenizerFile(flags.tokenizer) : undefined,
    });
  }
  try {
    await mkdir(flags.out, { recursive: true });
    const config = {
      ...flags,
      apiKey: undefined,
      corpus,
      taskFile,
      driverModel: driver.model,
      tasksLoaded: tasks.length,
    };
    await writeFile(path.join(flags.out, "config.json"), `${JSON.stringify(config, null, 2)}\n`);
    log(
      `teach: ${tasks.length} tasks from ${taskFile} · driver ${driver.name} (${driver.model}) · out ${flags.out}`,
    );
    const progress = itemProgress("teach");
    const result = await runTeach({
      tasks,
      driver,
      tools,
      out: flags.out,
      limit: flags.limit,
      concurrency: flags.concurrency,
      episode: { searchTool: flags.searchTool },
      onProgress: (p) => progress.update(p.done, p.total, `solved ${p.solved}, errors ${p.errors}`),
    });
    progress.stop();
    if (result.repaired) log(`repaired a torn last line in ${result.tracesFile}`);
    if (result.resumed) log(`resumed: ${result.resumed} tasks were already traced`);
    log(formatSummary(result.summary));
    return result;
  } finally {
    await model?.close?.();
    await web.close();
  }
}

/** The tasks and their tools (`taskGround`); the code tool runs in `flags`' sandbox. */
async function teachingGround(flags: TeachFlags, web: Pick<ToolsetConfig, "search" | "crawl">) {
  // The teacher cannot work without search: no corpus is an error, before any task runs.
  const required = <C>(corpus: C | undefined) => requireCorpus(corpus, flags.tasks);
  const ground = await taskGround<Toolbox>(flags, async (corpus) =>
    createToolset({
      index: (await CorpusIndex.open(required(corpus))).index,
      ...web,
      code: { unsafeNoSandbox: flags.unsafeNoSandbox },
    }),
  );
  return { ...ground, corpus: required(ground.corpus) };
}

export function register(program: Command): void {
  addWebToolOptions(program.command("teach"))
    .description("run the teacher multi-agent system on tasks and append MAS traces (resumable)")
    .requiredOption("--tasks <path>", "a task file, a world directory or a world set (with --split)")
    .option("--split <name>", "split of a world directory", "train")
    .option("--driver <driver>", "expert (offline programmatic teacher) | llm", "expert")
    .option("--model <spec>", "for --driver llm: OpenAI-compatible base URL or engine[:preset]")
    .option("--model-name <name>", "model name for the server (default: the first it lists)")
    .option("--api <api>", "completions | chat", "completions")
    .option("--api-key <key>", "bearer key (default: $COA_API_KEY, then $OPENAI_API_KEY)")
    .option("--text-only", "the server takes and returns text only")
    .option(...REQUEST_TIMEOUT_OPTION)
    .option(...RETRIES_OPTION)
    .option("--corpus <jsonl>", "corpus for search and crawl (default: corpus.jsonl of the world)")
    .option("--out <dir>", "run folder: traces.jsonl, summary.json, config.json", "runs/teach")
    .option("--limit <n>", "only the first N tasks")
    .option("--concurrency <k>", "episodes in flight", "2")
    .option("--seed <n>", "expert driver: seed of its slips", "0")
    .option("--search-tool <tag>", "web_search | wiki_search", "web_search")
    .option(...SEARCH_TOP_K_OPTION)
    .option(
      "--tokenizer <file>",
      "expert driver: count tokens with this tokenizer file (e.g. runs/data/tokenizer.json) to compare with a model",
    )
    .option("--max-tokens <n>", "llm driver: tokens per agent reply")
    .option("--temperature <t>", "llm driver: sampling temperature (default 0)")
    .option(
      "--unsafe-no-sandbox",
      "let the code tool run Python WITHOUT a sandbox when bubblewrap is missing",
    )
    .option("--no-cache", "llm driver: do not reuse or store cached replies")
    .action(async (raw: Record<string, unknown>) => {
      const result = await teach(parseFlags(TeachFlags, raw), (line) => process.stdout.write(`${line}\n`));
      if (result.summary.errors > 0) process.exitCode = 1;
    });
}
