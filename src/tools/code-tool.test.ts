import { describe, expect, it } from "vitest";
import { createCodeTool, formatRun } from "./code-tool.js";
import { type PythonRun, SandboxLimits } from "./sandbox.js";
import { ToolArgsError } from "./types.js";

const ctx = { timeoutMs: 5000, maxChars: 2000 };
const tool = createCodeTool({ limits: { memoryBytes: 512 * 1024 ** 2 } });

describe("code tool arguments", () => {
  it("takes the fenced python block and an optional stdin block", () => {
    expect(tool.parseArgs("```python\nprint(input())\n```\n```stdin\n42\n```")).toEqual({
      code: "print(input())",
      stdin: "42",
    });
  });
  it("asks for a fenced block when there is none", () => {
    expect(() => tool.parseArgs("print(1)")).toThrow(ToolArgsError);
    expect(() => tool.parseArgs("```python\n\n```")).toThrow(/fenced block/);
  });
});

describe("code tool", () => {
  it("returns the program's output, feeding the stdin block with a final newline", async () => {
    const args = tool.parseArgs(
      "```python\nimport sys\nprint(sum(int(x) for x in sys.stdin))\n```\n```stdin\n1\n2\n3\n```",
    );
    const obs = await tool.run(args, ctx);
    expect(obs).toMatchObject({ ok: true, text: "6", truncated: false });
  });

  it("shows the traceback and exit code of a failing program", async () => {
    const obs = await tool.run({ code: "print('before')\nint('x')" }, ctx);
    expect(obs.ok).toBe(false);
    expect(obs.error).toBe("exit_code");
    expect(obs.text).toMatch(
      /^before\nstderr:\nTraceback[\s\S]*ValueError: invalid literal[\s\S]*\n\[exit code 1\]$/,
    );
  });

  it("names the limit that stopped a program", async () => {
    const loop = await tool.run({ code: "print('partial')\nwhile True: pass" }, { ...ctx, timeoutMs: 800 });
    expect(loop).toMatchObject({ ok: false, error: "timeout" });
    // What was printed before the kill reaches the model with the cause.
    expect(loop.text).toBe("partial\n[killed: time limit of 0.55 s reached]");
    const memory = await tool.run({ code: "x = ' ' * (8 * 1024 ** 3)" }, ctx);
    expect(memory).toMatchObject({ ok: false, error: "memory_limit" });
    expect(memory.text).toMatch(/MemoryError\n\[stopped: memory limit of 512 MiB reached\]$/);
  });

  it("keeps long output within maxChars, with a truncation marker", async () => {
    const obs = await tool.run({ code: "for i in range(10000): print(i)" }, { ...ctx, maxChars: 300 });
    expect(obs.ok).toBe(true);
    expect(obs.truncated).toBe(true);
    expect(obs.text.length).toBeLessThanOrEqual(300);
    expect(obs.text).toMatch(/^0\n1\n2\n[\s\S]*…\[truncated \d+ chars\]$/);
  });

  it("refuses with a clear observation when the sandbox is unavailable", async () => {
    const refusing = createCodeTool({ sandbox: { bwrap: "/nonexistent/bwrap" } });
    const obs = await refusing.run({ code: "print(1)" }, ctx);
    expect(obs).toMatchObject({ ok: false, error: "sandbox_refused" });
    expect(obs.text).toMatch(/^Python sandbox unavailable: cannot run \/nonexistent\/bwrap/);
  });

  it("checks its sandbox ahead of the first call when asked to prepare", async () => {
    await expect(tool.prepare?.()).resolves.toBeUndefined();
    expect(await tool.run({ code: "print(2)" }, ctx)).toMatchObject({ ok: true, text: "2" });
    // A sandbox that cannot run fails the preparation, and its first call still says why.
    const refusing = createCodeTool({ sandbox: { bwrap: "/nonexistent/bwrap" } });
    await expect(refusing.prepare?.()).rejects.toThrow(/cannot run \/nonexistent\/bwrap/);
    expect(await refusing.run({ code: "print(1)" }, ctx)).toMatchObject({
      ok: false,
      error: "sandbox_refused",
    });
  });
});

describe("formatRun", () => {
  const limits = SandboxLimits.parse({});
  const run = (over: Partial<PythonRun>): PythonRun => ({
    stdout: "",
    stderr: "",
    exitCode: 0,
    timedOut: false,
    killedBy: null,
    elapsedMs: 1,
    sandboxed: true,
    ...over,
  });
  it("says when a clean run printed nothing, and names signals and cut output", () => {
    expect(formatRun(run({}), limits)).toEqual({ ok: true, text: "(no output)" });
    expect(formatRun(run({ exitCode: null, killedBy: "signal:SIGSEGV" }), limits)).toEqual({
      ok: false,
      error: "signal:SIGSEGV",
      text: "[killed by signal SIGSEGV]",
    });
    expect(formatRun(run({ stdout: "x…", exitCode: null, killedBy: "output_limit" }), limits).text).toBe(
      `x…\n[killed: output limit of ${limits.outputBytes} bytes reached]`,
    );
  });
});
