import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { cpuQuota, usableCpus } from "./cpus.js";

const made: string[] = [];
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** The quota read from a /proc/self/cgroup of these lines and a cgroup mount holding these files, with a
 * /proc/self/mountinfo of these lines ("{top}" standing for the folder they are in; none: the usual places). */
function quota(procCgroup: string, files: Record<string, string>, mountinfo = ""): number | undefined {
  const top = mkdtempSync(path.join(tmpdir(), "coa-cpus-"));
  made.push(top);
  const root = path.join(top, "cg");
  mkdirSync(root);
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, name)), { recursive: true });
    writeFileSync(path.join(root, name), text);
  }
  writeFileSync(path.join(top, "proc_cgroup"), procCgroup);
  writeFileSync(path.join(top, "mountinfo"), mountinfo.replaceAll("{top}", top.replaceAll(" ", "\\040")));
  return cpuQuota(path.join(top, "proc_cgroup"), root, path.join(top, "mountinfo"));
}

describe("cpuQuota", () => {
  it("reads a container whose view starts at its own cgroup, v2 and v1", () => {
    expect(quota("0::/\n", { "cpu.max": "150000 100000\n" })).toBe(1.5);
    const v1 = { "cpu,cpuacct/cpu.cfs_quota_us": "50000\n", "cpu,cpuacct/cpu.cfs_period_us": "100000\n" };
    expect(quota("5:cpu,cpuacct:/docker/abc\n3:memory:/docker/abc\n", v1)).toBe(0.5);
  });

  it("takes the smallest quota along the path", () => {
    const v2 = { "a/b/cpu.max": "300000 100000", "a/cpu.max": "200000 100000", "cpu.max": "max 100000" };
    expect(quota("0::/a/b\n", v2)).toBe(2);
    const hybrid = {
      "unified/a/cpu.max": "100000 100000",
      "cpu/a/cpu.cfs_quota_us": "-1",
      "cpu/a/cpu.cfs_period_us": "100000",
      "cpu/cpu.cfs_quota_us": "400000",
      "cpu/cpu.cfs_period_us": "100000",
    };
    expect(quota("1:cpu:/a\n0::/a\n", hybrid)).toBe(1);
  });

  it("stops at the mount", () => {
    // A file above the mount (outside cgroupfs in life) is not a cgroup's.
    expect(quota("0::/\n", { "../cpu.max": "100000 100000" })).toBeUndefined();
    expect(quota("0::/a\n", { "../cpu.max": "100000 100000", "cpu.max": "300000 100000" })).toBe(3);
  });

  it("reads the mounts that mountinfo lists", () => {
    // A v1 cpu hierarchy mounted where nothing looks (a space in its path, escaped as the kernel does).
    const v1 = {
      "../else where/cpu/app/cpu.cfs_quota_us": "150000",
      "../else where/cpu/app/cpu.cfs_period_us": "100000",
    };
    const mounted =
      "31 30 0:28 / {top}/else\\040where/cpu rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct\n";
    expect(quota("4:cpu,cpuacct:/app\n", v1)).toBeUndefined();
    expect(quota("4:cpu,cpuacct:/app\n", v1, mounted)).toBe(1.5);
    // A container's mount of its own cgroup: the cgroup's files at the mount's top, its children below
    // it by their names past that cgroup's path.
    const v2 = { "c1/cpu.max": "50000 100000", "cpu.max": "400000 100000" };
    const own = "40 30 0:40 /kubepods/pod1 {top}/cg rw,nosuid - cgroup2 cgroup2 rw\n";
    expect(quota("0::/kubepods/pod1/c1\n", v2)).toBe(4); // the walk finds only the top's
    expect(quota("0::/kubepods/pod1/c1\n", v2, own)).toBe(0.5);
    // Lines that are not cgroup mounts, or not whole, change nothing.
    const noise =
      "22 1 8:1 / / rw - ext4 /dev/sda1 rw\nbroken line\n41 30 0:41 / {top}/x rw - cgroup cgroup rw,memory\n";
    expect(quota("0::/\n", { "cpu.max": "200000 100000" }, noise)).toBe(2);
  });

  it("is undefined without a quota or anything readable", () => {
    expect(quota("0::/\n", { "cpu.max": "max 100000\n" })).toBeUndefined();
    expect(
      quota("1:cpu:/\n", { "cpu/cpu.cfs_quota_us": "-1", "cpu/cpu.cfs_period_us": "100000" }),
    ).toBeUndefined();
    expect(quota("0::/\n", { "cpu.max": "a lot\n" })).toBeUndefined();
    expect(quota("garbage\n\n0::/x\n", {})).toBeUndefined();
    expect(cpuQuota("/nonexistent/cgroup", "/nonexistent")).toBeUndefined();
  });
});

describe("usableCpus", () => {
  it("is the quota's whole CPUs within the affinity mask, at least one", () => {
    expect(usableCpus(undefined, 16)).toBe(16);
    expect(usableCpus(2, 16)).toBe(2);
    expect(usableCpus(1.5, 16)).toBe(1);
    expect(usableCpus(0.5, 16)).toBe(1);
    expect(usableCpus(32, 4)).toBe(4);
    expect(usableCpus()).toBeGreaterThanOrEqual(1);
    expect(usableCpus()).toBeLessThanOrEqual(availableParallelism());
  });
});
