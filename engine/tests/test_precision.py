"""The dtype choice at start: timed on the model's own projections, on one thread, measured again while
a moment of load leaves the rounds in disagreement."""

import json
import tempfile
import threading
import unittest
from pathlib import Path
from unittest import mock

import torch

from coa_engine.model import matmul_dtype, preset_config
from coa_engine.precision import (
    DECISIVE,
    FAR_SLOWER,
    MAX_ROUNDS,
    MIN_ROUNDS,
    PROBE_FAR_SLOWER,
    PROBE_ROWS,
    TIMED_ROWS,
    autocast,
    choose_dtype,
    linear_flops,
    one_thread,
    remembered_dtype,
)

# The autocast state as the model reads it (torch's own per-device queries are deprecated from 2.4).
CPU = torch.device("cpu")


def scripted(fp32: list[float], bf16: list[float], probe: tuple[float, float] | None = None):
    """A `measure` that returns these GFLOP/s round by round and records what it was asked; the first
    look on PROBE_ROWS rows gets `probe` (fp32, bf16), by default each dtype's first round."""
    calls: list[tuple[torch.dtype, list, int, int]] = []
    rounds: list[torch.dtype] = []

    def measure(dtype, shapes, rows):
        calls.append((dtype, shapes, torch.get_num_threads(), rows))
        if rows == PROBE_ROWS:
            return (probe or (fp32[0], bf16[0]))[dtype == torch.bfloat16] * 1e9
        rounds.append(dtype)
        series = bf16 if dtype == torch.bfloat16 else fp32
        return series[min((len(rounds) - 1) // 2, len(series) - 1)] * 1e9

    return measure, calls


class DtypeChoiceTest(unittest.TestCase):
    shapes = preset_config("micro", 281).projection_shapes()

    def test_times_the_models_projections_on_one_thread(self):
        measure, calls = scripted([100.0], [400.0])
        before = torch.get_num_threads()
        choice, measured = choose_dtype("auto", "cpu", self.shapes, measure)
        self.assertEqual((choice, measured), ("bf16", {"fp32": 100.0, "bf16": 400.0}))
        # A first look on few rows, then agreeing rounds: no more than the minimum.
        self.assertEqual([rows for *_, rows in calls], [PROBE_ROWS] * 2 + [TIMED_ROWS] * 2 * MIN_ROUNDS)
        self.assertTrue(all(shapes == self.shapes and threads == 1 for _, shapes, threads, _ in calls))
        self.assertEqual(torch.get_num_threads(), before)

    def test_a_stalled_round_is_outvoted_by_more_rounds(self):
        # bf16 stalls in two of its first three rounds (another process held the core): its two best
        # disagree, so a fourth round is timed, which agrees with the one good round.
        measure, calls = scripted([150.0], [21.0, 450.0, 21.0, 455.0])
        choice, measured = choose_dtype("auto", "cpu", self.shapes, measure)
        self.assertEqual(choice, "bf16")
        self.assertEqual(measured["bf16"], 455.0)
        self.assertEqual(len(calls), 2 + 2 * 4)

    def test_rounds_are_bounded_when_they_never_agree(self):
        # fp32 keeps getting faster, 1.3x a round: its two best rounds never agree within 1.25x.
        measure, calls = scripted([10.0 * 1.3**n for n in range(MAX_ROUNDS)], [50.0])
        self.assertEqual(choose_dtype("auto", "cpu", self.shapes, measure)[0], "fp32")
        self.assertEqual(len(calls), 2 + 2 * MAX_ROUNDS)

    def test_a_first_look_on_few_rows_decides_where_bf16_has_no_fast_kernels(self):
        # A CPU without bf16 kernels: bf16 is tens of times slower on few rows as on many, and its
        # rounds on the model's rows would cost seconds each without changing the choice.
        measure, calls = scripted([60.0], [1.3])
        self.assertEqual(choose_dtype("auto", "cpu", self.shapes, measure), ("fp32", {"fp32": 60.0, "bf16": 1.3}))
        self.assertEqual([rows for *_, rows in calls], [PROBE_ROWS, PROBE_ROWS])
        # Slower on few rows by less than PROBE_FAR_SLOWER (fixed costs per call weigh more there):
        # the rounds decide, here bf16.
        measure, calls = scripted([100.0], [400.0], probe=(60.0, 60.0 / PROBE_FAR_SLOWER * 1.01))
        self.assertEqual(choose_dtype("auto", "cpu", self.shapes, measure)[0], "bf16")
        self.assertEqual(len(calls), 2 + 2 * MIN_ROUNDS)

    def test_bf16_far_slower_ends_the_timing_after_one_round(self):
        measure, calls = scripted([60.0], [1.3], probe=(60.0, 10.0))
        self.assertEqual(choose_dtype("auto", "cpu", self.shapes, measure), ("fp32", {"fp32": 60.0, "bf16": 1.3}))
        self.assertEqual(len(calls), 2 + 2)
        # Only slower by less than FAR_SLOWER: the rounds go on as usual.
        measure, calls = scripted([60.0], [60.0 / FAR_SLOWER * 1.01])
        self.assertEqual(choose_dtype("auto", "cpu", self.shapes, measure)[0], "fp32")
        self.assertEqual(len(calls), 2 + 2 * MIN_ROUNDS)

    def test_bf16_must_win_clearly(self):
        measure, _ = scripted([100.0], [115.0])
        self.assertEqual(choose_dtype("auto", "cpu", self.shapes, measure)[0], "fp32")

    def test_an_explicit_dtype_is_not_timed(self):
        measure, calls = scripted([100.0], [400.0])
        self.assertEqual(choose_dtype("fp32", "cpu", self.shapes, measure), ("fp32", {}))
        self.assertEqual(calls, [])
        with self.assertRaisesRegex(ValueError, "auto, fp32 or bf16"):
            choose_dtype("fp16")

    def test_measures_real_flops_and_restores_threads(self):
        before = torch.get_num_threads()
        with one_thread():
            self.assertEqual(torch.get_num_threads(), 1)
            flops = linear_flops(torch.float32, self.shapes, rows=64, seconds=0.01)
        self.assertEqual(torch.get_num_threads(), before)
        self.assertGreater(flops, 1e8)

    def test_timing_draws_nothing_from_the_seeded_generator(self):
        """A fresh model is initialized after the choice: its weights must not depend on whether the
        choice was timed, nor in how many rounds."""
        torch.manual_seed(7)
        state = torch.get_rng_state()
        linear_flops(torch.float32, self.shapes, rows=8, seconds=0.0)
        self.assertTrue(torch.equal(state, torch.get_rng_state()))


class RememberedDtypeTest(unittest.TestCase):
    """A decisive choice is kept per CPU, torch and model shapes, so that later starts skip the rounds."""

    shapes = preset_config("micro", 281).projection_shapes()

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = Path(self.dir.name) / "coa" / "dtype-choices.json"

    def tearDown(self):
        self.dir.cleanup()

    def test_a_decisive_choice_is_timed_once(self):
        measure, calls = scripted([100.0], [100.0 * DECISIVE])
        first = remembered_dtype("auto", "cpu", self.shapes, self.path, measure)
        self.assertEqual((first.dtype, first.gflops, first.remembered), ("bf16", {"fp32": 100.0, "bf16": 200.0}, False))
        timed = len(calls)
        again = remembered_dtype("auto", "cpu", self.shapes, self.path, measure)
        self.assertEqual(len(calls), timed)  # nothing timed again
        self.assertEqual((again.dtype, again.gflops, again.measured_at), ("bf16", first.gflops, first.measured_at))
        self.assertTrue(again.remembered)
        # Other shapes (another preset) are their own measurement, beside the first in the same file.
        other = preset_config("tiny", 281).projection_shapes()
        remembered_dtype("auto", "cpu", other, self.path, measure)
        self.assertGreater(len(calls), timed)
        self.assertEqual(len(json.loads(self.path.read_text())), 2)

    def test_bf16_ruled_out_at_the_first_look_is_remembered(self):
        measure, calls = scripted([60.0], [1.3], probe=(60.0, 1.3))
        self.assertEqual(remembered_dtype("auto", "cpu", self.shapes, self.path, measure).dtype, "fp32")
        self.assertEqual(len(calls), 2)
        self.assertTrue(remembered_dtype("auto", "cpu", self.shapes, self.path, measure).remembered)
        self.assertEqual(len(calls), 2)

    def test_a_close_call_is_timed_at_every_start(self):
        measure, calls = scripted([100.0], [150.0])
        for _ in range(2):
            choice = remembered_dtype("auto", "cpu", self.shapes, self.path, measure)
            self.assertEqual((choice.dtype, choice.remembered), ("bf16", False))
        self.assertEqual([rows for *_, rows in calls].count(PROBE_ROWS), 4)  # two first looks
        self.assertFalse(self.path.exists())

    def test_a_broken_or_unwritable_file_only_means_timing(self):
        measure, calls = scripted([100.0], [400.0])
        self.path.parent.mkdir(parents=True)
        for text in ("not json", "[1, 2]", '{"x": 1}'):
            self.path.write_text(text)
            self.assertFalse(remembered_dtype("auto", "cpu", self.shapes, self.path, measure).remembered)
        self.assertTrue(remembered_dtype("auto", "cpu", self.shapes, self.path, measure).remembered)
        blocked = Path(self.dir.name) / "a-file" / "dtype-choices.json"  # its directory is a file
        blocked.parent.write_text("")
        self.assertEqual(remembered_dtype("auto", "cpu", self.shapes, blocked, measure).dtype, "bf16")
        self.assertEqual(sorted(p.name for p in self.path.parent.iterdir()), ["dtype-choices.json"])

    def test_an_explicit_dtype_neither_reads_nor_writes(self):
        measure, calls = scripted([100.0], [400.0])
        choice = remembered_dtype("fp32", "cpu", self.shapes, self.path, measure)
        self.assertEqual((choice.dtype, choice.gflops, choice.measured_at), ("fp32", {}, None))
        self.assertEqual(calls, [])
        self.assertFalse(self.path.exists())


class AutocastTest(unittest.TestCase):
    def test_a_thread_builds_its_context_once(self):
        """Building a torch.autocast looks for torch_xla on disk; a decode step enters the context every
        time, so each thread keeps the ones it built."""

        def enter_many() -> int:
            with mock.patch("torch.autocast", wraps=torch.autocast) as probe:
                for _ in range(10):
                    with autocast("bf16"):
                        self.assertEqual(matmul_dtype(CPU), torch.bfloat16)
                return probe.call_count

        built: list[int] = []
        worker = threading.Thread(target=lambda: built.append(enter_many()))
        worker.start()
        worker.join()
        self.assertEqual(built, [1])
        self.assertLessEqual(enter_many(), 1)  # this thread may have built one already

    def test_nesting_and_errors_restore_the_state(self):
        self.assertEqual(matmul_dtype(CPU), torch.float32)
        with autocast("bf16"):
            with autocast("bf16"):
                self.assertEqual(matmul_dtype(CPU), torch.bfloat16)
            self.assertEqual(matmul_dtype(CPU), torch.bfloat16)
        self.assertEqual(matmul_dtype(CPU), torch.float32)
        with self.assertRaises(ValueError), autocast("bf16"):
            raise ValueError("inside")
        self.assertEqual(matmul_dtype(CPU), torch.float32)
        with autocast("fp32"):
            self.assertEqual(matmul_dtype(CPU), torch.float32)
        x = torch.ones(2, 2)
        with autocast("bf16"):
            self.assertEqual((x @ x).dtype, torch.bfloat16)
            with autocast("off"):  # code that casts for itself
                self.assertEqual((x @ x).dtype, torch.float32)
            self.assertEqual((x @ x).dtype, torch.bfloat16)
        with self.assertRaises(ValueError), autocast("fp16"):
            pass


if __name__ == "__main__":
    unittest.main()
