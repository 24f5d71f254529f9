import { describe, expect, it } from "vitest";
import { probeSandbox, runPython, SandboxUnavailableError } from "./sandbox.js";

// Tight limits keep the hostile programs below quick; each must end with a clear cause.
const limits = { wallMs: 3000, cpuSeconds: 5, memoryBytes: 512 * 1024 ** 2, outputBytes: 10_000 };

describe("runPython in the bubblewrap sandbox", () => {
  it("runs ordinary Python with stdin", async () => {
    const code = [
      "import itertools, math, sys",
      "n = int(sys.stdin.readline())",
      "print(math.factorial(n), len(list(itertools.permutations(range(n)))))",
      "print(sum(map(int, sys.stdin.readline().split())))",
    ].join("\n");
    const run = await runPython({ code, stdin: "5\n1 2 3\n", limits });
    expect(run).toMatchObject({
      stdout: "120 120\n6\n",
      stderr: "",
      exitCode: 0,
      timedOut: false,
      killedBy: null,
      sandboxed: true,
    });
    expect(run.elapsedMs).toBeGreaterThan(0);
  });

  it("reports a failing program's traceback and exit code", async () => {
    const run = await runPython({ code: "raise SystemExit(3)" });
    expect(run.exitCode).toBe(3);
    const crash = await runPython({ code: "1/0" });
    expect(crash).toMatchObject({ exitCode: 1, killedBy: null });
    expect(crash.stderr).toContain('File "/box/main.py", line 1');
    expect(crash.stderr).toContain("ZeroDivisionError");
  });

  it("cannot read host secrets or the project tree", async () => {
    for (const path of ["/etc/shadow", "/work/main/package.json", `${process.cwd()}/package.json`, "/root"]) {
      const run = await runPython({
        code: `import os\nprint(os.listdir(${JSON.stringify(path)}) if os.path.isdir(${JSON.stringify(path)}) else open(${JSON.stringify(path)}).read())`,
        limits,
      });
      expect(run.exitCode, path).toBe(1);
      expect(run.stderr, path).toMatch(/FileNotFoundError|PermissionError/);
    }
    const listing = await runPython({
      code: "import os\nprint(sorted(os.listdir('/')), sorted(os.listdir('/etc')))",
      limits,
    });
    expect(listing.stdout).not.toMatch(/'(work|root|home)'/);
    expect(listing.stdout).toMatch(/\['alternatives', 'ld.so.cache', 'localtime'\]|\['ld.so.cache'/);
  });

  it("has no network", async () => {
    const run = await runPython({
      code: "import socket\ns = socket.create_connection(('1.1.1.1', 80), timeout=2)",
      limits,
    });
    expect(run.exitCode).toBe(1);
    expect(run.stderr).toMatch(/OSError|Network is unreachable/);
  });

  it("runs as an unprivileged user with a private, writable /tmp and a read-only system", async () => {
    const code = [
      "import os",
      "open('/tmp/scratch.txt', 'w').write('ok')",
      "print(open('/tmp/scratch.txt').read(), os.getuid() != 0)",
      "open('/usr/evil', 'w')",
    ].join("\n");
    const run = await runPython({ code, limits });
    expect(run.stdout).toBe("ok True\n");
    expect(run.stderr).toMatch(/Read-only file system|PermissionError/);
  });

  it("stops a fork bomb", async () => {
    const code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass";
    const run = await runPython({ code, limits: { ...limits, wallMs: 1000 } });
    expect(run).toMatchObject({ timedOut: true, killedBy: "wall_timeout", exitCode: null });
  });

  it("stops a program allocating 8 GiB", async () => {
    const run = await runPython({ code: "x = bytearray(8 * 1024 ** 3)\nprint(len(x))", limits });
    expect(run).toMatchObject({ stdout: "", exitCode: 1, killedBy: "memory_limit" });
    expect(run.stderr).toContain("MemoryError");
  });

  it("stops an endless loop at the wall timeout, and at the CPU limit when that comes first", async () => {
    const wall = await runPython({ code: "while True: pass", limits: { ...limits, wallMs: 500 } });
    expect(wall).toMatchObject({ timedOut: true, killedBy: "wall_timeout", exitCode: null });
    expect(wall.elapsedMs).toBeLessThan(2500);
    const cpu = await runPython({ code: "while True: pass", limits: { ...limits, cpuSeconds: 1 } });
    expect(cpu).toMatchObject({ timedOut: false, killedBy: "cpu_limit", exitCode: null });
  });

  it("keeps what was printed before a timeout kill or a crash", async () => {
    const loop = await runPython({
      code: "import sys\nprint('partial')\nprint('warn', file=sys.stderr)\nwhile True: pass",
      limits: { ...limits, wallMs: 500 },
    });
    expect(loop).toMatchObject({ stdout: "partial\n", stderr: "warn\n", killedBy: "wall_timeout" });
    // SIGSEGV skips Python's exit-time flush: only unbuffered output survives it.
    const crash = await runPython({
      code: "import os, signal\nfor i in range(3): print('line', i)\nos.kill(os.getpid(), signal.SIGSEGV)",
      limits,
    });
    expect(crash).toMatchObject({ stdout: "line 0\nline 1\nline 2\n", killedBy: "signal:SIGSEGV" });
  });

  it("caps output with a marker and stops the program", async () => {
    const run = await runPython({ code: "while True:\n    print('x' * 100)", limits });
    expect(run.killedBy).toBe("output_limit");
    expect(run.stdout).toMatch(/\n…\[output truncated at 10000 bytes\]$/);
    expect(run.stdout.length).toBeLessThan(10_100);
  });

  it("stops when the caller aborts", async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 200);
    const run = await runPython({ code: "import time\ntime.sleep(30)", limits, signal: controller.signal });
    expect(run.killedBy).toBe("aborted");
  });

  it("refuses to run without bubblewrap instead of running unsandboxed", async () => {
    const options = { bwrap: "/nonexistent/bwrap" };
    await expect(probeSandbox(options)).rejects.toThrow(SandboxUnavailableError);
    await expect(runPython({ code: "print(1)", options })).rejects.toThrow(
      /sandbox unavailable.*unsafeNoSandbox/s,
    );
  });

  it("names a missing interpreter and how to choose another", async () => {
    await expect(probeSandbox({ python: "/nonexistent/python3" })).rejects.toThrow(
      /no interpreter at \/nonexistent\/python3.*COA_SANDBOX_PYTHON/s,
    );
  });

  it("runs unsandboxed only when asked to, still under limits", async () => {
    const options = { bwrap: "/nonexistent/bwrap", unsafeNoSandbox: true };
    const run = await runPython({ code: "print(input())", stdin: "hi\n", options, limits });
    expect(run).toMatchObject({ stdout: "hi\n", exitCode: 0, sandboxed: false });
    const loop = await runPython({
      code: "print('partial')\nwhile True: pass",
      options,
      limits: { ...limits, wallMs: 500 },
    });
    expect(loop).toMatchObject({ stdout: "partial\n", killedBy: "wall_timeout" });
  });
});
