"""When generation may take the cores it leaves to its client: only after two readings in which they were
idle, judged from the machine's busy time less the engine's own."""

import os
import unittest
from unittest import mock

from coa_engine.spare_cores import IDLE_BELOW, SpareCores, machine_busy_seconds, own_seconds


class Readings:
    """A clock and the machine's and this process's busy seconds, advanced by the test (a reading a
    second apart: whole numbers stay exact)."""

    def __init__(self):
        self.now = self.machine = self.own = 0.0
        self.reads = 0

    def advance(self, seconds: float, others: float, ours: float = 0.0):
        """`seconds` pass with `others` CPUs busy outside the engine and `ours` inside it."""
        self.now += seconds
        self.machine += seconds * (others + ours)
        self.own += seconds * ours

    def spare(self) -> SpareCores:
        def machine():
            self.reads += 1
            return self.machine

        return SpareCores(interval=1.0, clock=lambda: self.now, machine=machine, own=lambda: self.own)


class SpareCoresTest(unittest.TestCase):
    def test_widens_after_two_quiet_readings_and_narrows_at_one_busy(self):
        r = Readings()
        spare = r.spare()
        answers = []
        # The engine itself busy on two CPUs throughout: its own time never counts against the spare cores.
        for others in (0.0, 0.0, 0.0, 0.05, 1.0, 0.0, 0.0):
            answers.append(spare.idle())
            r.advance(1.0, others, ours=2.0)
        self.assertEqual(answers, [False, False, True, True, True, False, False])
        self.assertTrue(spare.idle())
        self.assertEqual(spare.stats(), {"enabled": True, "steps": 8, "steps_on_every_thread": 4})

    def test_reads_at_most_once_an_interval(self):
        r = Readings()
        spare = r.spare()
        for _ in range(50):
            spare.idle()
            r.advance(0.125, 0.0)
        self.assertEqual(r.reads, 7)  # at 0, 1, 2, ... 6 seconds

    def test_a_client_at_work_keeps_generation_on_its_own_threads(self):
        r = Readings()
        spare = r.spare()
        for _ in range(20):
            self.assertFalse(spare.idle())
            r.advance(1.0, IDLE_BELOW + 0.05, ours=1.0)

    def test_off_without_proc_or_when_turned_off(self):
        def missing():
            raise FileNotFoundError("/proc/stat")

        spare = SpareCores(machine=missing)
        self.assertFalse(spare.idle())
        self.assertFalse(spare.enabled)
        # Where there is no affinity call (not Linux), every CPU counts; no /proc/stat then turns it off.
        with mock.patch.dict(os.__dict__), mock.patch("builtins.open", side_effect=FileNotFoundError):
            os.__dict__.pop("sched_getaffinity", None)
            real = SpareCores()
            self.assertFalse(real.idle())
            self.assertFalse(real.enabled)
        self.assertTrue(hasattr(os, "sched_getaffinity"))
        with mock.patch.dict("os.environ", {"COA_SPARE_CORES": "0"}):
            r = Readings()
            off = r.spare()
            for _ in range(5):
                self.assertFalse(off.idle())
                r.advance(1.0, 0.0)
            self.assertEqual(r.reads, 0)

    def test_reads_this_machine(self):
        busy, own = machine_busy_seconds(), own_seconds()
        self.assertGreater(busy, 0.0)
        self.assertGreaterEqual(own, 0.0)
        self.assertLessEqual(machine_busy_seconds({-1}), 0.0)  # no such CPU: nothing counted


if __name__ == "__main__":
    unittest.main()
