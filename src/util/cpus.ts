// How many CPUs' worth of work to run at once: the affinity mask (os.availableParallelism), bounded
// by a cgroup's CPU quota. A container limited by a quota (`docker --cpus=2`, a Kubernetes CPU limit)
// still sees every core of its host; sandboxed programs started one per core there would share the
// quota and run into their wall-clock limits. The engine reads the quota the same way, in Python
// (engine/coa_engine/cpus.py): cgroup v2's cpu.max or v1's cpu.cfs_quota_us / cpu.cfs_period_us, the
// smallest along the process's cgroup and its ancestors up to the mount.
import { existsSync, readFileSync, statSync } from "node:fs";
import { availableParallelism } from "node:os";
import path from "node:path";

function read(file: string): string | undefined {
  try {
    return readFileSync(file, "utf8").trim();
  } catch {
    return undefined;
  }
}

/** CPUs' worth of time the cgroup at `dir` allows, or undefined where it sets no quota. */
function quotaAt(dir: string): number | undefined {
  const v2 = read(path.join(dir, "cpu.max")); // "max 100000" or "200000 100000"
  const [quota, period] =
    v2 !== undefined
      ? v2.split(" ")
      : [read(path.join(dir, "cpu.cfs_quota_us")), read(path.join(dir, "cpu.cfs_period_us"))]; // v1; -1: none
  const [q, p] = [Number(quota), Number(period)];
  return Number.isInteger(q) && Number.isInteger(p) && q > 0 && p > 0 ? q / p : undefined;
}

const isDir = (dir: string) => existsSync(dir) && statSync(dir).isDirectory();

/** (mount, path) of the hierarchies that may hold the CPU controller: v2's, and v1's `cpu` one. */
function hierarchies(procCgroup: string, root: string): [string, string][] {
  const found: [string, string][] = [];
  for (const line of (read(procCgroup) ?? "").split("\n")) {
    // "hierarchy-id:controllers:path"; the path may hold colons itself.
    const first = line.indexOf(":");
    const second = line.indexOf(":", first + 1);
    if (first < 0 || second < 0) continue;
    const [number, controllers, cgroupPath] = [
      line.slice(0, first),
      line.slice(first + 1, second),
      line.slice(second + 1),
    ];
    if (number === "0" && controllers === "") {
      const unified = path.join(root, "unified");
      found.push([isDir(unified) ? unified : root, cgroupPath]);
    } else if (controllers.split(",").includes("cpu")) {
      const mount = [controllers, "cpu,cpuacct", "cpu"].map((name) => path.join(root, name)).find(isDir);
      if (mount) found.push([mount, cgroupPath]);
    }
  }
  return found;
}

/**
 * CPUs' worth of time (quota / period) the cgroups of this process allow: the smallest quota along its
 * path, or undefined without one (or without cgroups).
 */
export function cpuQuota(procCgroup = "/proc/self/cgroup", root = "/sys/fs/cgroup"): number | undefined {
  const quotas: number[] = [];
  for (const [mount, cgroupPath] of hierarchies(procCgroup, root)) {
    // Up to the mount: a container whose view starts at its own cgroup has none of the path's
    // directories, only the mount itself.
    // (resolve, not join: "/" would leave a trailing slash that never equals the mount)
    for (let dir = path.resolve(mount, `.${cgroupPath}`); ; dir = path.dirname(dir)) {
      const quota = quotaAt(dir);
      if (quota !== undefined) quotas.push(quota);
      if (dir === mount || dir === path.dirname(dir)) break;
    }
  }
  return quotas.length ? Math.min(...quotas) : undefined;
}

/** CPUs in the affinity mask, at most the quota's whole CPUs (a process beyond it is throttled), at least one. */
export function usableCpus(quota = cpuQuota(), affinity = availableParallelism()): number {
  return quota === undefined ? affinity : Math.max(1, Math.min(affinity, Math.floor(quota)));
}
