import { Command } from "commander";
import { commands, registerCommands } from "./commands/index.js";
import { startEarlyLaunch, stopEarlyLaunch } from "./early-launch.js";

const program = new Command()
  .name("coa")
  .description(
    "Chain-of-Agents: distill a multi-agent system into one agent model, train it, run it, measure it.",
  )
  .showHelpAfterError()
  .showSuggestionAfterError();

const [name, ...args] = process.argv.slice(2);
if (commands.find((c) => c.name === name)?.startsEngine) startEarlyLaunch(args);

registerCommands(program, name)
  .then(() => program.parseAsync(process.argv))
  .catch((err: unknown) => {
    const message = err instanceof Error ? err.message : String(err);
    process.stderr.write(`coa: ${message}\n`);
    if (process.env.COA_DEBUG && err instanceof Error) process.stderr.write(`${err.stack}\n`);
    process.exitCode = 1;
  })
  .finally(stopEarlyLaunch);
