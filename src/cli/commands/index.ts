import type { Command } from "commander";
import { register as compareCosts } from "./compare-costs.js";
import { register as demo } from "./demo.js";
import { register as distill } from "./distill.js";
import { register as engine } from "./engine.js";
import { register as evalCommand } from "./eval.js";
import { register as importCommand } from "./import.js";
import { register as indexCorpus } from "./index-corpus.js";
import { register as run } from "./run.js";
import { register as search } from "./search.js";
import { register as serve } from "./serve.js";
import { register as tasks } from "./tasks.js";
import { register as teach } from "./teach.js";
import { register as team } from "./team.js";
import { register as tools } from "./tools.js";
import { register as train } from "./train.js";
import { register as validate } from "./validate.js";
import { register as view } from "./view.js";
import { register as world } from "./world.js";

/** Each subcommand module exports one `register` that adds itself to the program. */
export type RegisterCommand = (program: Command) => void;

/** In pipeline order, which is the order `coa --help` lists them. */
export const commands: RegisterCommand[] = [
  demo,
  world,
  tasks,
  indexCorpus,
  search,
  run,
  serve,
  teach,
  team,
  importCommand,
  distill,
  train,
  evalCommand,
  compareCosts,
  engine,
  validate,
  view,
  tools,
];
