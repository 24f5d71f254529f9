import { readFile } from "node:fs/promises";
import type { Command } from "commander";
import { z } from "zod";
import { type EngineLaunch, openModel } from "../model/index.js";
import { DIALECTS, DialectName, ProfileName } from "../protocol/index.js";
import { type Budget, DEFAULT_BUDGET, type Sampling } from "../runtime/defaults/index.js";
import type { RunOptions } from "../runtime/index.js";
import {
  CHAT_TEMPLATE_OPTION,
  ChatTemplate,
  REQUEST_TIMEOUT_OPTION,
  RETRIES_OPTION,
  RequestTimeout,
  Retries,
  requestOptions,
  SEARCH_OPTION,
  SEARCH_TOP_K_OPTION,
  SEARCH_URL_OPTION,
  SearchProvider,
  SearchTopK,
  TEXT_ONLY_OPTION,
  TextOnly,
} from "./flags.js";

const Count = z.coerce.number().int().positive();
const Seconds = z.coerce.number().positive();

/**
 * The flags every command that runs the agent takes (`coa run`, `coa serve`): which model, which
 * tools, which budgets and sampling. One definition, so both commands read them the same way. Light to
 * import (no tools, no agent loop): `coa eval`, `run` and `serve` declare their flags from it before
 * loading those (`withLaunchedModel`).
 */
export const AgentFlags = z.object({
  model: z.string().min(1),
  modelName: z.string().optional(),
  api: z.enum(["completions", "chat"]).optional(),
  textOnly: TextOnly,
  chatTemplate: ChatTemplate,
  requestTimeout: RequestTimeout,
  retries: Retries,
  profile: ProfileName,
  dialect: DialectName.default("coa"),
  systemPromptFile: z.string().min(1).optional(),
  corpus: z.string().optional(),
  search: SearchProvider,
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
    .option(
      "--api <api>",
      "completions | chat (continue_final_message); default: completions where the server has it",
    )
    .option(...TEXT_ONLY_OPTION)
    .option(...CHAT_TEMPLATE_OPTION)
    .option(...REQUEST_TIMEOUT_OPTION)
    .option(...RETRIES_OPTION);
}

/** The protocol profile and the tools behind it. */
export function addToolOptions(command: Command): Command {
  return command
    .option("-p, --profile <profile>", `tag set (${ProfileName.options.join("|")})`, "web")
    .option("-c, --corpus <jsonl>", "local corpus ({id,title,text,url?} per line) for search and crawl")
    .option(...SEARCH_OPTION)
    .option(...SEARCH_URL_OPTION)
    .option(...SEARCH_TOP_K_OPTION)
    .option("--offline", "crawl_page reads only corpus documents and allowed files, never the network")
    .option(
      "--unsafe-no-sandbox",
      "let the code tool run Python WITHOUT a sandbox when bubblewrap is missing",
    )
    .option("--tool-timeout <seconds>", "limit per tool call");
}

/**
 * `--dialect` and `--system-prompt-file`: the rules and the exact prompt a model was trained with.
 * Only commands that pass them on to the runtime (`agentPrompt`) take them.
 */
export function addDialectOptions(command: Command): Command {
  return command
    .option(
      "--dialect <name>",
      `protocol rules the model was trained on: ${Object.values(DIALECTS)
        .map((d) => `${d.name} (${d.about})`)
        .join("; ")}`,
      "coa",
    )
    .option(
      "--system-prompt-file <file>",
      "the exact system prompt the model was trained with, instead of ours",
    );
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

/**
 * Opens `--model` as the flags say; `apiKey` is the model server's bearer key, `notice` hears each
 * fallback found in the server (text mode, chat route, no chat template), `launched` is the engine
 * already starting for it (`withLaunchedModel`).
 */
export function openAgentModel(
  flags: AgentFlags,
  apiKey: string | undefined,
  signal?: AbortSignal,
  notice?: (line: string) => void,
  launched?: EngineLaunch,
) {
  return openModel(flags.model, {
    launched,
    modelName: flags.modelName,
    api: flags.api,
    apiKey,
    textOnly: flags.textOnly,
    chatTemplate: flags.chatTemplate,
    onNotice: notice,
    ...requestOptions(flags),
    signal,
  });
}

/**
 * `--dialect` and `--system-prompt-file` as runAgent takes them. The file's text is trimmed, as AFM's
 * own code trims its prompts: a file's final newline is not part of the prompt.
 */
export async function agentPrompt(
  flags: Pick<AgentFlags, "dialect" | "systemPromptFile">,
): Promise<Pick<RunOptions, "dialect" | "systemPrompt">> {
  const systemPrompt = flags.systemPromptFile
    ? (await readFile(flags.systemPromptFile, "utf8")).trim()
    : undefined;
  return { dialect: flags.dialect, ...(systemPrompt === undefined ? {} : { systemPrompt }) };
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
