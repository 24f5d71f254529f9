import { execFile } from "node:child_process";
import { existsSync, lstatSync, readFileSync, readlinkSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { constants as osConstants, tmpdir } from "node:os";
import { isAbsolute, join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import pc from "picocolors";
import { z } from "zod";
import { launch, WARM_SANDBOX_FAILED, type WarmSandbox } from "./launcher.js";

/** Resource limits of one Python run. */
export const SandboxLimits = z.object({
  /** Wall-clock limit; the whole process group is killed when it passes. */
  wallMs: z.number().int().positive().default(10_000),
  /** CPU seconds per process (RLIMIT_CPU; SIGXCPU when reached). */
  cpuSeconds: z.number().int().positive().default(10),
  /**
   * Memory budget of the whole run: every process together, plus what it stores in /tmp and /dev/shm.
   * Enforced by a cgroup where one can be made (memory.max), else split into per-process address-space
   * limits (RLIMIT_AS) whose sum, with the tmpfs sizes, fits it; see `enforcedLimits`. Allocations past a
   * process's address-space limit raise MemoryError.
   */
  memoryBytes: z
    .number()
    .int()
    .positive()
    .default(1024 ** 3),
  /**
   * Tasks (processes and threads, the sandbox's own init included) the run may have at once
   * (RLIMIT_NPROC, and the cgroup's pids.max): stops fork bombs. Without a cgroup the cap is lowered so
   * that processes × per-process memory fits `memoryBytes` (see `enforcedLimits`).
   */
  maxProcesses: z.number().int().positive().default(64),
  /** stdout + stderr bytes kept; past this the program is killed and the output marked. */
  outputBytes: z
    .number()
    .int()
    .positive()
    .default(1024 ** 2),
  /** Largest file the program may write (RLIMIT_FSIZE) and the size of its private /tmp (part of `memoryBytes`). */
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
  /**
   * "auto": enforce `memoryBytes` for the whole run with a systemd scope (a cgroup with MemoryMax and
   * TasksMax) when `systemd-run` can make one here, else per-process limits; "off" (or
   * COA_SANDBOX_CGROUP=0): per-process limits only.
   */
  cgroup: z.enum(["auto", "off"]).default(process.env.COA_SANDBOX_CGROUP === "0" ? "off" : "auto"),
  /**
   * Where a run is kept to one process (`"single-process"`), run it in a warm sandbox: one kept
   * between runs whose resident interpreter forks each program (emptied and checked after every run),
   * instead of a sandbox and an interpreter started for it. false (or COA_SANDBOX_WARM=0): a fresh
   * sandbox per run.
   */
  warm: z.boolean().default(process.env.COA_SANDBOX_WARM !== "0"),
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

export type MemoryEnforcement = "cgroup" | "single-process" | "per-process";

/** The limits a run was actually held to, after `SandboxLimits` were mapped onto this machine. */
export interface EnforcedLimits {
  /**
   * "cgroup": a systemd scope holds all processes and their tmpfs pages to `memoryBytes` (memory.max);
   * "single-process": no cgroup, so the program may not start processes (seccomp refuses fork and
   * clone without CLONE_THREAD; threads are allowed) and its one address space gets the budget less
   * the tmpfs sizes;
   * "per-process": no cgroup and no filter (an architecture without one, or an unsandboxed run), so
   * each process gets `processMemoryBytes` of address space and at most `processes` tasks run, with
   * processes × processMemoryBytes + tmpBytes + shmBytes ≤ memoryBytes.
   */
  memory: MemoryEnforcement;
  /** The whole run's budget (`SandboxLimits.memoryBytes`). */
  memoryBytes: number;
  /** RLIMIT_NPROC: tasks (processes and threads) at once, the sandbox's init included. */
  processes: number;
  /** RLIMIT_AS of each process. */
  processMemoryBytes: number;
  /** Size of the writable tmpfs /tmp; 0 when /tmp is read-only (bubblewrap < 0.7 cannot size a tmpfs). */
  tmpBytes: number;
  /** Size of the writable tmpfs /dev/shm; 0 when read-only. */
  shmBytes: number;
}

export interface PythonRun {
  stdout: string;
  stderr: string;
  /** The program's exit status; null when it died from a signal or was killed. */
  exitCode: number | null;
  timedOut: boolean;
  killedBy: KilledBy | null;
  elapsedMs: number;
  sandboxed: boolean;
  /** The limits that applied (absent from runs made by stand-ins for the sandbox). */
  enforced?: EnforcedLimits;
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
  // Numerical libraries start a thread per core; a snippet gets one, and never meets the thread cap.
  OPENBLAS_NUM_THREADS: "1",
  OMP_NUM_THREADS: "1",
  MKL_NUM_THREADS: "1",
  // glibc reserves 64 MiB of address space per thread arena; under RLIMIT_AS that is budget lost.
  MALLOC_ARENA_MAX: "2",
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
const SETPRIV_CANDIDATES = ["/usr/bin/setpriv", "/bin/setpriv"];
const SYSTEMD_RUN_CANDIDATES = ["/usr/bin/systemd-run", "/bin/systemd-run"];
/** /dev/shm: room for multiprocessing's semaphores (one page each), not for data. */
const SHM_BYTES = 1024 ** 2;
/** Without a cgroup, each process gets at least this much address space; fewer processes run instead. */
const FALLBACK_PROCESS_BYTES = 256 * 1024 ** 2;
/** Open files per process: bounds what pipes, sockets and fds can hold outside the address space. */
const MAX_OPEN_FILES = 256;

interface BwrapFeatures {
  /** `--size` for tmpfs (bubblewrap 0.7). */
  tmpfsSize: boolean;
  /** `--disable-userns` (bubblewrap 0.8). */
  disableUserns: boolean;
}

/** What `probeSandbox` found: the bwrap features in use and how the memory budget is enforced. */
export interface SandboxProbe extends BwrapFeatures {
  bwrapVersion: string;
  /** How the run's memory budget is held (`EnforcedLimits.memory`). */
  memory: MemoryEnforcement;
  /** The systemd-run command line prefix used for "cgroup" (empty otherwise). */
  scope: string[];
  /** Whether a seccomp filter blocks memfd_create, memfd_secret and shmget (x86-64 and arm64 only). */
  seccomp: boolean;
  /** Whether runs go to warm sandboxes (`SandboxOptions.warm`, "single-process", a test run passed). */
  warm: boolean;
}

function findTool(candidates: string[]): string | undefined {
  return candidates.find((p) => existsSync(p));
}

function prlimitPath(): string {
  const found = findTool(PRLIMIT_CANDIDATES);
  if (!found)
    throw new SandboxUnavailableError("prlimit (util-linux) not found; it applies the resource limits");
  return found;
}

/**
 * Maps a run's limits onto this machine. With a cgroup, `memoryBytes` is the cgroup's memory.max (tmpfs
 * pages are charged to it too) and also each process's address space. Without one, the budget less the
 * tmpfs sizes goes to the program's one process when the filter keeps it from starting others
 * ("single-process"; `maxProcesses` then bounds its threads); else it is split evenly over the
 * processes allowed, fewer than `maxProcesses` when that would leave each less than 256 MiB (but
 * always 2: init and Python).
 */
export function enforcedLimits(
  limits: SandboxLimits,
  probe: Pick<SandboxProbe, "memory" | "tmpfsSize">,
): EnforcedLimits {
  const tmpBytes = probe.tmpfsSize ? limits.fileBytes : 0;
  const shmBytes = probe.tmpfsSize ? SHM_BYTES : 0;
  if (probe.memory === "cgroup") {
    return {
      memory: "cgroup",
      memoryBytes: limits.memoryBytes,
      processes: limits.maxProcesses,
      processMemoryBytes: limits.memoryBytes,
      tmpBytes,
      shmBytes,
    };
  }
  const room = limits.memoryBytes - tmpBytes - shmBytes;
  const processes =
    probe.memory === "single-process"
      ? limits.maxProcesses
      : Math.min(limits.maxProcesses, Math.max(2, Math.floor(room / FALLBACK_PROCESS_BYTES)));
  const sharing = probe.memory === "single-process" ? 1 : processes;
  // Whole pages, so that rounding never lets the sum pass the budget.
  const processMemoryBytes = Math.floor(room / sharing / 4096) * 4096;
  if (processMemoryBytes < 16 * 1024 ** 2) {
    throw new RangeError(
      `memoryBytes ${limits.memoryBytes} is too small: without a cgroup it must hold /tmp (fileBytes ${tmpBytes}), ` +
        `/dev/shm (${shmBytes}) and ${sharing} process${sharing > 1 ? "es" : ""} of at least 16 MiB`,
    );
  }
  return {
    memory: probe.memory,
    memoryBytes: limits.memoryBytes,
    processes,
    processMemoryBytes,
    tmpBytes,
    shmBytes,
  };
}

/** The rlimits of a run's program, [soft, hard] by resource: prlimit's flags, or a warm sandbox's run. */
function programRlimits(limits: SandboxLimits, enforced: EnforcedLimits): Record<string, [number, number]> {
  const both = (n: number): [number, number] => [n, n];
  return {
    // Soft CPU limit sends SIGXCPU (reported as cpu_limit); the hard limit a second later is SIGKILL.
    RLIMIT_CPU: [limits.cpuSeconds, limits.cpuSeconds + 1],
    RLIMIT_AS: both(enforced.processMemoryBytes),
    RLIMIT_NPROC: both(enforced.processes),
    RLIMIT_FSIZE: both(limits.fileBytes),
    RLIMIT_NOFILE: both(MAX_OPEN_FILES),
    RLIMIT_CORE: both(0),
  };
}

function limitArgs(limits: SandboxLimits, enforced: EnforcedLimits): string[] {
  const flags = Object.entries(programRlimits(limits, enforced)).map(
    ([name, [soft, hard]]) => `--${name.slice("RLIMIT_".length).toLowerCase()}=${soft}:${hard}`,
  );
  return [prlimitPath(), ...flags, "--"];
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

// Classic BPF for seccomp. Always: ERRNO(EPERM) for the calls that make memory outside the address
// space (memfd_create, memfd_secret, SysV shmget) and for the x32 ABI, ERRNO(ENOSYS) for a foreign
// architecture (i386). Without a cgroup, also no new processes: fork and vfork get EPERM, clone gets
// EPERM unless it makes a thread (CLONE_THREAD), clone3 (whose flags a filter cannot read) gets ENOSYS,
// on which libc falls back to clone; and what would outlive the process in its namespaces, where a
// warm sandbox's next run could find it (SysV message queues and semaphores, POSIX message queues,
// keys: msgget, semget, mq_open, add_key, request_key, keyctl) gets EPERM.
const SECCOMP_ARCH: Partial<
  Record<
    string,
    {
      audit: number;
      memory: number[];
      fork: number[];
      clone: number;
      clone3: number;
      lasting: number[];
      x32: boolean;
    }
  >
> = {
  x64: {
    audit: 0xc000003e,
    memory: [319, 447, 29],
    fork: [57, 58],
    clone: 56,
    clone3: 435,
    lasting: [68, 64, 240, 248, 249, 250],
    x32: true,
  },
  arm64: {
    audit: 0xc00000b7,
    memory: [279, 447, 194],
    fork: [],
    clone: 220,
    clone3: 435,
    lasting: [186, 190, 180, 217, 218, 219],
    x32: false,
  },
};

const CLONE_THREAD = 0x00010000;

/**
 * The seccomp program bwrap installs (--seccomp), or null on architectures not listed above.
 * `processes: false` also keeps the program from starting processes (threads stay allowed) and from
 * making what would outlive it in a warm sandbox.
 */
export function seccompProgram(
  arch: string = process.arch,
  opts: { processes: boolean } = { processes: true },
): Buffer | null {
  const spec = SECCOMP_ARCH[arch];
  if (!spec) return null;
  const [LD_W_ABS, JEQ, JGE, JSET, RET] = [0x20, 0x15, 0x35, 0x45, 0x06];
  const RETURNS = { allow: 0x7fff0000, eperm: 0x00050000 | 1, enosys: 0x00050000 | 38 };
  type Label = keyof typeof RETURNS | "clone" | "next";
  // [code, jump if true, jump if false, k]; jumps name a label, resolved below.
  const ops: [number, Label, Label, number][] = [];
  const jumpIf = (code: number, k: number, to: Label) => ops.push([code, to, "next", k]);
  ops.push([LD_W_ABS, "next", "next", 4]); // seccomp_data.arch
  ops.push([JEQ, "next", "enosys", spec.audit]);
  ops.push([LD_W_ABS, "next", "next", 0]); // seccomp_data.nr
  if (spec.x32) jumpIf(JGE, 0x40000000, "eperm");
  for (const nr of spec.memory) jumpIf(JEQ, nr, "eperm");
  if (!opts.processes) {
    for (const nr of [...spec.fork, ...spec.lasting]) jumpIf(JEQ, nr, "eperm");
    jumpIf(JEQ, spec.clone3, "enosys");
    jumpIf(JEQ, spec.clone, "clone");
  }
  ops.push([RET, "next", "next", RETURNS.allow]);
  const at: Partial<Record<Label, number>> = {};
  if (!opts.processes) {
    at.clone = ops.length;
    ops.push([LD_W_ABS, "next", "next", 16]); // low word of seccomp_data.args[0]: clone's flags
    ops.push([JSET, "allow", "eperm", CLONE_THREAD]);
  }
  for (const r of ["allow", "eperm", "enosys"] as const) {
    at[r] = ops.length;
    ops.push([RET, "next", "next", RETURNS[r]]);
  }
  const buf = Buffer.alloc(ops.length * 8);
  ops.forEach(([code, jt, jf, k], i) => {
    const offset = (label: Label) => (label === "next" ? 0 : (at[label] as number) - i - 1);
    buf.writeUInt16LE(code, i * 8);
    buf.writeUInt8(offset(jt), i * 8 + 2);
    buf.writeUInt8(offset(jf), i * 8 + 3);
    buf.writeUInt32LE(k >>> 0, i * 8 + 4);
  });
  return buf;
}

const CODE_FD = 3;
const SECCOMP_FD = 4;

let zygoteSource: string | undefined;
/** zygote.py's text, which a warm sandbox's interpreter runs (`-c`: no file of it in the sandbox). */
const zygote = (): string =>
  (zygoteSource ??= readFileSync(fileURLToPath(new URL("./zygote.py", import.meta.url)), "utf8"));
// /box/main.py in a warm sandbox: a link to the file its resident interpreter writes for each run.
const WARM_PROGRAM_FILE = "/dev/shm/.coa-program.py";
/** Longer programs run in a fresh sandbox: a warm one keeps the program in its 1 MiB /dev/shm. */
const WARM_CODE_BYTES = 256 * 1024;
/** The resident interpreter's argv[1]: names its process (`ps`, the benchmarks' CPU accounts). */
export const WARM_SANDBOX_MARK = "coa-warm-sandbox";
/**
 * Warm sandboxes kept waiting for runs: as many as an evaluation's default episodes in flight, so that
 * a burst of code runs finds them again (~6 MB of private memory each: the interpreter's 5 MB, bwrap's
 * two processes; the libraries are shared).
 */
const WARM_IDLE = 32;

function bwrapArgs(
  python: string,
  limits: SandboxLimits,
  probe: BwrapFeatures & { seccomp: boolean },
  enforced: EnforcedLimits,
  /** Start a warm sandbox's resident interpreter (zygote.py) instead of prlimit and the program. */
  warm: boolean,
): string[] {
  const env = Object.entries(SANDBOX_ENV).flatMap(([k, v]) => ["--setenv", k, v]);
  // The root is bwrap's own tmpfs, sized by the host: it is remounted read-only once everything is in
  // place, as is /dev. The only writable storage is /tmp and /dev/shm, each a tmpfs of fixed size; a
  // bubblewrap too old for `--size` gets none (both stay read-only directories).
  const scratch = probe.tmpfsSize
    ? [
        "--size",
        String(enforced.shmBytes),
        "--tmpfs",
        "/dev/shm",
        "--size",
        String(enforced.tmpBytes),
        "--tmpfs",
        "/tmp",
      ]
    : ["--dir", "/tmp"];
  return [
    "--unshare-all",
    "--unshare-user",
    ...(probe.disableUserns ? ["--disable-userns"] : []),
    "--die-with-parent",
    "--new-session",
    ...(probe.seccomp ? ["--seccomp", String(SECCOMP_FD)] : []),
    "--ro-bind",
    "/usr",
    "/usr",
    ...rootMounts(),
    ...ETC_FILES.flatMap((p) => ["--ro-bind-try", p, p]),
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    ...scratch,
    "--remount-ro",
    "/dev",
    ...(warm
      ? ["--symlink", WARM_PROGRAM_FILE, PROGRAM_PATH]
      : ["--ro-bind-data", String(CODE_FD), PROGRAM_PATH]),
    "--remount-ro",
    "/",
    "--chdir",
    "/tmp",
    "--clearenv",
    ...env,
    "--",
    ...(warm
      ? [python, ...PYTHON_FLAGS, "-c", zygote(), WARM_SANDBOX_MARK]
      : [...limitArgs(limits, enforced), python, ...PYTHON_FLAGS, PROGRAM_PATH]),
  ];
}

/**
 * The command that runs one sandboxed program: bwrap, inside a systemd scope when one is used, and as
 * the sandbox's user when coa runs as root.
 */
function sandboxCommand(
  bwrap: string,
  python: string,
  limits: SandboxLimits,
  probe: SandboxProbe,
): { argv: string[] } & Pick<SpawnPlan, "enforced" | "seccomp"> {
  const enforced = enforcedLimits(limits, probe);
  const argv = [...dropToSandboxUser(), bwrap, ...bwrapArgs(python, limits, probe, enforced, false)];
  const seccomp = probe.seccomp
    ? seccompProgram(process.arch, { processes: probe.memory !== "single-process" })
    : null;
  if (probe.memory !== "cgroup") return { argv, enforced, seccomp };
  // As root the scope is made by root, so the user is dropped inside it.
  return { argv: [...probe.scope, ...scopeProperties(enforced), "--", ...argv], enforced, seccomp };
}

const warmStarts = new Map<string, WarmSandbox["start"]>();

/**
 * A warm sandbox for runs of these limits ("single-process" only: its program is one process, so
 * nothing of it outlives the run but files, which the resident interpreter removes). The sandbox's own
 * filter lets that interpreter fork; each program gets the run's filter on top, as a fresh sandbox's.
 * How it starts is made once per choice of what shapes it (the launcher is sent it once, and runs
 * whose limits differ only in what each run gets share its sandboxes).
 */
function warmSandbox(
  bwrap: string,
  python: string,
  limits: SandboxLimits,
  probe: SandboxProbe,
): { sandbox: WarmSandbox; enforced: EnforcedLimits } {
  const enforced = enforcedLimits(limits, probe);
  const filter = (processes: boolean) => seccompProgram(process.arch, { processes }) as Buffer;
  const key = JSON.stringify([bwrap, python, probe, enforced.tmpBytes, enforced.shmBytes]);
  let start = warmStarts.get(key);
  if (!start) {
    start = {
      argv: [...dropToSandboxUser(), bwrap, ...bwrapArgs(python, limits, probe, enforced, true)],
      env: SANDBOX_ENV,
      inputs: { [SECCOMP_FD]: filter(true) },
    };
    warmStarts.set(key, start);
  }
  const rlimits = programRlimits(limits, enforced);
  // The resident interpreter is one more task of the sandbox's user.
  rlimits.RLIMIT_NPROC = [enforced.processes + 1, enforced.processes + 1];
  // zygote.py's format: one rlimit a line, then the run's filter.
  const run = [
    ...Object.entries(rlimits).map(([name, [soft, hard]]) => `${name} ${soft} ${hard}`),
    `filter ${filter(false).toString("hex")}`,
  ].join("\n");
  return { sandbox: { start, idle: WARM_IDLE, run }, enforced };
}

function scopeProperties(enforced: Pick<EnforcedLimits, "memoryBytes" | "processes">): string[] {
  return [
    "-p",
    `MemoryMax=${enforced.memoryBytes}`,
    "-p",
    "MemorySwapMax=0",
    // The scope also holds systemd-run/setpriv's exec chain and bwrap's outer process.
    "-p",
    `TasksMax=${enforced.processes + 2}`,
  ];
}

/** As root, the sandbox runs as uid 65534 (setpriv); bwrap would otherwise keep every capability. */
function dropToSandboxUser(): string[] {
  if (process.getuid?.() !== 0) return [];
  const setpriv = findTool(SETPRIV_CANDIDATES) ?? "setpriv";
  return [setpriv, `--reuid=${SANDBOX_UID}`, `--regid=${SANDBOX_UID}`, "--clear-groups", "--"];
}

function versionAtLeast(version: string, major: number, minor: number): boolean {
  const [a = 0, b = 0] = version.split(".").map(Number);
  return a > major || (a === major && b >= minor);
}

const probes = new Map<string, Promise<SandboxProbe>>();

/**
 * Checks once per (bwrap, python, cgroup, warm) choice that a sandboxed `pass` runs; resolves the bwrap
 * features and the memory enforcement to use (`memory: "cgroup"` only when a systemd scope with the
 * budget was made and its memory.max read back), and whether runs go to warm sandboxes (one ran `pass`
 * too), or rejects with SandboxUnavailableError saying what failed.
 */
export function probeSandbox(options: SandboxOptions = {}): Promise<SandboxProbe> {
  const { bwrap, python, cgroup, warm } = SandboxOptions.parse(options);
  const key = `${bwrap}\0${python}\0${cgroup}\0${warm}`;
  let probe = probes.get(key);
  if (!probe) {
    probe = probeOnce(bwrap, python, cgroup, warm);
    // A failed probe is not remembered: the next run tries again (the failure may have been load).
    probe.catch(() => probes.delete(key));
    probes.set(key, probe);
  }
  return probe;
}

const execFileAsync = promisify(execFile);

/**
 * A systemd scope that really limits memory: `systemd-run --scope` (as root) or `--user --scope`, whose
 * cgroup (v2) shows the MemoryMax and TasksMax asked for. Null when there is none (no systemd, no
 * user manager, cgroup v1, memory controller not delegated).
 */
async function findScope(): Promise<string[] | null> {
  const systemdRun = findTool(SYSTEMD_RUN_CANDIDATES);
  if (!systemdRun) return null;
  const scope = [
    systemdRun,
    ...(process.getuid?.() === 0 ? [] : ["--user"]),
    "--scope",
    "--quiet",
    "--collect",
  ];
  const want = { memoryBytes: 64 * 1024 ** 2, processes: 6 };
  const show =
    'p=$(sed -n "s/^0:://p" /proc/self/cgroup); cat "/sys/fs/cgroup$p/memory.max" "/sys/fs/cgroup$p/pids.max"';
  try {
    const { stdout } = await execFileAsync(
      scope[0],
      [...scope.slice(1), ...scopeProperties(want), "--", "/bin/sh", "-c", show],
      { timeout: 10_000 },
    );
    return stdout.split(/\s+/).filter(Boolean).join(" ") === `${want.memoryBytes} ${want.processes + 2}`
      ? scope
      : null;
  } catch {
    return null;
  }
}

async function probeOnce(
  bwrap: string,
  python: string,
  cgroup: "auto" | "off",
  warm: boolean,
): Promise<SandboxProbe> {
  const refuse = (why: string) =>
    new SandboxUnavailableError(
      `Python sandbox unavailable: ${why}. Install bubblewrap (apt-get install bubblewrap) and allow unprivileged ` +
        "user namespaces, or opt out explicitly with unsafeNoSandbox / COA_UNSAFE_NO_SANDBOX=1 (runs code unisolated).",
    );
  let version: string;
  try {
    const { stdout } = await execFileAsync(bwrap, ["--version"], { timeout: 5000 });
    version = stdout.replace(/^bubblewrap\s*/, "").trim();
  } catch (err) {
    throw refuse(`cannot run ${bwrap} (${err instanceof Error ? err.message : err})`);
  }
  if (isAbsolute(python) && !existsSync(python))
    throw new SandboxUnavailableError(
      `Python sandbox unavailable: no interpreter at ${python}. The sandbox mounts only system directories, ` +
        "so it needs a system Python (apt-get install python3) or one under /usr named with COA_SANDBOX_PYTHON.",
    );
  const base = {
    bwrapVersion: version,
    tmpfsSize: versionAtLeast(version, 0, 7),
    disableUserns: versionAtLeast(version, 0, 8),
    seccomp: seccompProgram() !== null,
    warm: false,
  };
  const limits = SandboxLimits.parse({ wallMs: 10_000 });
  const tryRun = (probe: SandboxProbe) => {
    const { argv, ...plan } = sandboxCommand(bwrap, python, limits, probe);
    return spawnAndCollect(argv, { ...plan, launcher: python, code: "pass", limits, sandboxed: true });
  };
  const scope = cgroup === "auto" ? await findScope() : null;
  if (scope) {
    const scoped: SandboxProbe = { ...base, memory: "cgroup", scope };
    const run = await tryRun(scoped).catch(() => null);
    if (run?.exitCode === 0) return scoped;
  }
  // Without a cgroup, the filter (where there is one) keeps the run to one process, which then gets the
  // whole budget; else the budget is split over the processes allowed.
  const plain: SandboxProbe = { ...base, memory: base.seccomp ? "single-process" : "per-process", scope: [] };
  const run = await tryRun(plain).catch((err: Error) => {
    // A tool of the command line missing (setpriv, as root), or the launcher's interpreter broken.
    throw refuse(`a test run of ${python} in bwrap ${version} could not start (${err.message})`);
  });
  if (run.exitCode !== 0) {
    throw refuse(`a test run of ${python} in bwrap ${version} failed: ${run.stderr.trim() || run.killedBy}`);
  }
  if (!warm || plain.memory !== "single-process" || !plain.tmpfsSize) return plain;
  // A warm sandbox that cannot start (an interpreter without ctypes, say) leaves runs to fresh ones.
  const warmRun = await runWarm(bwrap, python, limits, plain, { code: "pass" }).catch(() => null);
  return { ...plain, warm: warmRun?.exitCode === 0 };
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
  const probe = await probeSandbox(options);
  if (probe.warm && Buffer.byteLength(req.code) <= WARM_CODE_BYTES) {
    try {
      return await runWarm(options.bwrap, options.python, limits, probe, req);
    } catch (err) {
      // The sandbox failed before the program ran (it was killed, or could not start): a fresh one runs it.
      if ((err as { code?: string }).code !== WARM_SANDBOX_FAILED) throw err;
    }
  }
  const { argv, ...plan } = sandboxCommand(options.bwrap, options.python, limits, probe);
  return spawnAndCollect(argv, {
    ...plan,
    launcher: options.python,
    code: req.code,
    stdin: req.stdin,
    limits,
    signal: req.signal,
    sandboxed: true,
  });
}

function runWarm(
  bwrap: string,
  python: string,
  limits: SandboxLimits,
  probe: SandboxProbe,
  req: Pick<RunPythonRequest, "code" | "stdin" | "signal">,
): Promise<PythonRun> {
  const { sandbox, enforced } = warmSandbox(bwrap, python, limits, probe);
  return spawnAndCollect(sandbox.start.argv, {
    launcher: python,
    code: req.code,
    stdin: req.stdin,
    limits,
    enforced,
    signal: req.signal,
    sandboxed: true,
    sandbox,
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
    // The host's temp directory is not capped: only the processes' address spaces share the budget.
    const enforced = enforcedLimits(limits, { memory: "per-process", tmpfsSize: false });
    return await spawnAndCollect([...limitArgs(limits, enforced), python, ...PYTHON_FLAGS, program], {
      launcher: python,
      stdin: req.stdin,
      limits,
      enforced,
      signal: req.signal,
      sandboxed: false,
      cwd: dir,
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

interface SpawnPlan {
  /** The interpreter that runs the launcher (`launch`). */
  launcher: string;
  /** Program text fed to bwrap on fd 3 (sandboxed runs). */
  code?: string;
  stdin?: string;
  limits: SandboxLimits;
  enforced: EnforcedLimits;
  signal?: AbortSignal;
  sandboxed: boolean;
  /** The seccomp program bwrap reads on fd 4 (sandboxed runs on x86-64 and arm64). */
  seccomp?: Buffer | null;
  cwd?: string;
  /** Run in this warm sandbox, which reads the program on fd 3 too. */
  sandbox?: WarmSandbox;
}

function signalName(n: number): string {
  const entry = Object.entries(osConstants.signals).find(([, v]) => v === n);
  return entry ? entry[0] : `SIG${n}`;
}

async function spawnAndCollect(argv: string[], plan: SpawnPlan): Promise<PythonRun> {
  const started = performance.now();
  const inputs: Record<number, string | Buffer> = { 0: plan.stdin ?? "" };
  if (plan.code !== undefined) inputs[CODE_FD] = plan.code;
  if (plan.seccomp) inputs[SECCOMP_FD] = plan.seccomp;
  const run = await launch(plan.launcher, {
    argv,
    env: SANDBOX_ENV,
    cwd: plan.cwd,
    inputs,
    outputBytes: plan.limits.outputBytes,
    wallMs: plan.limits.wallMs,
    signal: plan.signal,
    sandbox: plan.sandbox,
  });
  const marker = `\n…[output truncated at ${plan.limits.outputBytes} bytes]`;
  const text = (stream: "stdout" | "stderr") =>
    run[stream].toString("utf8") + (run.truncated === stream ? marker : "");
  const stderr = text("stderr");
  // bwrap reports a program killed by signal N as exit status 128 + N.
  const code = run.exitCode;
  const termSignal =
    run.signal !== null
      ? signalName(run.signal)
      : plan.sandboxed && code !== null && code > 128 && code <= 192
        ? signalName(code - 128)
        : null;
  return {
    stdout: text("stdout"),
    stderr,
    exitCode: termSignal === null ? code : null,
    timedOut: run.killedBy === "wall_timeout",
    killedBy: run.killedBy ?? limitFromOutcome(termSignal, stderr),
    elapsedMs: Math.round((performance.now() - started) * 10) / 10,
    sandboxed: plan.sandboxed,
    enforced: plan.enforced,
  };
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
