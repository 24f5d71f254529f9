import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  enforcedLimits,
  probeSandbox,
  runPython,
  SandboxLimits,
  SandboxUnavailableError,
  seccompProgram,
} from "./sandbox.js";

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

  it("holds no descriptor of coa's process but its stdio", async () => {
    // Under vitest this process has an IPC channel to its runner: it must not reach the program.
    const run = await runPython({
      code: "import os\nprint(sorted(map(int, os.listdir('/proc/self/fd'))))",
      limits,
    });
    // 3: the listing's own directory.
    expect(run.stdout).toBe("[0, 1, 2, 3]\n");
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

  it("caps every writable mount and keeps the root, /usr and /dev read-only", async () => {
    // Each target gets up to 64 MiB in 1 MiB writes; the program prints what was written and why it stopped.
    const code = [
      "import errno, os",
      "def fill(path, mib, files=1):",
      "    done = 0",
      "    try:",
      "        for n in range(files):",
      "            with open(f'{path}{n}', 'wb') as f:",
      "                for _ in range(mib // files):",
      "                    f.write(b'x' * 2**20); f.flush(); done += 1",
      "    except OSError as e:",
      "        return f'{done} {errno.errorcode[e.errno]}'",
      "    return f'{done} ok'",
      "for path in ['/dev/shm/', '/', '/usr/', '/dev/', '/box/', '/etc/']:",
      "    print(path, fill(path + 'f', 64))",
      "print('/tmp', fill('/tmp/f', 64, files=16))",
    ].join("\n");
    const run = await runPython({ code, limits: { ...limits, fileBytes: 8 * 1024 ** 2 } });
    expect(run.exitCode, run.stderr).toBe(0);
    const result = Object.fromEntries(
      run.stdout
        .trim()
        .split("\n")
        .map((l) => l.split(" ", 2)),
    );
    const stopped = (path: string) => run.stdout.match(new RegExp(`^${path} (\\d+) (\\w+)$`, "m"));
    // /dev/shm: a 1 MiB tmpfs (or read-only without tmpfs sizes): never 64 MiB.
    const shm = stopped("/dev/shm/");
    expect(shm?.[2]).toMatch(/ENOSPC|EROFS|ENOENT/);
    expect(Number(shm?.[1])).toBeLessThanOrEqual(1);
    for (const path of ["/", "/usr/", "/dev/", "/box/", "/etc/"]) {
      expect(stopped(path)?.slice(1), path).toEqual(["0", "EROFS"]);
    }
    // /tmp: 8 MiB in all, although each 4 MiB file is within the file-size limit.
    const tmp = stopped("/tmp");
    expect(tmp?.[2]).toMatch(/ENOSPC|EROFS/);
    expect(Number(tmp?.[1])).toBeLessThanOrEqual(8);
    expect(Object.keys(result)).toHaveLength(7);
  });

  it("holds forked children to one memory budget for the whole run", async () => {
    // Four children each try to fill a block (touching every page); the parent counts those that held it.
    const program = (mib: number) =>
      [
        "import os, time",
        "held = []",
        "for i in range(4):",
        "    r, w = os.pipe()",
        "    try:",
        "        pid = os.fork()",
        "    except OSError:",
        "        os.close(r); os.close(w); continue",
        "    if pid == 0:",
        "        os.close(r)",
        "        try:",
        `            block = b'\\x01' * (${mib} * 2**20)`,
        "            os.write(w, b'1'); time.sleep(1)",
        "        except MemoryError:",
        "            os.write(w, b'0')",
        "        os._exit(0)",
        "    os.close(w); held.append(r)",
        "print(sum(os.read(r, 1) == b'1' for r in held))",
      ].join("\n");
    // 4 × 200 MiB under 256 MiB: at most one; 4 × 400 MiB under 1 GiB: at most two.
    for (const [budgetMiB, blockMiB, most] of [
      [256, 200, 1],
      [1024, 400, 2],
    ]) {
      const budget = budgetMiB * 1024 ** 2;
      const run = await runPython({ code: program(blockMiB), limits: { ...limits, memoryBytes: budget } });
      expect(run.stderr).not.toContain("Traceback");
      expect(Number(run.stdout.trim()), `${budgetMiB} MiB`).toBeLessThanOrEqual(most);
      const enforced = run.enforced;
      expect(enforced?.memoryBytes).toBe(budget);
      if (enforced?.memory === "per-process") {
        const total =
          enforced.processes * enforced.processMemoryBytes + enforced.tmpBytes + enforced.shmBytes;
        expect(total).toBeLessThanOrEqual(budget);
      }
    }
  });

  it("blocks memory that no rlimit counts: memfd_create and SysV shared memory", async () => {
    if (!seccompProgram()) return; // the filter exists for x86-64 and arm64 only
    const code = [
      "import ctypes, os",
      "try:",
      "    os.memfd_create('x'); print('memfd ok')",
      "except OSError as e:",
      "    print('memfd', e.errno)",
      "libc = ctypes.CDLL(None, use_errno=True)",
      "print('shmget', libc.shmget(0, 2**20, 0o1600), ctypes.get_errno())",
    ].join("\n");
    const run = await runPython({ code, limits });
    expect(run.stdout).toBe("memfd 1\nshmget -1 1\n");
  });

  it("without a cgroup, keeps the run to one process (threads allowed) that gets the whole budget", async () => {
    const probe = await probeSandbox({ cgroup: "off" });
    if (probe.memory !== "single-process") return; // no filter on this architecture: the split below applies
    const budget = 512 * 1024 ** 2;
    const code = [
      "import os, subprocess, threading",
      "for start in (os.fork, lambda: subprocess.run(['true'])):",
      "    try:",
      "        start(); print('started')",
      "    except OSError as e:",
      "        print('refused', e.errno)",
      "ts = [threading.Thread(target=lambda: None) for _ in range(8)]",
      "[t.start() for t in ts]; [t.join() for t in ts]; print('threads ok')",
      "block = b'x' * (300 * 2**20); print('300 MiB ok')",
      "more = b'x' * (300 * 2**20); print('600 MiB ok')",
    ].join("\n");
    const run = await runPython({
      code,
      limits: { ...limits, memoryBytes: budget },
      options: { cgroup: "off" },
    });
    expect(run.stdout).toBe("refused 1\nrefused 1\nthreads ok\n300 MiB ok\n");
    expect(run.killedBy).toBe("memory_limit");
    expect(run.enforced).toMatchObject({ memory: "single-process", memoryBytes: budget });
    const e = run.enforced!;
    expect(e.processMemoryBytes + e.tmpBytes + e.shmBytes).toBeLessThanOrEqual(budget);
  });

  it("says how the memory budget is enforced, and splits it where no filter can keep the run to one process", async () => {
    const probe = await probeSandbox();
    expect(["cgroup", "single-process", "per-process"]).toContain(probe.memory);
    const off = await probeSandbox({ cgroup: "off" });
    expect(off).toMatchObject({ memory: seccompProgram() ? "single-process" : "per-process", scope: [] });
    const run = await runPython({ code: "print(1)", limits, options: { cgroup: "off" } });
    expect(run.enforced).toMatchObject({ memory: off.memory, memoryBytes: limits.memoryBytes });

    const defaults = SandboxLimits.parse({});
    const split = enforcedLimits(defaults, { memory: "per-process", tmpfsSize: true });
    expect(split).toMatchObject({ processes: 3, tmpBytes: 16 * 1024 ** 2, shmBytes: 1024 ** 2 });
    expect(split.processes * split.processMemoryBytes + split.tmpBytes + split.shmBytes).toBeLessThanOrEqual(
      defaults.memoryBytes,
    );
    const single = enforcedLimits(defaults, { memory: "single-process", tmpfsSize: true });
    expect(single.processes).toBe(defaults.maxProcesses);
    expect(single.processMemoryBytes + single.tmpBytes + single.shmBytes).toBeLessThanOrEqual(
      defaults.memoryBytes,
    );
    expect(single.processMemoryBytes).toBeGreaterThan(defaults.memoryBytes - 20 * 1024 ** 2);
    const big = enforcedLimits(
      { ...defaults, memoryBytes: 64 * 1024 ** 3 },
      { memory: "per-process", tmpfsSize: true },
    );
    expect(big.processes).toBe(64);
    expect(enforcedLimits(defaults, { memory: "cgroup", tmpfsSize: true })).toMatchObject({
      processes: 64,
      processMemoryBytes: defaults.memoryBytes,
    });
    expect(() =>
      enforcedLimits(
        { ...defaults, memoryBytes: 32 * 1024 ** 2 },
        { memory: "per-process", tmpfsSize: true },
      ),
    ).toThrow(RangeError);
  });

  it("writes a filter only for the architectures it knows, longer when processes are refused", () => {
    expect(seccompProgram("ia32")).toBeNull();
    for (const arch of ["x64", "arm64"]) {
      const allow = seccompProgram(arch)!;
      const refuse = seccompProgram(arch, { processes: false })!;
      expect(allow.length % 8).toBe(0);
      expect(refuse.length).toBeGreaterThan(allow.length);
    }
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

  it("refuses, saying why, when its interpreter cannot start", async () => {
    const dir = await mkdtemp(join(tmpdir(), "coa-no-exec-"));
    try {
      const python = join(dir, "python3"); // there, but no program: not executable
      await writeFile(python, "not a program\n", { mode: 0o644 });
      await expect(probeSandbox({ python })).rejects.toThrow(
        new RegExp(`a test run of ${python} in bwrap .* could not start \\(.*EACCES`),
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
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
