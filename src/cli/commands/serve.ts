// `coa serve`'s flags and command. The server itself is serve-agent.ts, imported when the command runs,
// after it has started the engine: this module loads no tools, agent loop or server.
import type { Command } from "commander";
import { z } from "zod";
import {
  AgentFlags,
  addDialectOptions,
  addEpisodeOptions,
  addModelOptions,
  addToolOptions,
} from "../agent-flags.js";
import { parseFlags, requestOptions } from "../flags.js";
import { withLaunchedModel } from "../launched-model.js";

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
      // The agent loop, its tools and the server load (~1 s through tsx) while the engine starts.
      const { server, model } = await withLaunchedModel(
        flags.model,
        requestOptions(flags),
        async (launched) => {
          const { serveAgent } = await import("./serve-agent.js");
          return serveAgent(flags, print, launched);
        },
      );
      const stop = () =>
        void server
          .close()
          .finally(() => model.close?.())
          .finally(() => process.exit(0));
      process.once("SIGINT", stop);
      process.once("SIGTERM", stop);
    });
}
