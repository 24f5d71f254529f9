import { describe, expect, it } from "vitest";
import { z } from "zod";
import { parseFlags, RequestTimeout, Retries, requestOptions } from "./flags.js";

const Flags = z.object({ maxTurns: z.coerce.number().int().positive(), out: z.string() });

describe("parseFlags", () => {
  it("returns the parsed flags", () => {
    expect(parseFlags(Flags, { maxTurns: "3", out: "runs" })).toEqual({ maxTurns: 3, out: "runs" });
  });

  it("names a bad flag as it is typed on the command line", () => {
    expect(() => parseFlags(Flags, { maxTurns: "0", out: "runs" })).toThrow(/^--max-turns: /);
  });
});

describe("--request-timeout and --retries", () => {
  const Flags = z.object({ requestTimeout: RequestTimeout, retries: Retries });

  it("become openModel's timeoutMs and maxRetries, and only when given", () => {
    expect(requestOptions(parseFlags(Flags, { requestTimeout: "1.5", retries: "0" }))).toEqual({
      timeoutMs: 1_500,
      maxRetries: 0,
    });
    expect(requestOptions(parseFlags(Flags, {}))).toEqual({});
  });

  it("refuse a non-positive timeout and a negative or fractional retry count", () => {
    expect(() => parseFlags(Flags, { requestTimeout: "0" })).toThrow(/^--request-timeout: /);
    expect(() => parseFlags(Flags, { retries: "-1" })).toThrow(/^--retries: /);
    expect(() => parseFlags(Flags, { retries: "1.5" })).toThrow(/^--retries: /);
  });
});
