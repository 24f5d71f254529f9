// How many CPUs' worth of work to run at once: the affinity mask (os.availableParallelism), bounded
// by a cgroup's CPU quota. A container limited by a quota (`docker --cpus=2`, a Kubernetes CPU limit)
// still sees every core of its host; sandboxed programs started one per core there would share the
// quota and run into their wall-clock limits. The engine reads the quota the same way, in Python
// (engine/coa_engine/cpus.py): cgroup v2's cpu.max or v1's cpu.cfs_quota_us / cpu.cfs_period_us, the
// smallest along the process's cgroup and its ancestors up to the mount, in the cgroup filesystems that
// /proc/self/mountinfo lists (else where they are usually mounted).
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

/** A mountinfo field as written: the kernel escapes space, tab, newline and backslash as octal. */
const unescapeField = (field: string) =>
  field.replace(/\\([0-7]{3})/g, (_, octal) => String.fromCharCode(Number.parseInt(octal, 8)));

type CgroupKind = "v2" | "v1";

/** [kind, mount point, the cgroup mounted there] of each cgroup filesystem in `mountinfo`: "v2", or "v1"
 * for a hierarchy with the CPU controller. */
function cgroupMounts(mountinfo: string): [CgroupKind, string, string][] {
  const mounts: [CgroupKind, string, string][] = [];
  for (const line of (read(mountinfo) ?? "").split("\n")) {
    // "id parent major:minor root mount-point options [optional fields] - type source super-options"
    const at = line.indexOf(" - ");
    if (at < 0) continue;
    const fields = line.slice(0, at).split(" ").filter(Boolean);
    const tail = line
      .slice(at + 3)
      .split(" ")
      .filter(Boolean);
    if (fields.length < 5 || !tail.length) continue;
    const [point, mounted] = [unescapeField(fields[4] as string), unescapeField(fields[3] as string)];
    if (tail[0] === "cgroup2") mounts.push(["v2", point, mounted]);
    else if (tail[0] === "cgroup" && (tail[2] ?? "").split(",").includes("cpu"))
      mounts.push(["v1", point, mounted]);
  }
  return mounts;
}

/** The process's cgroup `cgroupPath` within a mount of the cgroup `mounted` (a container's mount of its
 * own cgroup holds that cgroup's files at its top); as it is where it is not below it. */
function below(cgroupPath: string, mounted: string): string {
  if (mounted !== "/" && (cgroupPath === mounted || cgroupPath.startsWith(`${mounted}/`))) {
    return cgroupPath.slice(mounted.length) || "/";
  }
  return cgroupPath;
}

/** (mount, path) of the hierarchies that may hold the CPU controller: v2's, and v1's `cpu` one, where
 * mountinfo mounts them, else where they usually are under `root`. */
function hierarchies(procCgroup: string, root: string, mountinfo: string): [string, string][] {
  const mounts = cgroupMounts(mountinfo);
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
    const kind =
      number === "0" && controllers === "" ? "v2" : controllers.split(",").includes("cpu") ? "v1" : undefined;
    const listed = mounts.filter(([k]) => k === kind);
    if (listed.length) {
      for (const [, point, mounted] of listed) found.push([point, below(cgroupPath, mounted)]);
    } else if (kind === "v2") {
      const unified = path.join(root, "unified");
      found.push([isDir(unified) ? unified : root, cgroupPath]);
    } else if (kind === "v1") {
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
export function cpuQuota(
  procCgroup = "/proc/self/cgroup",
  root = "/sys/fs/cgroup",
  mountinfo = "/proc/self/mountinfo",
): number | undefined {
  const quotas: number[] = [];
  for (const [mount, cgroupPath] of hierarchies(procCgroup, root, mountinfo)) {
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
