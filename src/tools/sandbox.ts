import { type ChildProcess, execFile, spawn } from "node:child_process";
import { existsSync, lstatSync, readlinkSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { constants as osConstants, tmpdir } from "node:os";
import { isAbsolute, join } from "node:path";
import { promisify } from "node:util";
import pc from "picocolors";
import { z } from "zod";

/** Resource limits of one Python run. */
export const SandboxLimits = z.object({
  /** Wall-clock limit; the whole process group is killed when it passes. */
  wallMs: z.number().int().positive().default(10_000),
  /** CPU seconds per process (RLIMIT_CPU; SIGXCPU when reached). */
  cpuSeconds: z.number().int().positive().default(10),
  /** Address space per process (RLIMIT_AS): allocations past it raise MemoryError. */
  memoryBytes: z
    .number()
    .int()
    .positive()
    .default(1024 ** 3),
  /** Processes the sandbox user may run at once (RLIMIT_NPROC): stops fork bombs. */
  maxProcesses: z.number().int().positive().default(64),
  /** stdout + stderr bytes kept; past this the program is killed and the output marked. */
  outputBytes: z
    .number()
    .int()
    .positive()
    .default(1024 ** 2),
  /** Largest file the program may write (RLIMIT_FSIZE) and the size of its private /tmp. */
  fileBytes: z
    .number()
    .int()
    .positive()
    .default(16 * 1024 ** 2),
});
export type SandboxLimits = z.infer<typeof SandboxLimits>;

// A plain system Python: it lives under /usr, which the sandbox mounts read-only.
const PYTHON_CANDIDATES = ["/usr/bin/python3", "/usr/local/bin/python3"];
const defaultPython = (): string =>
  process.env.COA_SANDBOX_PYTHON ?? PYTHON_CANDIDATES.find((p) => existsSync(p)) ?? PYTHON_CANDIDATES[0];

/** How Python is run: inside bubblewrap (default) or, only when asked for explicitly, without it. */
export const SandboxOptions = z.object({
  /** The interpreter, as a path visible inside the sandbox (system directories are mounted read-only). */
  python: z.string().default(defaultPython),
  bwrap: z.string().default("bwrap"),
  /** Runs Python directly on the host, with limits but without isolation. Prints a warning once. */
  unsafeNoSandbox: z.boolean().default(process.env.COA_UNSAFE_NO_SANDBOX === "1"),
});
export type SandboxOptions = z.input<typeof SandboxOptions>;

/** Why a run was stopped, when it did not end on its own. */
export type KilledBy =
  | "wall_timeout"
  | "cpu_limit"
  | "memory_limit"
  | "output_limit"
  | "file_size_limit"
  | "aborted"
  | `signal:${string}`;

export interface PythonRun {
  stdout: string;
  stderr: string;
  /** The program's exit status; null when it died from a signal or was killed. */
  exitCode: number | null;
  timedOut: boolean;
  killedBy: KilledBy | null;
  elapsedMs: number;
  sandboxed: boolean;
}

export interface RunPythonRequest {
  code: string;
  stdin?: string;
  limits?: Partial<SandboxLimits>;
  options?: SandboxOptions;
  signal?: AbortSignal;
}

/** bwrap is missing or cannot create namespaces here; the message says why and how to opt out. */
export class SandboxUnavailableError extends Error {
  override name = "SandboxUnavailableError";
}

// The sandboxed program runs as an unprivileged user: as root, bwrap would keep every capability
// inside its namespace, and RLIMIT_NPROC does not bind root.
const SANDBOX_UID = 65534;
const SANDBOX_ENV: Record<string, string> = {
  PATH: "/usr/local/bin:/usr/bin:/bin",
  HOME: "/tmp",
  TMPDIR: "/tmp",
  LANG: "C.UTF-8",
  PYTHONIOENCODING: "utf-8",
};
const PROGRAM_PATH = "/box/main.py";
// -I: isolated (no user site, no PYTHON* variables, so PYTHONUNBUFFERED would be ignored); -B: no
// .pyc writes; -u: unbuffered stdout/stderr, so what a program printed before a kill or a crash
// reaches the pipe and the model sees it (block-buffered output dies with the process).
const PYTHON_FLAGS = ["-I", "-B", "-u"];
const ROOT_LINKS = ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];
// Only what the dynamic loader and Python need from /etc; never passwd, shadow or the host's config.
const ETC_FILES = ["/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives"];
const PRLIMIT_CANDIDATES = ["/usr/bin/prlimit", "/bin/prlimit"];

interface BwrapFeatures {
  /** `--size` for tmpfs (bubblewrap 0.7). */
  tmpfsSize: boolean;
  /** `--disable-userns` (bubblewrap 0.8). */
  disableUserns: boolean;
}

function runAsUser(): { uid?: number; gid?: number } {
  return process.getuid?.() === 0 ? { uid: SANDBOX_UID, gid: SANDBOX_UID } : {};
}

function prlimitPath(): string {
  const found = PRLIMIT_CANDIDATES.find((p) => existsSync(p));
  if (!found)
    throw new SandboxUnavailableError("prlimit (util-linux) not found; it applies the resource limits");
  return found;
}

function limitArgs(limits: SandboxLimits): string[] {
  return [
    prlimitPath(),
    // Soft CPU limit sends SIGXCPU (reported as cpu_limit); the hard limit a second later is SIGKILL.
    `--cpu=${limits.cpuSeconds}:${limits.cpuSeconds + 1}`,
    `--as=${limits.memoryBytes}`,
    `--nproc=${limits.maxProcesses}`,
    `--fsize=${limits.fileBytes}`,
    "--core=0",
    "--",
  ];
}

/** Mounts for the root-level entries that merged-/usr systems make symlinks and others keep as dirs. */
function rootMounts(): string[] {
  const args: string[] = [];
  for (const path of ROOT_LINKS) {
    const st = lstatSync(path, { throwIfNoEntry: false });
    if (!st) continue;
    if (st.isSymbolicLink()) args.push("--symlink", readlinkSync(path), path);
    else args.push("--ro-bind", path, path);
  }
  return args;
}

function bwrapArgs(python: string, limits: SandboxLimits, features: BwrapFeatures): string[] {
  const env = Object.entries(SANDBOX_ENV).flatMap(([k, v]) => ["--setenv", k, v]);
  return [
    "--unshare-all",
    "--unshare-user",
    ...(features.disableUserns ? ["--disable-userns"] : []),
    "--die-with-parent",
    "--new-session",
    "--ro-bind",
    "/usr",
    "/usr",
    ...rootMounts(),
    ...ETC_FILES.flatMap((p) => ["--ro-bind-try", p, p]),
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    ...(features.tmpfsSize ? ["--size", String(limits.fileBytes)] : []),
    "--tmpfs",
    "/tmp",
    "--ro-bind-data",
    "3",
    PROGRAM_PATH,
    "--chdir",
    "/tmp",
    "--clearenv",
    ...env,
    "--",
    ...limitArgs(limits),
    python,
    ...PYTHON_FLAGS,
    PROGRAM_PATH,
  ];
}

function versionAtLeast(version: string, major: number, minor: number): boolean {
  const [a = 0, b = 0] = version.split(".").map(Number);
  return a > major || (a === major && b >= minor);
}

const probes = new Map<string, Promise<BwrapFeatures>>();

/**
 * Checks once per (bwrap, python) pair that a sandboxed `pass` runs; resolves the bwrap features to
 * use, or rejects with SandboxUnavailableError saying what failed.
 */
export function probeSandbox(options: SandboxOptions = {}): Promise<BwrapFeatures> {
  const { bwrap, python } = SandboxOptions.parse(options);
  const key = `${bwrap}\0${python}`;
  let probe = probes.get(key);
  if (!probe) {
    probe = probeOnce(bwrap, python);
    // A failed probe is not remembered: the next run tries again (the failure may have been load).
    probe.catch(() => probes.delete(key));
    probes.set(key, probe);
  }
  return probe;
}

async function probeOnce(bwrap: string, python: string): Promise<BwrapFeatures> {
  const refuse = (why: string) =>
    new SandboxUnavailableError(
      `Python sandbox unavailable: ${why}. Install bubblewrap (apt-get install bubblewrap) and allow unprivileged ` +
        "user namespaces, or opt out explicitly with unsafeNoSandbox / COA_UNSAFE_NO_SANDBOX=1 (runs code unisolated).",
    );
  let version: string;
  try {
    const { stdout } = await promisify(execFile)(bwrap, ["--version"], { timeout: 5000 });
    version = stdout.replace(/^bubblewrap\s*/, "").trim();
  } catch (err) {
    throw refuse(`cannot run ${bwrap} (${err instanceof Error ? err.message : err})`);
  }
  if (isAbsolute(python) && !existsSync(python))
    throw new SandboxUnavailableError(
      `Python sandbox unavailable: no interpreter at ${python}. The sandbox mounts only system directories, ` +
        "so it needs a system Python (apt-get install python3) or one under /usr named with COA_SANDBOX_PYTHON.",
    );
  const features = { tmpfsSize: versionAtLeast(version, 0, 7), disableUserns: versionAtLeast(version, 0, 8) };
  const limits = SandboxLimits.parse({ wallMs: 10_000 });
  const run = await spawnAndCollect(bwrap, bwrapArgs(python, limits, features), {
    code: "pass",
    limits,
    sandboxed: true,
  });
  if (run.exitCode !== 0) {
    throw refuse(`a test run of ${python} in bwrap ${version} failed: ${run.stderr.trim() || run.killedBy}`);
  }
  return features;
}

let warnedUnsafe = false;

function warnUnsafeOnce(): void {
  if (warnedUnsafe) return;
  warnedUnsafe = true;
  process.stderr.write(
    pc.bold(
      pc.red(
        "WARNING: coa runs model-written Python WITHOUT a sandbox (unsafeNoSandbox / COA_UNSAFE_NO_SANDBOX=1).\n" +
          "         It can read your files and use the network. Only CPU, memory and time limits apply.\n",
      ),
    ),
  );
}

/**
 * Runs a Python program with resource limits, inside bubblewrap: no network, no host files besides
 * read-only system directories, a private /tmp, an unprivileged user. Never resolves with a sandbox
 * failure disguised as a program failure: if the sandbox cannot run, it rejects with
 * SandboxUnavailableError (unless `unsafeNoSandbox` was chosen).
 */
export async function runPython(req: RunPythonRequest): Promise<PythonRun> {
  const options = SandboxOptions.parse(req.options ?? {});
  const limits = SandboxLimits.parse(req.limits ?? {});
  if (options.unsafeNoSandbox) return runUnsandboxed(options.python, limits, req);
  const features = await probeSandbox(options);
  return spawnAndCollect(options.bwrap, bwrapArgs(options.python, limits, features), {
    code: req.code,
    stdin: req.stdin,
    limits,
    signal: req.signal,
    sandboxed: true,
  });
}

async function runUnsandboxed(
  python: string,
  limits: SandboxLimits,
  req: RunPythonRequest,
): Promise<PythonRun> {
  warnUnsafeOnce();
  const dir = await mkdtemp(join(tmpdir(), "coa-py-"));
  try {
    const program = join(dir, "main.py");
    await writeFile(program, req.code);
    const [prlimit, ...prlimitArgs] = limitArgs(limits);
    return await spawnAndCollect(prlimit, [...prlimitArgs, python, ...PYTHON_FLAGS, program], {
      stdin: req.stdin,
      limits,
      signal: req.signal,
      sandboxed: false,
      cwd: dir,
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

interface SpawnPlan {
  /** Program text fed to bwrap on fd 3 (sandboxed runs). */
  code?: string;
  stdin?: string;
  limits: SandboxLimits;
  signal?: AbortSignal;
  sandboxed: boolean;
  cwd?: string;
}

function signalName(n: number): string {
  const entry = Object.entries(osConstants.signals).find(([, v]) => v === n);
  return entry ? entry[0] : `SIG${n}`;
}

function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, "SIGKILL");
  } catch {
    // already gone
  }
}

function spawnAndCollect(command: string, args: string[], plan: SpawnPlan): Promise<PythonRun> {
  const started = performance.now();
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, {
      stdio: ["pipe", "pipe", "pipe", plan.code === undefined ? "ignore" : "pipe"],
      detached: true,
      env: SANDBOX_ENV,
      cwd: plan.cwd ?? "/",
      ...(plan.sandboxed ? runAsUser() : {}),
    });
    const chunks: Record<"stdout" | "stderr", Buffer[]> = { stdout: [], stderr: [] };
    let kept = 0;
    let killedBy: KilledBy | null = null;
    const stop = (why: KilledBy) => {
      killedBy ??= why;
      killGroup(child);
    };
    const collect = (stream: "stdout" | "stderr") => (data: Buffer) => {
      if (killedBy === "output_limit") return;
      const room = plan.limits.outputBytes - kept;
      chunks[stream].push(data.length > room ? data.subarray(0, room) : data);
      kept += Math.min(room, data.length);
      if (data.length > room) {
        chunks[stream].push(Buffer.from(`\n…[output truncated at ${plan.limits.outputBytes} bytes]`));
        stop("output_limit");
      }
    };
    child.stdout?.on("data", collect("stdout"));
    child.stderr?.on("data", collect("stderr"));
    // A program that exits without reading its input closes the pipe: not an error.
    child.stdin?.on("error", () => {});
    child.stdin?.end(plan.stdin ?? "");
    const codePipe = child.stdio[3] as NodeJS.WritableStream | null;
    if (plan.code !== undefined) {
      codePipe?.on("error", () => {});
      codePipe?.end(plan.code);
    }
    const timer = setTimeout(() => stop("wall_timeout"), plan.limits.wallMs);
    const onAbort = () => stop("aborted");
    plan.signal?.addEventListener("abort", onAbort, { once: true });
    if (plan.signal?.aborted) onAbort();
    child.on("error", (err) => {
      clearTimeout(timer);
      plan.signal?.removeEventListener("abort", onAbort);
      reject(err);
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      plan.signal?.removeEventListener("abort", onAbort);
      const stdout = Buffer.concat(chunks.stdout).toString("utf8");
      const stderr = Buffer.concat(chunks.stderr).toString("utf8");
      // bwrap reports a program killed by signal N as exit status 128 + N.
      const termSignal =
        signal ??
        (plan.sandboxed && code !== null && code > 128 && code <= 192 ? signalName(code - 128) : null);
      const exitCode = termSignal === null ? code : null;
      resolvePromise({
        stdout,
        stderr,
        exitCode,
        timedOut: killedBy === "wall_timeout",
        killedBy: killedBy ?? limitFromOutcome(termSignal, stderr),
        elapsedMs: Math.round((performance.now() - started) * 10) / 10,
        sandboxed: plan.sandboxed,
      });
    });
  });
}

/** Names the limit a program ran into, from how it ended. */
function limitFromOutcome(termSignal: string | null, stderr: string): KilledBy | null {
  if (termSignal === "SIGXCPU") return "cpu_limit";
  if (termSignal === "SIGXFSZ") return "file_size_limit";
  if (termSignal !== null) return `signal:${termSignal}`;
  const lastLine = stderr.trimEnd().split("\n").at(-1) ?? "";
  if (lastLine.startsWith("MemoryError")) return "memory_limit";
  return null;
}
