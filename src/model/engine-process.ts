import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import path from "node:path";
import { createInterface } from "node:readline";

/** The one line the engine prints on stdout once it listens (engine/coa_engine/__main__.py). Checked
 * by hand, not with zod: this module starts the engine before `coa` has loaded zod (`./launch/`). */
interface Listening {
  event: "listening";
  url: string;
  port: number;
}

function isListening(value: unknown): value is Listening {
  const v = value as Partial<Listening> | null;
  return v?.event === "listening" && typeof v.url === "string" && Number.isInteger(v.port);
}

export interface EngineProcessOptions {
  python: string;
  args: string[];
  /** PYTHONPATH entry holding coa_engine. */
  root: string;
  /** Receives every log line the engine writes. */
  onLog: (line: string) => void;
  startTimeoutMs: number;
  /** Ends the start: the process is killed and `start` rejects, unless it already listens. */
  signal?: AbortSignal;
}

/**
 * The engine's `GLIBC_TUNABLES`: the environment's, with glibc's malloc asked for transparent huge
 * pages (`glibc.malloc.hugetlb=1`, glibc 2.35+; others ignore it) unless it names that tunable itself
 * or `COA_ENGINE_MALLOC=glibc` asks for glibc's defaults. glibc reads tunables only when a process
 * starts, so the engine cannot set this one itself as it sets its other malloc settings
 * (engine/coa_engine/allocator.py). A first touch of a 4 KiB page costs a fault, and on this project's
 * virtual machines the faults of a young engine's growing heap (key-value growths, prefix-cache copies)
 * cost more than the arithmetic; a huge page faults once per 2 MiB (docs/engine.md, "Huge pages, an
 * indexed prefix cache, random numbers in blocks").
 */
export function engineGlibcTunables(env: NodeJS.ProcessEnv): string | undefined {
  const given = env.GLIBC_TUNABLES || undefined;
  if (
    env.COA_ENGINE_MALLOC === "glibc" ||
    given?.split(":").some((t) => t.startsWith("glibc.malloc.hugetlb="))
  )
    return given;
  return [given, "glibc.malloc.hugetlb=1"].filter(Boolean).join(":");
}

/**
 * One engine child process: started, waited for until it listens, watched, and stopped. It is never
 * restarted: once it dies, `failure` says why and every later use should fail with it. The child
 * also exits by itself when our end of its stdin closes, so even a killed parent leaves no orphan.
 */
export class EngineProcess {
  private exitMessage: string | null = null;
  /** Set once this side asks the process to end (stop, kill, a shutdown signal): its exit is no crash. */
  private ended = false;
  private readonly recentLog: string[] = [];
  private readonly exited: Promise<void>;

  private constructor(
    private readonly child: ChildProcessWithoutNullStreams,
    private readonly onLog: (line: string) => void,
  ) {
    createInterface({ input: child.stderr }).on("line", (line) => {
      this.recentLog.push(line);
      if (this.recentLog.length > 30) this.recentLog.shift();
      this.onLog(line);
    });
    this.exited = new Promise((resolve) => {
      const gone = (message: string) => {
        this.exitMessage ??= message;
        live.delete(this);
        if (live.size === 0) unwatchSignals();
        resolve();
      };
      child.on("exit", (code, signal) =>
        gone(`engine process ${child.pid} exited (${signal ? `signal ${signal}` : `code ${code}`})`),
      );
      // A failed spawn (no such interpreter) may never emit "exit".
      child.on("error", (err) => gone(`could not run ${child.spawnfile}: ${err.message}`));
    });
    live.add(this);
    watchSignals();
  }

  static async start(options: EngineProcessOptions): Promise<{ process: EngineProcess; url: string }> {
    const tunables = engineGlibcTunables(process.env);
    const env = {
      ...process.env,
      PYTHONPATH: [options.root, process.env.PYTHONPATH].filter(Boolean).join(path.delimiter),
      PYTHONUNBUFFERED: "1",
      ...(tunables ? { GLIBC_TUNABLES: tunables } : {}),
    };
    const child = spawn(options.python, ["-m", "coa_engine", ...options.args, "--exit-with-stdin"], {
      env,
      stdio: ["pipe", "pipe", "pipe"],
    });
    const proc = new EngineProcess(child, options.onLog);
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => {
        proc.kill();
        reject(proc.error(`the engine did not start listening within ${options.startTimeoutMs} ms`));
      }, options.startTimeoutMs);
      // Rejects once the killed process is gone, as every failed start does (below).
      let cancelled = false;
      const cancel = () => {
        cancelled = true;
        proc.kill();
      };
      options.signal?.addEventListener("abort", cancel, { once: true });
      const settled = () => {
        clearTimeout(timer);
        options.signal?.removeEventListener("abort", cancel);
      };
      const lines = createInterface({ input: child.stdout });
      lines.on("line", (line) => {
        const ready = safeJson(line);
        if (isListening(ready)) {
          settled();
          resolve(ready.url);
        } else options.onLog(line);
      });
      proc.exited.then(() => {
        settled();
        reject(
          cancelled
            ? new Error("the engine's start was cancelled")
            : proc.error("the engine exited before it was ready"),
        );
      });
    });
    return { process: proc, url };
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Why the process is gone, or null while it runs. */
  get failure(): string | null {
    return this.exitMessage;
  }

  /** Why the process died without being asked to (a crash, the OOM killer), or null. */
  get crash(): string | null {
    return this.ended ? null : this.exitMessage;
  }

  /** An error carrying the last lines of the engine's log, where Python tracebacks end up. */
  error(message: string): Error {
    const tail = this.recentLog.slice(-15).join("\n");
    return new Error(
      `${message}${this.exitMessage ? `: ${this.exitMessage}` : ""}${tail ? `\n${tail}` : ""}`,
    );
  }

  /** Asks the engine to exit (closing its stdin), then kills it if it has not within `graceMs`. */
  async stop(graceMs = 5000): Promise<void> {
    if (this.exitMessage) return;
    this.ended = true;
    this.child.stdin.end();
    const timer = setTimeout(() => this.kill(), graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  /** Resolves true once the process has exited, false if it still runs after `ms`. */
  async exitsWithin(ms: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), ms);
    });
    const result = await Promise.race([this.exited.then(() => true), timeout]);
    clearTimeout(timer);
    return result;
  }

  kill(): void {
    this.ended = true;
    // A child whose spawn failed has no pid, and Node's `kill` then signals pid 0: this process's whole
    // group (a cancelled start of a missing interpreter killed the shell and test runner around coa).
    if (!this.exitMessage && this.child.pid !== undefined) this.child.kill("SIGKILL");
  }
}

const live = new Set<EngineProcess>();

function killAll(): void {
  for (const p of live) p.kill();
}

function onSignal(signal: NodeJS.Signals): void {
  killAll();
  // Keep the default outcome (the process ends) unless someone else also listens for the signal.
  if (process.listenerCount(signal) === 1) {
    unwatchSignals();
    process.kill(process.pid, signal);
  }
}

let watching = false;

function watchSignals(): void {
  if (watching) return;
  watching = true;
  process.on("exit", killAll);
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
}

function unwatchSignals(): void {
  if (!watching) return;
  watching = false;
  process.off("exit", killAll);
  process.off("SIGINT", onSignal);
  process.off("SIGTERM", onSignal);
}

function safeJson(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return null;
  }
}
