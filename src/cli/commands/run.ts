// `coa run`'s flags and command. The episode itself is run-question.ts, imported when the command runs,
// after it has started the engine: this module loads no tools or agent loop.
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

/** The flags of `coa run`, checked at the edge. */
export const RunFlags = AgentFlags.extend({
  out: z.string().min(1),
  apiKey: z.string().optional(),
  taskId: z.string().optional(),
});
export type RunFlags = z.infer<typeof RunFlags>;

/** `coa run "<question>"`: one episode, steps printed as they complete, the record appended to JSONL. */
export function register(program: Command): void {
  const command = program
    .command("run")
    .description("answer one question with the agent: print the steps live, append the trajectory to JSONL")
    .argument("<question>", "the question to answer");
  addModelOptions(command).option(
    "--api-key <key>",
    "bearer key for the server (default: $COA_API_KEY, then $OPENAI_API_KEY)",
  );
  addToolOptions(command);
  addDialectOptions(command);
  addEpisodeOptions(command, "context limit: prompt + generated + observation tokens")
    .option("-o, --out <file>", "trajectory JSONL to append to", "runs/trajectories.jsonl")
    .option("--task-id <id>", "recorded as the trajectory's taskId")
    .action(async (question: string, raw: Record<string, unknown>) => {
      const flags = parseFlags(RunFlags, raw);
      // The agent loop and its tools load (~1 s through tsx) while the engine starts.
      const trajectory = await withLaunchedModel(flags.model, requestOptions(flags), async (launched) => {
        const { runQuestion } = await import("./run-question.js");
        return runQuestion(question, flags, (line) => process.stdout.write(`${line}\n`), launched);
      });
      if (trajectory.finishReason === "model_error") process.exitCode = 1;
    });
}
