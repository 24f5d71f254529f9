import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Command } from "commander";
import { afterEach, describe, expect, it, vi } from "vitest";
import { fullTrace, shortTrace } from "../../distill/testing/fixtures.js";
import { register } from "./distill.js";
import { validateFile } from "./validate.js";

async function coa(...args: string[]): Promise<string> {
  const program = new Command().exitOverride();
  register(program);
  const out: string[] = [];
  vi.spyOn(console, "log").mockImplementation((line: string) => out.push(line));
  vi.spyOn(process.stderr, "write").mockImplementation(() => true);
  await program.parseAsync(["node", "coa", ...args]);
  return out.join("\n");
}

async function traces(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), "coa-cli-distill-"));
  const lines = [
    fullTrace({ taskId: "a" }),
    shortTrace({ taskId: "b" }),
    shortTrace({ taskId: "c", reward: 0 }),
  ];
  await writeFile(path.join(dir, "traces.jsonl"), lines.map((l) => JSON.stringify(l)).join("\n"));
  return dir;
}

afterEach(() => vi.restoreAllMocks());

describe("coa distill", () => {
  it("prints the funnel and writes data that `coa validate` accepts", async () => {
    const dir = await traces();
    const out = path.join(dir, "data");
    const printed = await coa(
      "distill",
      "--traces",
      dir,
      "--out",
      out,
      "--format",
      "native,verl",
      "--max-tokens",
      "4096",
    );
    expect(printed).toMatch(/^stage\s+in\s+out\s+dropped$/m);
    expect(printed).toMatch(/^correctness\s+3\s+2\s+wrong_answer 1$/m);
    expect(printed).toContain("native.jsonl (2)");
    expect(printed).toContain("verl/train.parquet (3)");
    const problems: string[] = [];
    const summary = await validateFile(path.join(out, "native.jsonl"), undefined, (l) => problems.push(l));
    expect(problems).toEqual([]);
    expect(summary.records).toBe(2);
    const funnel = JSON.parse(await readFile(path.join(out, "funnel.json"), "utf8"));
    expect(funnel.config.length.maxTokens).toBe(4096);
  });

  it("takes thresholds from a config file, flags winning", async () => {
    const dir = await traces();
    const config = path.join(dir, "filters.json");
    await writeFile(config, JSON.stringify({ budget: { maxToolCalls: 2 }, length: { maxTokens: 100 } }));
    const printed = await coa(
      "distill",
      "--traces",
      dir,
      "--out",
      path.join(dir, "d"),
      "--config",
      config,
      "--max-tokens",
      "9000",
    );
    expect(printed).toMatch(/^budget\s+2\s+1\s+over_tool_budget 1$/m);
    expect(printed).toMatch(/^length\s+1\s+1$/m);
  });

  it("rejects bad flags and config fields with the name of what is wrong", async () => {
    const dir = await traces();
    const out = path.join(dir, "d");
    await expect(coa("distill", "--traces", dir, "--out", out, "--format", "native,csv")).rejects.toThrow(
      /--format: unknown format "csv"/,
    );
    await expect(coa("distill", "--traces", dir, "--out", out, "--max-tokens", "lots")).rejects.toThrow(
      /--max-tokens/,
    );
    const config = path.join(dir, "bad.json");
    await writeFile(config, JSON.stringify({ dedup: { treshold: 0.9 } }));
    await expect(coa("distill", "--traces", dir, "--out", out, "--config", config)).rejects.toThrow(
      /bad\.json: dedup/,
    );
  });
});
