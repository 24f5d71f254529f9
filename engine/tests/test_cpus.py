"""The CPUs the engine sizes its threads to: the affinity mask, bounded by a cgroup's CPU quota."""

import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from coa_engine.cpus import cpu_quota, usable_cpus

ENGINE_DIR = Path(__file__).resolve().parents[1]


class CpuQuotaTest(unittest.TestCase):
    def quota(self, proc_cgroup: str, files: dict[str, str], mountinfo: str = "") -> float | None:
        """The quota read from a /proc/self/cgroup of these lines and a cgroup mount holding these files,
        with a /proc/self/mountinfo of these lines ("{top}" standing for the folder they are in; none:
        the usual places)."""
        with tempfile.TemporaryDirectory() as top:
            (Path(top) / "proc_cgroup").write_text(proc_cgroup)
            (Path(top) / "mountinfo").write_text(mountinfo.replace("{top}", top.replace(" ", "\\040")))
            root = Path(top) / "cg"
            root.mkdir()
            for name, text in files.items():
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                (root / name).write_text(text)
            return cpu_quota(str(Path(top) / "proc_cgroup"), root, str(Path(top) / "mountinfo"))

    def test_a_container_whose_view_starts_at_its_own_cgroup(self):
        # cgroup v2 with its own namespace (docker's default): "0::/" and cpu.max at the mount.
        self.assertEqual(self.quota("0::/\n", {"cpu.max": "150000 100000\n"}), 1.5)
        # v1 (docker on an older host): the path names the host's cgroup, which the view does not hold.
        v1 = {"cpu,cpuacct/cpu.cfs_quota_us": "50000\n", "cpu,cpuacct/cpu.cfs_period_us": "100000\n"}
        self.assertEqual(self.quota("5:cpu,cpuacct:/docker/abc\n3:memory:/docker/abc\n", v1), 0.5)

    def test_the_smallest_quota_along_the_path(self):
        files = {"a/b/cpu.max": "300000 100000", "a/cpu.max": "200000 100000", "cpu.max": "max 100000"}
        self.assertEqual(self.quota("0::/a/b\n", files), 2.0)
        files = {"cpu/a/cpu.cfs_quota_us": "-1", "cpu/a/cpu.cfs_period_us": "100000"}
        files |= {"cpu/cpu.cfs_quota_us": "400000", "cpu/cpu.cfs_period_us": "100000"}
        self.assertEqual(self.quota("1:cpu:/a\n0::/\n", files), 4.0)  # a hybrid host: v1's cpu, v2 beside
        files = {"unified/a/cpu.max": "100000 100000", "cpu/a/cpu.cfs_quota_us": "-1", "cpu/a/cpu.cfs_period_us": "1"}
        self.assertEqual(self.quota("1:cpu:/a\n0::/a\n", files), 1.0)

    def test_the_walk_stops_at_the_mount(self):
        # A file above the mount (outside cgroupfs in life) is not a cgroup's.
        self.assertIsNone(self.quota("0::/\n", {"../cpu.max": "100000 100000"}))
        self.assertEqual(self.quota("0::/a\n", {"../cpu.max": "100000 100000", "cpu.max": "300000 100000"}), 3.0)

    def test_the_mounts_that_mountinfo_lists(self):
        # A v1 cpu hierarchy mounted where nothing looks (a space in its path, escaped as the kernel does).
        v1 = {"../else where/cpu/app/cpu.cfs_quota_us": "150000", "../else where/cpu/app/cpu.cfs_period_us": "100000"}
        mounted = "31 30 0:28 / {top}/else\\040where/cpu rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct\n"
        self.assertIsNone(self.quota("4:cpu,cpuacct:/app\n", v1))
        self.assertEqual(self.quota("4:cpu,cpuacct:/app\n", v1, mounted), 1.5)
        # A container's mount of its own cgroup: the cgroup's files at the mount's top, its children
        # below it by their names past that cgroup's path.
        v2 = {"c1/cpu.max": "50000 100000", "cpu.max": "400000 100000"}
        own = "40 30 0:40 /kubepods/pod1 {top}/cg rw,nosuid - cgroup2 cgroup2 rw\n"
        self.assertEqual(self.quota("0::/kubepods/pod1/c1\n", v2), 4.0)  # the walk finds only the top's
        self.assertEqual(self.quota("0::/kubepods/pod1/c1\n", v2, own), 0.5)
        # Lines that are not cgroup mounts, or not whole, change nothing.
        noise = "22 1 8:1 / / rw - ext4 /dev/sda1 rw\nbroken line\n41 30 0:41 / {top}/x rw - cgroup cgroup rw,memory\n"
        self.assertEqual(self.quota("0::/\n", {"cpu.max": "200000 100000"}, noise), 2.0)

    def test_no_quota_or_nothing_readable_is_none(self):
        self.assertIsNone(self.quota("0::/\n", {"cpu.max": "max 100000\n"}))
        v1 = {"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}
        self.assertIsNone(self.quota("1:cpu:/\n", v1))
        self.assertIsNone(self.quota("0::/\n", {"cpu.max": "a lot\n"}))
        self.assertIsNone(self.quota("garbage\n\n0::/x\n", {}))
        self.assertIsNone(cpu_quota("/nonexistent/cgroup", Path("/nonexistent")))

    def test_threads_are_the_quotas_whole_cpus_within_the_mask(self):
        self.assertEqual(usable_cpus(None, affinity=16), 16)
        self.assertEqual(usable_cpus(2.0, affinity=16), 2)
        self.assertEqual(usable_cpus(1.5, affinity=16), 1)  # a second thread would be throttled half the time
        self.assertEqual(usable_cpus(0.5, affinity=16), 1)
        self.assertEqual(usable_cpus(32.0, affinity=4), 4)
        self.assertGreaterEqual(usable_cpus(cpu_quota()), 1)


CPU_V1 = Path("/sys/fs/cgroup/cpu")


@unittest.skipUnless(
    os.geteuid() == 0 and os.access(CPU_V1, os.W_OK) and (CPU_V1 / "cpu.cfs_quota_us").exists(),
    "needs root and a writable cgroup v1 cpu hierarchy",
)
class RealCgroupTest(unittest.TestCase):
    def test_a_process_in_a_cgroup_with_a_quota_reads_it(self):
        """The kernel's own files: a process placed in a cgroup of half a CPU reads 0.5 and takes one thread."""
        group = Path(tempfile.mkdtemp(prefix="coa-test-", dir=CPU_V1))
        try:
            try:
                (group / "cpu.cfs_period_us").write_text("100000")
                (group / "cpu.cfs_quota_us").write_text("50000")
            except OSError as err:  # e.g. a parent's smaller quota (EINVAL): nothing to read here
                self.skipTest(f"this machine refused a quota of half a CPU: {err}")
            script = "from coa_engine.cpus import cpu_quota, usable_cpus; q = cpu_quota(); print(q, usable_cpus(q))"
            out = subprocess.run(
                [sys.executable, "-c", f"import sys; open({str(group / 'tasks')!r}, 'w').write('0'); {script}"],
                cwd=ENGINE_DIR,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            self.assertEqual(out.split(), ["0.5", "1"])
        finally:
            group.rmdir()


if __name__ == "__main__":
    unittest.main()
