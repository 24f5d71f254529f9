import { Command } from "commander";
import { registerCommands } from "./commands/index.js";

const program = new Command()
  .name("coa")
  .description(
    "Chain-of-Agents: distill a multi-agent system into one agent model, train it, run it, measure it.",
  )
  .showHelpAfterError()
  .showSuggestionAfterError();

registerCommands(program, process.argv[2])
  .then(() => program.parseAsync(process.argv))
  .catch((err: unknown) => {
    const message = err instanceof Error ? err.message : String(err);
    process.stderr.write(`coa: ${message}\n`);
    if (process.env.COA_DEBUG && err instanceof Error) process.stderr.write(`${err.stack}\n`);
    process.exitCode = 1;
  });
