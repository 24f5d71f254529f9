import { dirname, join } from "node:path";
import type { Command } from "commander";
import pc from "picocolors";
import { z } from "zod";
import { saveTokenizerOf } from "../../model/index.js";
import { AgentRunner, startServe, TrajectoryStore } from "../../serve/index.js";
import {
  AgentFlags,
  addDialectOptions,
  addEpisodeOptions,
  addModelOptions,
  addToolOptions,
  agentBudget,
  agentPrompt,
  agentSampling,
  openAgentModel,
  toolTimeoutMs,
} from "../agent-flags.js";
import { openAgentTools } from "../agent-tools.js";
import { modelApiKey, parseFlags } from "../flags.js";

export const ServeFlags = AgentFlags.extend({
  host: z.string().min(1),
  port: z.coerce.number().int().min(0).max(65_535),
  apiKey: z.string().min(1).optional(),
  modelApiKey: z.string().optional(),
  concurrency: z.coerce.number().int().positive(),
  log: z.string().min(1),
});
export type ServeFlags = z.infer<typeof ServeFlags>;

const EXAMPLES = `
Examples:
  coa serve --model engine:hf:Qwen/Qwen2.5-0.5B-Instruct --corpus world/corpus.jsonl
  coa serve --model http://127.0.0.1:8000/v1 --profile all --port 8080 --concurrency 8
  coa serve --model http://127.0.0.1:8000/v1 --profile code --dialect afm-code --system-prompt-file afm-code.txt
  COA_SERVE_API_KEY=secret coa serve --model engine --host 0.0.0.0

  curl http://127.0.0.1:8080/v1/chat/completions -H 'content-type: application/json' \\
    -d '{"model":"<GET /v1/models>","messages":[{"role":"user","content":"Who founded Veltmoor?"}]}'

Routes: POST /v1/chat/completions (stream: true streams the steps in delta.coa_step), GET /v1/models,
GET /v1/trajectories/<response id>. Request fields max_tokens, temperature, top_p and seed override the
flags of the same meaning for that request. See docs/serve.md.`;

/** `coa serve`: the whole agent (model, tools, runtime loop) behind OpenAI's chat-completions API. */
export function register(program: Command): void {
  const command = program
    .command("serve")
    .description(
      "serve the agent (model + tools + runtime) as an OpenAI-compatible chat-completions endpoint",
    );
  addModelOptions(command).option(
    "--model-api-key <key>",
    "bearer key for the model server (default: $COA_API_KEY, then $OPENAI_API_KEY)",
  );
  addToolOptions(command);
  addDialectOptions(command);
  addEpisodeOptions(command, "context limit of an episode; a request's max_tokens overrides it")
    .option("--host <addr>", "address to bind (loopback by default: only this machine can call)", "127.0.0.1")
    .option("--port <n>", "port to listen on (0 picks a free one)", "8080")
    .option("--api-key <key>", "key clients must send as Authorization: Bearer (default: $COA_SERVE_API_KEY)")
    .option("--concurrency <n>", "episodes run at once; more requests wait", "4")
    .option(
      "--log <file>",
      "trajectory JSONL every served episode is appended to",
      "runs/serve/trajectories.jsonl",
    )
    .addHelpText("after", EXAMPLES)
    .action(async (raw: Record<string, unknown>) => {
      const flags = parseFlags(ServeFlags, raw);
      const print = (line: string) => process.stdout.write(`${line}\n`);
      const { server, model } = await serveAgent(flags, print);
      const stop = () =>
        void server
          .close()
          .finally(() => model.close?.())
          .finally(() => process.exit(0));
      process.once("SIGINT", stop);
      process.once("SIGTERM", stop);
    });
}

/**
 * Opens the model and tools the flags name and serves the agent; the server speaks the model's
 * `--dialect` with its `--system-prompt-file`, as `coa run` and `coa eval` do.
 */
export async function serveAgent(flags: ServeFlags, print: (line: string) => void) {
  const model = await openAgentModel(flags, modelApiKey(flags.modelApiKey), undefined, (line) =>
    print(pc.yellow(line)),
  );
  const tools = await openAgentTools(flags, print);
  const store = await TrajectoryStore.open(flags.log);
  // The log's ids are only readable with their vocabulary, as for `coa run`.
  await saveTokenizerOf(model, join(dirname(flags.log), `${model.tokenizer}.tokenizer.json`));
  const agent = new AgentRunner({
    model,
    tools,
    profile: flags.profile,
    prompt: await agentPrompt(flags),
    budget: agentBudget(flags),
    sampling: agentSampling(flags),
    toolTimeoutMs: toolTimeoutMs(flags),
    concurrency: flags.concurrency,
    store,
  });
  const server = await startServe({
    agent,
    host: flags.host,
    port: flags.port,
    apiKey: flags.apiKey ?? process.env.COA_SERVE_API_KEY,
  });
  print(
    `coa serve: ${pc.bold(model.name)} (profile ${flags.profile}, dialect ${flags.dialect}, tools ${[...tools.keys()].join(", ") || "none"}) ` +
      `at ${server.url} · trajectories → ${flags.log} (Ctrl-C to stop)`,
  );
  return { server, model };
}
