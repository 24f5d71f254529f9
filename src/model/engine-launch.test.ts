import { describe, expect, it } from "vitest";
import { EngineLaunch, parseModelSpec } from "./engine-launch.js";

// No Python runs here: an interpreter that does not exist fails the start at once, which is all
// `adopt` needs (it decides from the options, and the taker sees the start's outcome either way).
const nowhere = { python: "/nonexistent/python3", onLog: () => {} };

describe("EngineLaunch.adopt", () => {
  it("takes a launch over for options that start the same process, once", async () => {
    const launch = EngineLaunch.start({ preset: "micro" }, nowhere);
    const taken = launch.adopt({ preset: "micro" }, { ...nowhere, timeoutMs: 5000, busyRetries: 2 });
    expect(taken?.options.timeoutMs).toBe(5000);
    expect(launch.adopt({ preset: "micro" }, nowhere)).toBeUndefined();
    await launch.cancel(); // the old handle no longer owns the process: nothing happens
    await expect(taken!.claim()).rejects.toThrow(/could not run \/nonexistent\/python3/);
  });

  it("leaves a launch whose process differs: another source, flag, log or interpreter", async () => {
    const launch = EngineLaunch.start({ preset: "micro" }, nowhere);
    for (const [source, options] of [
      [{ preset: "tiny" }, nowhere],
      [{ preset: "micro" }, { ...nowhere, maxBatch: 8 }],
      [{ preset: "micro" }, { ...nowhere, onLog: () => {} }],
      [{ preset: "micro" }, { ...nowhere, python: "/usr/bin/python3" }],
      [{ checkpoint: "micro" }, nowhere],
    ] as const)
      expect(launch.adopt(source, options)).toBeUndefined();
    await launch.cancel();
    await expect(launch.claim()).rejects.toThrow(/already opened/);
  });
});

describe("parseModelSpec", () => {
  it.each([
    ["http://127.0.0.1:8000/v1", { kind: "http", baseUrl: "http://127.0.0.1:8000/v1" }],
    ["https://api.example.com", { kind: "http", baseUrl: "https://api.example.com" }],
    ["engine", { kind: "engine", source: { preset: "micro" } }],
    ["engine:tiny", { kind: "engine", source: { preset: "tiny" } }],
    ["engine:hf:Qwen/Qwen2.5-0.5B", { kind: "engine", source: { hfModel: "Qwen/Qwen2.5-0.5B" } }],
    ["engine:runs/sft/ckpt", { kind: "engine", source: { checkpoint: "runs/sft/ckpt" } }],
    ["engine:ckpt", { kind: "engine", source: { checkpoint: "ckpt" } }],
    ["engine:smallish", { kind: "engine", source: { checkpoint: "smallish" } }],
  ])("reads %s", (spec, expected) => {
    expect(parseModelSpec(spec)).toEqual(expected);
  });

  it("rejects anything else with the accepted forms", () => {
    expect(() => parseModelSpec("gpt-4o")).toThrow(
      /--model must be an http\(s\) base URL, engine, engine:<preset>/,
    );
  });
});
