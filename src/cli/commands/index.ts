import type { Command } from "commander";

/** Each subcommand module exports one `register` that adds itself to the program. */
export type RegisterCommand = (program: Command) => void;

interface CommandModule {
  /** The top-level command its module registers. */
  name: string;
  load: () => Promise<{ register: RegisterCommand }>;
  /** Runs a `--model` through `withLaunchedModel`: `coa` starts that engine before loading the module. */
  startsEngine?: true;
}

/** In pipeline order, which is the order `coa --help` lists them. Loaded on demand: importing every
 * module (and the libraries behind them) took 2.6 s of each CLI start through tsx. */
export const commands: CommandModule[] = [
  { name: "demo", load: () => import("./demo.js") },
  { name: "world", load: () => import("./world.js") },
  { name: "tasks", load: () => import("./tasks.js") },
  { name: "index", load: () => import("./index-corpus.js") },
  { name: "search", load: () => import("./search.js") },
  { name: "run", load: () => import("./run.js"), startsEngine: true },
  { name: "serve", load: () => import("./serve.js"), startsEngine: true },
  { name: "teach", load: () => import("./teach.js") },
  { name: "team", load: () => import("./team.js") },
  { name: "import", load: () => import("./import.js") },
  { name: "distill", load: () => import("./distill.js") },
  { name: "train", load: () => import("./train.js") },
  { name: "eval", load: () => import("./eval.js"), startsEngine: true },
  { name: "compare-costs", load: () => import("./compare-costs.js") },
  { name: "engine", load: () => import("./engine.js") },
  { name: "validate", load: () => import("./validate.js") },
  { name: "view", load: () => import("./view.js") },
  { name: "tools", load: () => import("./tools.js") },
];

/** Registers the command `name` alone when one has that name, so that only its modules load; else
 * (no name, an option, `help`, a typo) every command, for the help listing and suggestions. */
export async function registerCommands(program: Command, name?: string): Promise<void> {
  const named = commands.find((c) => c.name === name);
  const modules = await Promise.all((named ? [named] : commands).map((c) => c.load()));
  for (const { register } of modules) register(program);
}
