import { appendFile, mkdir } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { Command } from "commander";
import pc from "picocolors";
import { z } from "zod";
import {
  type ModelClient,
  openModel,
  parseModelSpec,
  saveTokenizerOf,
  unavailableModel,
} from "../../model/index.js";
import { ProfileName, type Step, Trajectory } from "../../protocol/index.js";
import { DEFAULT_BUDGET, type RunEvent, runAgent } from "../../runtime/index.js";
import { CorpusIndex, createToolset } from "../../tools/index.js";
import {
  parseFlags,
  REQUEST_TIMEOUT_OPTION,
  RETRIES_OPTION,
  RequestTimeout,
  Retries,
  requestOptions,
  SEARCH_TOP_K_OPTION,
  SearchTopK,
} from "../flags.js";

const Count = z.coerce.number().int().positive();
const Seconds = z.coerce.number().positive();

/** The flags of `coa run`, checked at the edge. */
const RunFlags = z.object({
  model: z.string().min(1),
  profile: ProfileName,
  corpus: z.string().optional(),
  search: z.enum(["local", "serper", "searxng"]),
  searchUrl: z.url().optional(),
  offline: z.boolean().default(false),
  unsafeNoSandbox: z.boolean().default(false),
  searchTopK: SearchTopK,
  out: z.string().min(1),
  modelName: z.string().optional(),
  api: z.enum(["completions", "chat"]),
  apiKey: z.string().optional(),
  textOnly: z.boolean().default(false),
  requestTimeout: RequestTimeout,
  retries: Retries,
  maxTurns: Count.optional(),
  maxTokens: Count.optional(),
  maxTime: Seconds.optional(),
  maxFormatErrors: z.coerce.number().int().nonnegative().optional(),
  maxTokensPerTurn: Count.optional(),
  temperature: z.coerce.number().min(0).optional(),
  topP: z.coerce.number().gt(0).max(1).optional(),
  seed: z.coerce.number().int().optional(),
  toolTimeout: Seconds.optional(),
  taskId: z.string().optional(),
});
type RunFlags = z.infer<typeof RunFlags>;

/** `coa run "<question>"`: one episode, steps printed as they complete, the record appended to JSONL. */
export function register(program: Command): void {
  program
    .command("run")
    .description("answer one question with the agent: print the steps live, append the trajectory to JSONL")
    .argument("<question>", "the question to answer")
    .requiredOption(
      "-m, --model <spec>",
      "OpenAI-compatible server base URL, or engine[:<preset>|hf:<model>|<checkpoint-dir>]",
    )
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
    .option("-o, --out <file>", "trajectory JSONL to append to", "runs/trajectories.jsonl")
    .option("--model-name <name>", "model name for the server (default: the first it lists)")
    .option("--api <api>", "completions | chat (continue_final_message)", "completions")
    .option("--api-key <key>", "bearer key for the server (default: $COA_API_KEY, then $OPENAI_API_KEY)")
    .option("--text-only", "the server takes and returns text only; ids come from the byte tokenizer")
    .option(...REQUEST_TIMEOUT_OPTION)
    .option(...RETRIES_OPTION)
    .option("--max-turns <n>", "model calls per episode")
    .option("--max-tokens <n>", "context limit: prompt + generated + observation tokens")
    .option(
      "--max-time <seconds>",
      "wall-time limit of the episode, every model-server request included (default 600)",
    )
    .option("--max-format-errors <n>", "format errors tolerated before giving up")
    .option("--max-tokens-per-turn <n>", "tokens per model call")
    .option("--temperature <t>", "sampling temperature")
    .option("--top-p <p>", "nucleus sampling")
    .option("--seed <n>", "sampling seed")
    .option("--tool-timeout <seconds>", "limit per tool call")
    .option("--task-id <id>", "recorded as the trajectory's taskId")
    .action(async (question: string, raw: Record<string, unknown>) => {
      const trajectory = await runQuestion(question, parseFlags(RunFlags, raw), (line) =>
        process.stdout.write(`${line}\n`),
      );
      if (trajectory.finishReason === "model_error") process.exitCode = 1;
    });
}

/** Runs one episode as `coa run` does, printing through `print`; returns the record it appended. */
export async function runQuestion(
  question: string,
  flags: RunFlags,
  print: (line: string) => void,
): Promise<Trajectory> {
  // For a server the episode's clock starts now: finding the model name (GET /v1/models) counts
  // against --max-time. Starting the embedded engine (a process, not a request) does not.
  const spec = parseModelSpec(flags.model); // a malformed --model is the user's error, not an episode's
  const startedAt = spec.kind === "http" ? performance.now() : undefined;
  const maxTimeMs = flags.maxTime === undefined ? DEFAULT_BUDGET.maxTimeMs : flags.maxTime * 1000;
  let model: ModelClient;
  try {
    model = await openModel(flags.model, {
      modelName: flags.modelName,
      api: flags.api,
      apiKey: flags.apiKey ?? process.env.COA_API_KEY ?? process.env.OPENAI_API_KEY,
      textOnly: flags.textOnly,
      ...requestOptions(flags),
      signal: AbortSignal.timeout(maxTimeMs),
    });
  } catch (err) {
    // Recorded like any episode whose model fails: model_error, or max_time once the time is spent.
    model = unavailableModel(flags.modelName ?? flags.model, err);
  }
  try {
    const tools = createToolset({
      profile: flags.profile,
      // Opened now, so a bad corpus fails before the model runs rather than inside a tool call.
      index: flags.corpus ? await openIndex(flags.corpus, print) : undefined,
      search: {
        provider: flags.search,
        baseUrl: flags.searchUrl,
        apiKey: flags.search === "serper" ? process.env.SERPER_API_KEY : undefined,
        topK: flags.searchTopK,
      },
      crawl: { offline: flags.offline },
      code: { unsafeNoSandbox: flags.unsafeNoSandbox },
    });
    print(
      pc.dim(
        `model ${model.name} · profile ${flags.profile} · tools ${[...tools.keys()].join(", ") || "none"}`,
      ),
    );
    const trajectory = await runAgent({
      model,
      tools,
      profile: flags.profile,
      question,
      taskId: flags.taskId,
      budget: {
        maxTurns: flags.maxTurns,
        maxTokens: flags.maxTokens,
        maxTimeMs,
        maxFormatErrors: flags.maxFormatErrors,
      },
      startedAt,
      sampling: {
        temperature: flags.temperature,
        topP: flags.topP,
        seed: flags.seed,
        maxTokensPerTurn: flags.maxTokensPerTurn,
      },
      toolTimeoutMs: flags.toolTimeout === undefined ? undefined : flags.toolTimeout * 1000,
      onEvent: (event) => {
        const line = formatEvent(event);
        if (line !== null) print(line);
      },
    });
    await mkdir(dirname(flags.out), { recursive: true });
    await appendFile(flags.out, `${JSON.stringify(Trajectory.parse(trajectory))}\n`);
    // Named by the vocabulary: models of several vocabularies may append to one file.
    await saveTokenizerOf(model, join(dirname(flags.out), `${trajectory.tokenizer}.tokenizer.json`));
    print(pc.dim(`trajectory appended to ${flags.out}`));
    return trajectory;
  } finally {
    await model.close?.();
  }
}

async function openIndex(corpus: string, print: (line: string) => void): Promise<CorpusIndex> {
  const { index, reused } = await CorpusIndex.open(corpus);
  if (!reused) print(pc.dim(`indexed ${corpus}`));
  return index;
}

const LABEL_WIDTH = 18;
const MAX_SHOWN = 600;

const STEP_COLORS: Record<Step["type"], (s: string) => string> = {
  think: pc.gray,
  plan: pc.cyan,
  reflection: pc.blue,
  suggested_answer: pc.green,
  double_check: pc.magenta,
  answer: (s) => pc.bold(pc.green(s)),
  tool_call: pc.yellow,
  observation: pc.dim,
};

/** One printable line (possibly multi-line) per event worth showing; null for the rest. */
export function formatEvent(event: RunEvent): string | null {
  switch (event.type) {
    case "step": {
      const { step } = event;
      const label = step.type === "tool_call" ? step.tool : step.type;
      const text = step.type === "tool_call" ? step.args : step.text;
      const score = step.type === "double_check" ? ` [score ${step.score ?? "?"}]` : "";
      return `${STEP_COLORS[step.type](label.padEnd(LABEL_WIDTH))}${indent(clip(text))}${score}`;
    }
    case "tool_end": {
      const { observation: o } = event;
      const what = event.duplicate
        ? "repeat, answered from memory"
        : o.ok
          ? "ok"
          : `failed: ${o.error ?? "error"}`;
      const paint = o.ok ? pc.dim : pc.red;
      return paint(`${"".padEnd(LABEL_WIDTH)}(${event.tool} ${what}, ${Math.round(o.elapsedMs)} ms)`);
    }
    case "format_error":
      return pc.red(
        `${"format error".padEnd(LABEL_WIDTH)}${event.errors.map((e) => e.message).join("; ")} (${event.total} so far)`,
      );
    case "finish": {
      const { stats } = event.trajectory;
      const tools = Object.entries(stats.toolCalls)
        .map(([tool, n]) => `${tool}×${n}`)
        .join(" ");
      const error =
        typeof event.trajectory.meta.error === "string" ? `\n${pc.red(event.trajectory.meta.error)}` : "";
      return (
        [
          "",
          `${pc.bold("final answer".padEnd(LABEL_WIDTH))}${event.answer === null ? pc.red("(none)") : pc.bold(event.answer)}`,
          pc.dim(
            `finish ${event.finishReason} · ${stats.turns} turns · tools ${tools || "none"} · ` +
              `${stats.modelTokens} model + ${stats.toolTokens} tool tokens · ${(stats.wallMs / 1000).toFixed(1)} s`,
          ),
        ].join("\n") + error
      );
    }
    default:
      return null;
  }
}

const clip = (text: string) => (text.length > MAX_SHOWN ? `${text.slice(0, MAX_SHOWN)}…` : text);
const indent = (text: string) => text.replaceAll("\n", `\n${"".padEnd(LABEL_WIDTH)}`);
