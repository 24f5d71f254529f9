import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterEach, describe, expect, it, vi } from "vitest";
import { EngineLaunch } from "../model/index.js";
import { modelArgument, startEarlyLaunch, stopEarlyLaunch, takeEarlyLaunch } from "./early-launch.js";
import { withLaunchedModel } from "./launched-model.js";

const run = promisify(execFile);

describe("modelArgument", () => {
  it.each([
    [["--tasks", "t.jsonl", "--model", "engine:tiny"], "engine:tiny"],
    [["--model=engine:runs/sft", "--k", "2"], "engine:runs/sft"],
    [["--model", "engine:micro", "--model", "http://127.0.0.1:8000/v1"], "http://127.0.0.1:8000/v1"],
    [["what is 2+2?", "--model", "engine"], "engine"],
    [["--tasks", "t.jsonl"], undefined],
    [["--model", "engine:tiny", "--help"], undefined],
    [["-h", "--model", "engine:tiny"], undefined],
    [["--", "--model", "engine:tiny"], undefined],
  ])("reads %j as %s", (args, expected) => {
    expect(modelArgument(args)).toBe(expected);
  });
});

describe("the engine coa starts before its command loads", () => {
  afterEach(async () => {
    await stopEarlyLaunch();
    vi.unstubAllEnvs();
    vi.restoreAllMocks();
  });

  // An interpreter that does not exist: the launches fail at once, and no Python runs in these tests.
  const withoutPython = () => vi.stubEnv("COA_PYTHON", "/nonexistent/python3");

  it("is taken over by the command whose --model names it: one engine, not two", async () => {
    withoutPython();
    const start = vi.spyOn(EngineLaunch, "start");
    startEarlyLaunch(["--tasks", "t.jsonl", "--model", "engine:micro"]);
    expect(start).toHaveBeenCalledTimes(1);
    const claimed = await withLaunchedModel("engine:micro", { timeoutMs: 1000 }, async (launched) => {
      expect(launched?.options.timeoutMs).toBe(1000);
      return launched!.claim().catch((err: Error) => err.message);
    });
    expect(claimed).toMatch(/No Python with PyTorch found; tried \/nonexistent\/python3/);
    expect(start).toHaveBeenCalledTimes(1);
    expect(takeEarlyLaunch()).toBeUndefined();
  });

  it("is stopped where the command launches another, and starts nothing for a server or a malformed --model", async () => {
    withoutPython();
    const start = vi.spyOn(EngineLaunch, "start");
    const cancel = vi.spyOn(EngineLaunch.prototype, "cancel");
    startEarlyLaunch(["--model", "engine:micro"]);
    await withLaunchedModel("engine:tiny", {}, async (launched) => {
      expect(launched?.source).toEqual({ preset: "tiny" });
    });
    expect(cancel.mock.contexts.map((launch) => (launch as EngineLaunch).source)).toContainEqual({
      preset: "micro",
    });
    for (const spec of ["http://127.0.0.1:8000/v1", "gpt-4o"]) startEarlyLaunch(["--model", spec]);
    expect(takeEarlyLaunch()).toBeUndefined();
    expect(start.mock.calls.map(([source]) => source)).toEqual([{ preset: "micro" }, { preset: "tiny" }]);
  });

  it("starts from coa's arguments before the command's flags are checked, and is stopped when they fail", async () => {
    // An "interpreter" that records that it was started and never listens: the flags fail their check
    // before the command could have started an engine itself, and without the stop this child (and
    // the pipes to it) would keep node running.
    const dir = await mkdtemp(path.join(tmpdir(), "coa-early-"));
    try {
      const started = path.join(dir, "started");
      const python = path.join(dir, "python");
      await writeFile(python, `#!/bin/sh\necho "$@" > "${started}"\nexec sleep 60\n`, { mode: 0o755 });
      const main = fileURLToPath(new URL("./main.ts", import.meta.url));
      const args = ["eval", "--model", "engine:micro", "--tasks", "t.jsonl", "--out", "o", "--k", "0"];
      const failed = await run(process.execPath, ["--import", "tsx", main, ...args], {
        timeout: 60_000,
        env: { ...process.env, COA_PYTHON: python },
      }).catch((err: { code: number; stderr: string; killed: boolean }) => err);
      expect(failed).toMatchObject({ code: 1, killed: false });
      expect((failed as { stderr: string }).stderr).toMatch(/^coa: .*--k/m);
      expect(await readFile(started, "utf8")).toMatch(/^-m coa_engine --port 0 --preset micro /);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 90_000);
});
