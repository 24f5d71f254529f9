import { describe, expect, it } from "vitest";
import { z } from "zod";
import { parseFlags } from "./flags.js";

const Flags = z.object({ maxTurns: z.coerce.number().int().positive(), out: z.string() });

describe("parseFlags", () => {
  it("returns the parsed flags", () => {
    expect(parseFlags(Flags, { maxTurns: "3", out: "runs" })).toEqual({ maxTurns: 3, out: "runs" });
  });

  it("names a bad flag as it is typed on the command line", () => {
    expect(() => parseFlags(Flags, { maxTurns: "0", out: "runs" })).toThrow(/^--max-turns: /);
  });
});
