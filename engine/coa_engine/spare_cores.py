"""Whether the cores that generation leaves to its client are idle now.

Generation runs on one thread fewer than the engine has (`--generation-threads`): an evaluation's client
(the agent runtime, its tools' sandboxes) runs beside the engine, and a native step on a second thread
whose core the client holds waits for it at every barrier (a `tiny` step on a 2-core EPYC: 1.7-2.2 ms
on one thread, 4.8-5.8 on two; docs/engine.md). A server whose clients are elsewhere, or waiting for
their answers, leaves that core idle instead. `SpareCores.idle` tells the native step when it may take
every thread: the CPUs this process may run on were busy, outside this process, less than IDLE_BELOW
of one CPU over the last two readings, INTERVAL apart (from /proc/stat's per-CPU times less this
process's own). One busy reading narrows it again. `COA_SPARE_CORES=0` turns it off.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

from .cpus import affinity_cpus

# Seconds between readings: /proc/stat counts in ticks of 10 ms, so a reading spans 10 of them per CPU.
INTERVAL = 0.1
# CPUs' worth of busy time outside the engine under which the spare cores count as idle: an agent
# runtime waiting for its model uses a few percent of one.
IDLE_BELOW = 0.35


def machine_busy_seconds(cpus: set[int] | None = None) -> float:
    """Seconds the CPUs `cpus` (default: those this process may run on) spent busy since boot, as
    /proc/stat counts them: all but idle and iowait (steal included: a core the host takes away is not
    spare)."""
    cpus = affinity_cpus() if cpus is None else cpus
    busy = 0
    with open("/proc/stat") as stat:
        for line in stat:
            name, *fields = line.split()
            if name == "cpu":  # the total; each CPU's line follows it
                continue
            if not name.startswith("cpu"):  # past them
                break
            if int(name[3:]) in cpus:
                ticks = [int(f) for f in fields[:8]]
                busy += sum(ticks) - ticks[3] - ticks[4]
    return busy / os.sysconf("SC_CLK_TCK")  # /proc/stat counts in the kernel's clock ticks


def own_seconds() -> float:
    """CPU seconds this process has used (all of its threads)."""
    t = os.times()
    return t.user + t.system


class SpareCores:
    def __init__(
        self,
        interval: float = INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        machine: Callable[[], float] = machine_busy_seconds,
        own: Callable[[], float] = own_seconds,
    ):
        self.enabled = os.environ.get("COA_SPARE_CORES", "1") != "0"
        self.interval, self._clock, self._machine, self._own = interval, clock, machine, own
        self._lock = threading.Lock()
        self._at: float | None = None
        self._busy = self._used = 0.0
        self._quiet = self._idle = False
        # Steps that asked, and those told to take every thread (/info).
        self.asked = self.widened = 0

    def idle(self) -> bool:
        """Whether the CPUs beyond generation's have been idle: True only after two quiet readings in
        a row; read anew at most once per `interval`."""
        if not self.enabled:
            return False
        with self._lock:
            now = self._clock()
            if self._at is None or now - self._at >= self.interval:
                try:
                    busy, used = self._machine(), self._own()
                except (OSError, ValueError):  # no /proc: generation keeps its own threads
                    self.enabled = False
                    return False
                if self._at is not None:
                    others = ((busy - self._busy) - (used - self._used)) / (now - self._at)
                    quiet = others < IDLE_BELOW
                    self._idle, self._quiet = quiet and self._quiet, quiet
                self._at, self._busy, self._used = now, busy, used
            self.asked += 1
            self.widened += self._idle
            return self._idle

    def stats(self) -> dict:
        return {"enabled": self.enabled, "steps": self.asked, "steps_on_every_thread": self.widened}


# The engine's one: a batch's native step asks it (row_step.py).
SPARE = SpareCores()
