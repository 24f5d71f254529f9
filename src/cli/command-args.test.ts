import { expect, it } from "vitest";
import { z } from "zod";
import { coaCommand, commandArgs } from "./command-args.js";

const Flags = z.object({
  out: z.string(),
  maxTurns: z.coerce.number().int().optional(),
  unsafeNoSandbox: z.boolean().default(false),
  compareTraces: z.array(z.string()).optional(),
});

it("turns typed flags into a command's arguments, in the order the flags are given", () => {
  const eval_ = coaCommand(["eval"], Flags, {
    maxTurns: 8,
    unsafeNoSandbox: true,
    compareTraces: ["teacher=runs/teach", "runs/team"],
    out: "runs/eval",
  });
  expect(commandArgs(eval_)).toEqual([
    "eval",
    "--max-turns",
    "8",
    "--unsafe-no-sandbox",
    "--compare-traces",
    "teacher=runs/teach",
    "runs/team",
    "--out",
    "runs/eval",
  ]);
  // Unset and false flags are left to the command's defaults; positional arguments follow the path.
  const imported = coaCommand(["import"], Flags, { out: "o", maxTurns: undefined, unsafeNoSandbox: false }, [
    "f",
  ]);
  expect(commandArgs(imported)).toEqual(["import", "f", "--out", "o"]);
});

it("refuses, at compile time, a flag the command's schema does not have", () => {
  // @ts-expect-error `maxTurn` is not a flag of this schema
  const misspelled = coaCommand(["eval"], Flags, { out: "o", maxTurn: 8 });
  expect(commandArgs(misspelled)).toContain("--max-turn");
});
