import type { Command } from "commander";

/** Each subcommand module exports one `register` that adds itself to the program. */
export type RegisterCommand = (program: Command) => void;

export const commands: RegisterCommand[] = [];
