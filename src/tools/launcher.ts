import { type ChildProcess, spawn } from "node:child_process";
import type { Socket } from "node:net";
import { fileURLToPath } from "node:url";

/**
 * Programs started for coa by a small helper process (launcher.py) instead of by Node: Node forks its
 * whole address space to start a child, which on Linux costs time in proportion to the process (19–42
 * ms for an agent runtime of 250–850 MB on a 2-core VM, its event loop blocked all the while, and the
 * CPU spent again in the child), and an evaluation starts a sandbox for every code call. The helper
 * starts each one with posix_spawn, which copies nothing.
 */
export interface LaunchRequest {
  /** argv[0] is looked up in PATH as execvp does (unused with `sandbox`). */
  argv: string[];
  env: Record<string, string>;
  cwd?: string;
  /** What each of the child's descriptors reads (0: stdin) before its end; others are closed. */
  inputs: Record<number, string | Buffer>;
  /** stdout and stderr bytes kept together; past this the run is stopped (`killedBy: "output_limit"`). */
  outputBytes: number;
  /** The run's process group is killed this long after it started. */
  wallMs: number;
  signal?: AbortSignal;
  /** Run in a warm sandbox (launcher.py, zygote.py) instead of starting `argv`. */
  sandbox?: WarmSandbox;
}

/**
 * A warm sandbox: started once as `start` says (as a run is), then kept for further runs asking for
 * the same; its resident interpreter forks each program with `run` (its rlimits and seccomp filter),
 * given the run's descriptors 0-3. At most `idle` of them wait between runs. A launcher is sent each
 * `start` object once (~10 kB: the interpreter's source is in argv), then only a reference to it.
 */
export interface WarmSandbox {
  start: { argv: string[]; env: Record<string, string>; inputs: Record<number, string | Buffer> };
  idle: number;
  /** What the resident interpreter is told with the run's descriptors, in its own format. */
  run: string;
}

/** The warm sandbox ended before it took the run (bwrap or its interpreter failed): nothing ran. */
export const WARM_SANDBOX_FAILED = "EWARM";

export interface Launched {
  stdout: Buffer;
  stderr: Buffer;
  /** The stream whose output was cut at `outputBytes`. */
  truncated: "stdout" | "stderr" | null;
  killedBy: "wall_timeout" | "output_limit" | "aborted" | null;
  exitCode: number | null;
  /** The signal that ended the process, as a number. */
  signal: number | null;
}

/** launcher.py's answer: a finished run (its streams in base64), or why it could not start. */
type Reply =
  | ({ id: number; stdout: string; stderr: string } & Omit<Launched, "stdout" | "stderr">)
  | { id: number; error: string; code: string };

/** Descriptors' inputs as launcher.py reads them. */
const base64Inputs = (inputs: LaunchRequest["inputs"]): Record<string, string> =>
  Object.fromEntries(Object.entries(inputs).map(([fd, data]) => [fd, Buffer.from(data).toString("base64")]));

const SCRIPT = fileURLToPath(new URL("./launcher.py", import.meta.url));

class Launcher {
  private readonly child: ChildProcess;
  private readonly waiting = new Map<number, { resolve: (r: Reply) => void; reject: (e: Error) => void }>();
  private nextId = 1;
  private partial = "";
  /** The warm sandboxes' `start`s sent to this launcher, by the key it knows each by. */
  private readonly starts = new WeakMap<WarmSandbox["start"], string>();
  private startsSent = 0;

  constructor(
    python: string,
    private readonly onGone: () => void,
  ) {
    // -I: nothing from the user's site or PYTHON* variables; cwd "/": it enters a run's directory itself.
    this.child = spawn(python, ["-I", "-B", SCRIPT], { stdio: ["pipe", "pipe", "inherit"], cwd: "/" });
    this.child.stdout?.setEncoding("utf8");
    this.child.stdout?.on("data", (text: string) => this.read(text));
    this.child.stdin?.on("error", () => {}); // its exit, reported below, says more
    this.child.on("error", (err) => this.gone(err));
    // "close", not "exit": replies it wrote before it died are read first.
    this.child.on("close", (code, signal) =>
      this.gone(
        new Error(`the sandbox launcher (${python} ${SCRIPT}) exited with ${signal ?? `code ${code}`}`),
      ),
    );
    this.child.unref();
    this.hold(false);
  }

  run(req: LaunchRequest): Promise<Reply> {
    const id = this.nextId++;
    const reply = new Promise<Reply>((resolve, reject) => this.waiting.set(id, { resolve, reject }));
    this.hold(true);
    this.send({
      id,
      argv: req.argv,
      env: req.env,
      cwd: req.cwd ?? "/",
      inputs: base64Inputs(req.inputs),
      ...(req.sandbox && { sandbox: this.sandboxRequest(req.sandbox) }),
      outputBytes: req.outputBytes,
      wallMs: req.wallMs,
    });
    const abort = () => this.send({ id, kill: true });
    req.signal?.addEventListener("abort", abort, { once: true });
    if (req.signal?.aborted) abort();
    return reply.finally(() => req.signal?.removeEventListener("abort", abort));
  }

  private sandboxRequest({ start, idle, run }: WarmSandbox): object {
    const known = this.starts.get(start);
    if (known) return { key: known, idle, run };
    const key = String(++this.startsSent);
    this.starts.set(start, key);
    return { key, idle, run, start: { ...start, inputs: base64Inputs(start.inputs) } };
  }

  private send(message: object): void {
    this.child.stdin?.write(`${JSON.stringify(message)}\n`);
  }

  /** The helper keeps coa running only while one of its runs is going. */
  private hold(on: boolean): void {
    for (const stream of [this.child.stdin, this.child.stdout] as unknown as (Socket | null)[]) {
      if (on) stream?.ref();
      else stream?.unref();
    }
  }

  private read(text: string): void {
    const lines = (this.partial + text).split("\n");
    this.partial = lines.pop() ?? "";
    for (const line of lines) {
      const reply = JSON.parse(line) as Reply;
      this.waiting.get(reply.id)?.resolve(reply);
      this.waiting.delete(reply.id);
    }
    if (this.waiting.size === 0) this.hold(false);
  }

  private gone(err: Error): void {
    this.onGone();
    for (const { reject } of this.waiting.values()) reject(err);
    this.waiting.clear();
    this.hold(false);
  }
}

const launchers = new Map<string, Launcher>();

/** Runs `req.argv` through the launcher of `python` (started at first use, again if it died). */
export async function launch(python: string, req: LaunchRequest): Promise<Launched> {
  let launcher = launchers.get(python);
  if (!launcher) {
    const started: Launcher = new Launcher(python, () => {
      if (launchers.get(python) === started) launchers.delete(python);
    });
    launcher = started;
    launchers.set(python, launcher);
  }
  const reply = await launcher.run(req);
  if ("error" in reply) {
    throw Object.assign(new Error(reply.error), {
      code: reply.code,
      syscall: `spawn ${(req.sandbox?.start ?? req).argv[0]}`,
    });
  }
  const { id: _, stdout, stderr, ...status } = reply;
  return { stdout: Buffer.from(stdout, "base64"), stderr: Buffer.from(stderr, "base64"), ...status };
}
