// `coa eval`'s flags and command. The evaluation itself is eval-run.ts, imported when the command runs,
// after it has started the engine: this module loads no tools, tasks or runtime, only what the flags need.
import { stat } from "node:fs/promises";
import type { Command } from "commander";
import { z } from "zod";
import { ProfileName } from "../../protocol/index.js";
import { DEFAULT_SAMPLING } from "../../runtime/defaults/index.js";
import { AgentFlags, addDialectOptions } from "../agent-flags.js";
import {
  addWebToolOptions,
  CHAT_TEMPLATE_OPTION,
  ChatTemplate,
  parseFlags,
  REQUEST_TIMEOUT_OPTION,
  RETRIES_OPTION,
  RequestTimeout,
  Retries,
  requestOptions,
  SEARCH_TOP_K_OPTION,
  SearchTopK,
  TEXT_ONLY_OPTION,
  TextOnly,
  WebToolFlags,
} from "../flags.js";
import { withLaunchedModel } from "../launched-model.js";

const Count = z.coerce.number().int().positive();

/** The flags of `coa eval`, checked at the edge. */
export const EvalFlags = z.object({
  ...WebToolFlags.shape,
  model: z.string().min(1),
  modelName: z.string().optional(),
  api: z.enum(["completions", "chat"]).optional(),
  textOnly: TextOnly,
  chatTemplate: ChatTemplate,
  tasks: z.string().min(1),
  split: z.string().optional(),
  corpus: z.string().optional(),
  out: z.string().min(1),
  k: Count,
  limit: Count.optional(),
  profile: ProfileName,
  /** Episodes in flight; default `defaultConcurrency` of the model. */
  concurrency: Count.optional(),
  temperature: z.coerce.number().min(0),
  seed: z.coerce.number().int(),
  maxTurns: Count.optional(),
  maxTokens: Count.optional(),
  maxTokensPerTurn: Count.optional(),
  judge: z.string().optional(),
  requestTimeout: RequestTimeout,
  retries: Retries,
  unsafeNoSandbox: z.boolean().default(false),
  searchTopK: SearchTopK,
  dialect: AgentFlags.shape.dialect,
  systemPromptFile: AgentFlags.shape.systemPromptFile,
  compareTraces: z.array(z.string().min(1)).optional(),
});
export type EvalFlags = z.infer<typeof EvalFlags>;

export function register(program: Command): void {
  const command = addWebToolOptions(program.command("eval"))
    .description(
      "run a model through the runtime on a task set, k samples each: pass@1, avg@k, pass@k, best-of-k (overall and per task kind), copy accuracy on world tasks, token and tool costs (resumable)",
    )
    .requiredOption("--model <spec>", "http(s) base URL, or engine:<preset|checkpoint-dir>")
    .requiredOption("--tasks <path>", "task file (JSONL, verl parquet, …) or a world folder")
    .requiredOption("--out <dir>", "run folder: trajectories.jsonl and summary.json")
    .option("--split <name>", "split of a world folder", undefined)
    .option("--corpus <jsonl>", "corpus for search and crawl (default: the world's corpus.jsonl)")
    .option("--k <n>", "samples per task", "1")
    .option("--limit <n>", "first n tasks only")
    .option("--profile <name>", "tag set (web|mhqa|code|all)", "all")
    .option("--concurrency <n>", "episodes in flight (default: 32 on the embedded engine, 4 on a server)")
    .option("--temperature <t>", "sampling temperature", String(DEFAULT_SAMPLING.temperature))
    .option("--seed <n>", "base of the per-sample seeds", "0")
    .option("--max-turns <n>", "model calls per episode")
    .option("--max-tokens <n>", "context tokens per episode")
    .option(
      "--max-tokens-per-turn <n>",
      `tokens per model call (default ${DEFAULT_SAMPLING.maxTokensPerTurn})`,
    )
    .option("--model-name <name>", "model name on an HTTP server (default: the first it lists)")
    .option(
      "--api <kind>",
      "completions|chat for HTTP servers (default: completions where the server has it)",
    )
    .option(...TEXT_ONLY_OPTION)
    .option(...CHAT_TEMPLATE_OPTION)
    .option("--judge <spec>", "OpenAI-compatible model that judges web QA answers")
    .option(...REQUEST_TIMEOUT_OPTION)
    .option(...RETRIES_OPTION)
    .option(...SEARCH_TOP_K_OPTION)
    .option("--unsafe-no-sandbox", "let the code tool run Python without bubblewrap")
    .option(
      "--compare-traces <[name=]dir...>",
      "bill MAS traces (coa teach, coa import) beside this model on the tasks both ran: costs.md, costs.json",
    )
    .action(async (raw: Record<string, unknown>) => {
      const flags = parseFlags(EvalFlags, raw);
      // A world folder holds several splits; evaluation means its held-out test split.
      if (!flags.split && (await stat(flags.tasks).catch(() => null))?.isDirectory()) flags.split = "test";
      // The tools, tasks and evaluation load (~1 s through tsx) while the engine starts.
      await withLaunchedModel(flags.model, requestOptions(flags), async (launched) => {
        const { runEval } = await import("./eval-run.js");
        await runEval(flags, (line) => process.stdout.write(`${line}\n`), launched);
      });
    });
  addDialectOptions(command);
}
