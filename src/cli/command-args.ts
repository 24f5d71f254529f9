import type { z } from "zod";
import { flagName } from "./flags.js";

/** A command's flags as typed values: what its schema yields, each optional (unset: the command's default). */
export type FlagValues<S extends z.ZodType> = { [K in keyof z.output<S>]?: z.output<S>[K] };

/**
 * A `coa` command to run as a child process: its subcommand path (`["train", "sft"]`), the flag
 * schema the command itself parses with, typed flag values and positional arguments. Typing the
 * values by the schema makes a renamed flag a compile error here rather than a failure mid-run.
 */
export interface CoaCommand<S extends z.ZodType = z.ZodType> {
  path: readonly string[];
  schema: S;
  flags: FlagValues<S>;
  positional: readonly string[];
}

export const coaCommand = <S extends z.ZodType>(
  path: readonly string[],
  schema: S,
  flags: NoInfer<FlagValues<S>>,
  positional: readonly string[] = [],
): CoaCommand<S> => ({ path, schema, flags, positional });

/**
 * The argv of a command, flags in the order of their keys: `maxTurns: 8` is `--max-turns 8`,
 * `true` a bare flag, `false` and `undefined` left out (the command's default), a list one flag
 * followed by its values.
 */
export function commandArgs(command: CoaCommand): string[] {
  const flags = Object.entries(command.flags).flatMap(([key, value]) => {
    if (value === undefined || value === false) return [];
    const flag = flagName(key);
    if (value === true) return [flag];
    return [flag, ...(Array.isArray(value) ? value : [value]).map(String)];
  });
  return [...command.path, ...command.positional, ...flags];
}
