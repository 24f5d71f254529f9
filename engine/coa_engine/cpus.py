"""How many CPUs this process may use: its affinity mask, bounded by a cgroup's CPU quota.

A container limited by a quota (`docker --cpus=2`, a Kubernetes CPU limit) still sees every core of its
host in its affinity mask. Threads sized to the mask then outnumber the CPU time the quota grants, and
a parallel step waits at each barrier for the threads the kernel has throttled. The quota is read from
cgroup v2's `cpu.max` or v1's `cpu.cfs_quota_us` / `cpu.cfs_period_us`, the smallest along the
process's cgroup and its ancestors (a container's own cgroup is often the root of the view it mounts),
in the cgroup filesystems that `/proc/self/mountinfo` lists (else where they are usually mounted).
"""

from __future__ import annotations

import functools
import math
import os
import re
from pathlib import Path


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _quota_here(directory: Path) -> float | None:
    """CPUs' worth of time the cgroup at `directory` allows, or None where it sets no quota."""
    v2 = _read(directory / "cpu.max")  # "max 100000" or "200000 100000"
    if v2 is not None:
        quota, _, period = v2.partition(" ")
    else:  # v1; a quota of -1: none
        quota, period = _read(directory / "cpu.cfs_quota_us"), _read(directory / "cpu.cfs_period_us")
    try:
        return int(quota) / int(period) if int(quota) > 0 and int(period) > 0 else None
    except (TypeError, ValueError):  # no such files, "max", or unreadable numbers: no quota known
        return None


def _unescape(field: str) -> str:
    """A mountinfo field as written: the kernel escapes space, tab, newline and backslash as octal."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _cgroup_mounts(mountinfo: str) -> list[tuple[str, Path, str]]:
    """(kind, mount point, the cgroup mounted there) of each cgroup filesystem in `mountinfo`: "v2", or
    "v1" for a hierarchy with the CPU controller."""
    mounts = []
    for line in (_read(Path(mountinfo)) or "").splitlines():
        # "id parent major:minor root mount-point options [optional fields] - type source super-options"
        left, separator, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not separator or len(fields) < 5 or not tail:
            continue
        point, mounted = Path(_unescape(fields[4])), _unescape(fields[3])
        if tail[0] == "cgroup2":
            mounts.append(("v2", point, mounted))
        elif tail[0] == "cgroup" and len(tail) > 2 and "cpu" in tail[2].split(","):
            mounts.append(("v1", point, mounted))
    return mounts


def _below(path: str, mounted: str) -> str:
    """The process's cgroup `path` within a mount of the cgroup `mounted` (a container's mount of its
    own cgroup holds that cgroup's files at its top); as it is where it is not below it."""
    if mounted != "/" and (path == mounted or path.startswith(mounted + "/")):
        return path[len(mounted) :] or "/"
    return path


def _hierarchies(proc_cgroup: str, root: Path, mountinfo: str) -> list[tuple[Path, str]]:
    """(mount, path) of the hierarchies that may hold the CPU controller: v2's, and v1's `cpu` one,
    where mountinfo mounts them, else where they usually are under `root`."""
    mounts = _cgroup_mounts(mountinfo)
    found = []
    for line in (_read(Path(proc_cgroup)) or "").splitlines():
        number, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        kind = "v2" if number == "0" and controllers == "" else "v1" if "cpu" in controllers.split(",") else None
        listed = [(point, _below(path, mounted)) for k, point, mounted in mounts if k == kind]
        if listed:
            found += listed
        elif kind == "v2":
            found.append((root / "unified" if (root / "unified").is_dir() else root, path))
        elif kind == "v1":
            for name in (controllers, "cpu,cpuacct", "cpu"):
                if (root / name).is_dir():
                    found.append((root / name, path))
                    break
    return found


def cpu_quota(
    proc_cgroup: str = "/proc/self/cgroup",
    root: Path = Path("/sys/fs/cgroup"),
    mountinfo: str = "/proc/self/mountinfo",
) -> float | None:
    """CPUs' worth of time (quota / period) the cgroups of this process allow, the smallest of any
    quota along its path, or None without one (or without cgroups, outside Linux)."""
    quotas = []
    for mount, path in _hierarchies(proc_cgroup, root, mountinfo):
        directory = mount / path.lstrip("/")
        # Up to the mount; a container whose view starts at its own cgroup has none of the path's
        # directories, only the mount itself.
        for d in (directory, *directory.parents):
            if (q := _quota_here(d)) is not None:
                quotas.append(q)
            if d == mount:
                break
    return min(quotas) if quotas else None


@functools.lru_cache(maxsize=None)
def process_quota() -> float | None:
    """This process's quota, read once: the one its threads were sized by at start (`__main__`), which
    /info reports."""
    return cpu_quota()


def affinity_cpus() -> set[int]:
    """The CPUs this process may run on (every CPU outside Linux, which has no affinity call)."""
    return os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set(range(os.cpu_count() or 1))


def usable_cpus(quota: float | None, affinity: int | None = None) -> int:
    """CPUs' worth of threads to run: those in the affinity mask, at most the quota's whole CPUs (a
    thread over the quota is throttled: a parallel step waits for it), at least one."""
    if affinity is None:
        affinity = len(affinity_cpus())
    return max(1, min(affinity, math.floor(quota))) if quota is not None else affinity
