// CPU seconds of a command's process and of its children, read from /proc while they run (Linux), for
// the benchmarks that time whole commands: each process's last reading before it exits is what it used,
// to within one interval. Processes too short-lived to be read (a sandbox's ~50 ms, a probe's few) are
// not, nor does their time reach their launcher's cutime (two sandboxed runs of ~0.15 CPU-s each left
// it at 0.02 s); what the whole machine was busy meanwhile (/proc/stat) bounds them: on a machine doing
// nothing else, its busy time less the processes read is theirs.

import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";

/** What `watchCpu` found: CPU seconds per kind of process (`kindOf` names them; "watcher" is the
 * process that watched, its reading included), and the whole machine's busy seconds over the same time. */
export interface CpuByKind {
  kinds: Record<string, number>;
  machine: number | null;
}

function clockTicks(): number {
  try {
    return Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
  } catch {
    return 100;
  }
}

// The readings are synchronous: each file of /proc read through the thread pool and a promise cost the
// bench about 1 CPU-s over a 12 s evaluation of ~100 processes (4 readings a second), time the
// evaluation it measures shares two cores with; read in place, each is a few microseconds.

/** CPU seconds `pid` used (utime + stime; null once it is gone or where there is no /proc). */
function cpuOf(pid: number, hz: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command's closing parenthesis: state is the 3rd field, utime the 14th.
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(f[11]) + Number(f[12])) / hz;
  } catch {
    return null;
  }
}

/** Seconds every CPU has been busy since boot (all but idle and iowait; null without /proc). */
export async function machineBusy(hz = clockTicks()): Promise<number | null> {
  try {
    const total = (await readFile("/proc/stat", "utf8")).split("\n")[0].split(/\s+/).slice(1, 9).map(Number);
    return (total.reduce((a, b) => a + b, 0) - total[3] - total[4]) / hz;
  } catch {
    return null;
  }
}

function childrenOf(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`)
      .map((t) => readFileSync(`/proc/${pid}/task/${t}/children`, "utf8"))
      .flatMap((l) => l.split(" ").filter(Boolean).map(Number));
  } catch {
    return [];
  }
}

function cmdlineOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    return "";
  }
}

/**
 * Samples `root` and its children every `intervalMs` until `stop()`, which resolves with the CPU seconds
 * per kind of process (`kindOf` of its command line, read at each sample: a child read between its fork
 * and its exec still shows its parent's), and the children of those of the kinds `descendInto` names
 * (a warm sandbox's interpreter is the launcher's great-grandchild); each reading costs CPU.
 */
export function watchCpu(
  root: number,
  kindOf: (cmdline: string) => string,
  intervalMs = 100,
  descendInto: string[] = [],
): { stop: () => Promise<CpuByKind> } {
  const hz = clockTicks();
  const last = new Map<number, { kind: string; cpu: number }>();
  const busyAtStart = machineBusy(hz);
  const ownAtStart = process.cpuUsage(); // this process's own reading and waiting count too
  let running = true;
  const read = (pid: number): void => {
    const cpu = cpuOf(pid, hz);
    const cmdline = cmdlineOf(pid);
    if (cpu === null || !cmdline) return;
    const kind = kindOf(cmdline.replaceAll("\0", " "));
    last.set(pid, { kind, cpu });
    if (descendInto.includes(kind)) childrenOf(pid).forEach(read);
  };
  const loop = (async () => {
    while (running) {
      [root, ...childrenOf(root)].forEach(read);
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      const [start, end] = [await busyAtStart, await machineBusy(hz)];
      const kinds: Record<string, number> = {};
      for (const { kind, cpu } of last.values()) kinds[kind] = (kinds[kind] ?? 0) + cpu;
      const own = process.cpuUsage(ownAtStart);
      kinds.watcher = (own.user + own.system) / 1e6;
      return { kinds, machine: start !== null && end !== null ? end - start : null };
    },
  };
}
