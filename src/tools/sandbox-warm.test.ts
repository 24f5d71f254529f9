import { describe, expect, it } from "vitest";
import { type PythonRun, probeSandbox, runPython } from "./sandbox.js";

const limits = { wallMs: 3000, cpuSeconds: 2, memoryBytes: 512 * 1024 ** 2, outputBytes: 10_000 };
const warm = { warm: true };
const fresh = { warm: false };
/** Prints the start time of the sandbox's init: equal in two runs only when they shared a sandbox. */
const SANDBOX_ID = "print(open('/proc/1/stat').read().split()[21])";

// What a program sees and how it ends: the same in a warm sandbox as in a fresh one.
const PROGRAMS: [name: string, code: string, stdin?: string][] = [
  ["stdin", "import sys\nprint(sum(map(int, sys.stdin.read().split())))", "1 2 3\n"],
  ["input() at its end", "print(input())\nprint(input())", "one\n"],
  ["a traceback with its source lines", "def f(x):\n    return 1 / x\nprint('a')\nf(0)"],
  ["a chained exception", "try:\n    {}['k']\nexcept KeyError as e:\n    raise ValueError('v') from e"],
  ["a syntax error", "x = (1,\n"],
  ["an indentation error", "  print(1)"],
  ["sys.exit with a message", "import sys\nsys.exit('boom')"],
  ["exit codes", "import sys\nprint('out')\nsys.exit(300)"],
  ["KeyboardInterrupt", "raise KeyboardInterrupt"],
  ["a runaway recursion", "def r(n):\n    return r(n + 1)\nr(0)"],
  [
    "the interpreter's state",
    "import sys\nprint(sorted(globals()), sorted(sys.modules), sys.argv, sys.orig_argv, sys.path, __file__, type(__builtins__), __loader__.name)",
  ],
  [
    "its files and descriptors",
    "import os\nprint(os.getcwd(), os.listdir('/tmp'), os.listdir('/box'), sorted(os.listdir('/proc/self/fd')), open(__file__).read()[:9])",
  ],
  [
    "its limits",
    "import resource as r\nprint([r.getrlimit(getattr(r, 'RLIMIT_' + n)) for n in ('CPU', 'AS', 'FSIZE', 'NOFILE', 'CORE')])",
  ],
  [
    "at exit: __del__, atexit, threads",
    "import atexit, threading\nclass A:\n    def __del__(self):\n        print('del')\na = A()\natexit.register(print, 'atexit')\nt = threading.Thread(target=lambda: None)\nt.start()\nprint('end')",
  ],
  ["no processes", "import os\nos.fork()"],
  [
    "nothing that outlives it",
    "import ctypes\nprint(ctypes.CDLL(None, use_errno=True).msgget(0, 0o1600), ctypes.get_errno())",
  ],
  ["a memory limit", "x = bytearray(2 * 1024**3)"],
  ["a crash", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)"],
  // Sleeping after it, or whether the program exits before the launcher stops it is a race.
  ["the output limit", "import time\nprint('y' * 20000)\ntime.sleep(30)"],
  ["the CPU limit", "while True: pass"],
];

const outcome = (run: PythonRun) => ({
  stdout: run.stdout,
  stderr: run.stderr,
  exitCode: run.exitCode,
  killedBy: run.killedBy,
  timedOut: run.timedOut,
});

describe("warm sandboxes (single-process runs)", async () => {
  const probe = await probeSandbox(warm);

  it.runIf(probe.memory === "single-process")("are used where runs are kept to one process", () => {
    expect(probe.warm).toBe(true);
  });

  it.runIf(probe.warm)("give a program what a fresh sandbox gives it", async () => {
    // A wall limit far above the CPU limit: a loaded machine must not stop one of the two differently.
    const same = { ...limits, wallMs: 20_000, cpuSeconds: 1 };
    for (const [name, code, stdin] of PROGRAMS) {
      const a = await runPython({ code, stdin, limits: same, options: fresh });
      const b = await runPython({ code, stdin, limits: same, options: warm });
      expect(outcome(b), name).toEqual(outcome(a));
    }
  });

  it.runIf(probe.warm)("leave nothing of one run to the next in the same sandbox", async () => {
    const first = await runPython({
      code: [
        "import os",
        "open('/tmp/secret', 'w').write('s')",
        "open('/dev/shm/secret', 'w').write('s')",
        "os.makedirs('/tmp/d/e')",
        "os.chmod('/tmp/d', 0)",
        "os.chmod('/tmp', 0o500)",
        SANDBOX_ID,
      ].join("\n"),
      limits,
      options: warm,
    });
    const second = await runPython({
      code: `import os\nprint(os.listdir('/tmp'), os.listdir('/dev/shm'), oct(os.stat('/tmp').st_mode))\n${SANDBOX_ID}`,
      limits,
      options: warm,
    });
    expect(first.exitCode, first.stderr).toBe(0);
    const [listing, id] = second.stdout.trim().split("\n");
    expect(id).toBe(first.stdout.trim()); // the same sandbox, emptied
    expect(listing).toBe("[] ['.coa-program.py'] 0o40755");
  });

  it.runIf(probe.warm)("keep the resident interpreter out of a program's reach", async () => {
    const run = await runPython({
      code: [
        "import os",
        "for path in ('mem', 'environ', 'fd'):",
        "    try:",
        "        open(f'/proc/{os.getppid()}/{path}', 'rb').read() if path != 'fd' else os.listdir(f'/proc/{os.getppid()}/fd')",
        "        print(path, 'read')",
        "    except PermissionError:",
        "        print(path, 'refused')",
      ].join("\n"),
      limits,
      options: warm,
    });
    expect(run.stdout).toBe("mem refused\nenviron refused\nfd refused\n");
  });

  it.runIf(probe.warm)(
    "replace a sandbox its program took down, stopped or slowed, and one stopped at a limit",
    async () => {
      const ids = new Set<string>();
      const next = async () => {
        const run = await runPython({
          code: `import os\nprint(os.nice(0))\n${SANDBOX_ID}`,
          limits: { ...limits, wallMs: 20_000 },
          options: warm,
        });
        const [niceness, id] = run.stdout.trim().split("\n");
        expect(niceness, JSON.stringify(run)).toBe("0");
        expect(ids.has(id), "a new sandbox").toBe(false);
        ids.add(id);
      };
      const hostile = async (code: string, wallMs = limits.wallMs) => {
        const run = await runPython({
          code: `import os, signal\n${code}`,
          limits: { ...limits, wallMs },
          options: warm,
        });
        await next();
        return run;
      };
      await next();
      expect((await hostile("os.kill(os.getppid(), signal.SIGKILL)")).killedBy).toBe("signal:SIGKILL");
      expect((await hostile("os.kill(os.getppid(), signal.SIGSTOP)", 1000)).killedBy).toBe("wall_timeout");
      expect((await hostile("os.setpriority(os.PRIO_PROCESS, os.getppid(), 5)")).exitCode).toBe(0);
      expect((await hostile("while True: pass", 500)).killedBy).toBe("wall_timeout");
      expect((await hostile("print('z' * 20000)")).killedBy).toBe("output_limit");
    },
  );
});
