import type { Command } from "commander";
import pc from "picocolors";
import { z } from "zod";
import { openModel } from "../model/index.js";
import { ProfileName } from "../protocol/index.js";
import { type Budget, DEFAULT_BUDGET, type RunOptions, type Sampling } from "../runtime/index.js";
import { CorpusIndex, createToolset } from "../tools/index.js";
import {
  REQUEST_TIMEOUT_OPTION,
  RETRIES_OPTION,
  RequestTimeout,
  Retries,
  requestOptions,
  SEARCH_TOP_K_OPTION,
  SearchTopK,
} from "./flags.js";

const Count = z.coerce.number().int().positive();
const Seconds = z.coerce.number().positive();

/**
 * The flags every command that runs the agent takes (`coa run`, `coa serve`): which model, which
 * tools, which budgets and sampling. One definition, so both commands read them the same way.
 */
export const AgentFlags = z.object({
  model: z.string().min(1),
  modelName: z.string().optional(),
  api: z.enum(["completions", "chat"]),
  textOnly: z.boolean().default(false),
  requestTimeout: RequestTimeout,
  retries: Retries,
  profile: ProfileName,
  corpus: z.string().optional(),
  search: z.enum(["local", "serper", "searxng"]),
  searchUrl: z.url().optional(),
  searchTopK: SearchTopK,
  offline: z.boolean().default(false),
  unsafeNoSandbox: z.boolean().default(false),
  toolTimeout: Seconds.optional(),
  maxTurns: Count.optional(),
  maxTokens: Count.optional(),
  maxTime: Seconds.optional(),
  maxFormatErrors: z.coerce.number().int().nonnegative().optional(),
  maxTokensPerTurn: Count.optional(),
  temperature: z.coerce.number().min(0).optional(),
  topP: z.coerce.number().gt(0).max(1).optional(),
  seed: z.coerce.number().int().optional(),
});
export type AgentFlags = z.infer<typeof AgentFlags>;

/** `--model` and how to reach it. */
export function addModelOptions(command: Command): Command {
  return command
    .requiredOption(
      "-m, --model <spec>",
      "OpenAI-compatible server base URL, or engine[:<preset>|hf:<model>|<checkpoint-dir>]",
    )
    .option("--model-name <name>", "model name for the server (default: the first it lists)")
    .option("--api <api>", "completions | chat (continue_final_message)", "completions")
    .option("--text-only", "the server takes and returns text only; ids come from the byte tokenizer")
    .option(...REQUEST_TIMEOUT_OPTION)
    .option(...RETRIES_OPTION);
}

/** The protocol profile and the tools behind it. */
export function addToolOptions(command: Command): Command {
  return command
    .option("-p, --profile <profile>", `tag set (${ProfileName.options.join("|")})`, "web")
    .option("-c, --corpus <jsonl>", "local corpus ({id,title,text,url?} per line) for search and crawl")
    .option("--search <provider>", "web_search backend: local (the corpus) | serper | searxng", "local")
    .option("--search-url <url>", "SearXNG base URL, or a Serper endpoint (key: $SERPER_API_KEY)")
    .option(...SEARCH_TOP_K_OPTION)
    .option("--offline", "crawl_page reads only corpus documents and allowed files, never the network")
    .option(
      "--unsafe-no-sandbox",
      "let the code tool run Python WITHOUT a sandbox when bubblewrap is missing",
    )
    .option("--tool-timeout <seconds>", "limit per tool call");
}

/** Budgets and sampling of one episode. */
export function addEpisodeOptions(command: Command, maxTokensHelp: string): Command {
  return command
    .option("--max-turns <n>", "model calls per episode")
    .option("--max-tokens <n>", maxTokensHelp)
    .option(
      "--max-time <seconds>",
      "wall-time limit of the episode, every model-server request included (default 600)",
    )
    .option("--max-format-errors <n>", "format errors tolerated before giving up")
    .option("--max-tokens-per-turn <n>", "tokens per model call")
    .option("--temperature <t>", "sampling temperature")
    .option("--top-p <p>", "nucleus sampling")
    .option("--seed <n>", "sampling seed");
}

/** Opens `--model` as the flags say; `apiKey` is the model server's bearer key. */
export function openAgentModel(flags: AgentFlags, apiKey: string | undefined, signal?: AbortSignal) {
  return openModel(flags.model, {
    modelName: flags.modelName,
    api: flags.api,
    apiKey,
    textOnly: flags.textOnly,
    ...requestOptions(flags),
    signal,
  });
}

/**
 * The profile's tools. The corpus index is opened now, so a bad corpus fails before the model runs
 * rather than inside a tool call.
 */
export async function openAgentTools(
  flags: AgentFlags,
  print: (line: string) => void,
): Promise<RunOptions["tools"]> {
  let index: CorpusIndex | undefined;
  if (flags.corpus) {
    const opened = await CorpusIndex.open(flags.corpus);
    if (!opened.reused) print(pc.dim(`indexed ${flags.corpus}`));
    index = opened.index;
  }
  return createToolset({
    profile: flags.profile,
    index,
    search: {
      provider: flags.search,
      baseUrl: flags.searchUrl,
      apiKey: flags.search === "serper" ? process.env.SERPER_API_KEY : undefined,
      topK: flags.searchTopK,
    },
    crawl: { offline: flags.offline },
    code: { unsafeNoSandbox: flags.unsafeNoSandbox },
  });
}

/** The episode wall-time limit in milliseconds: `--max-time`, or the runtime's default. */
export const maxTimeMs = (flags: AgentFlags): number =>
  flags.maxTime === undefined ? DEFAULT_BUDGET.maxTimeMs : flags.maxTime * 1000;

export function agentBudget(flags: AgentFlags): Partial<Budget> {
  return {
    maxTurns: flags.maxTurns,
    maxTokens: flags.maxTokens,
    maxTimeMs: maxTimeMs(flags),
    maxFormatErrors: flags.maxFormatErrors,
  };
}

export function agentSampling(flags: AgentFlags): Partial<Sampling> {
  return {
    temperature: flags.temperature,
    topP: flags.topP,
    seed: flags.seed,
    maxTokensPerTurn: flags.maxTokensPerTurn,
  };
}

export const toolTimeoutMs = (flags: AgentFlags): number | undefined =>
  flags.toolTimeout === undefined ? undefined : flags.toolTimeout * 1000;
