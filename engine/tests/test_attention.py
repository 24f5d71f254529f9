"""The decode step's row-by-row attention: the fused kernel (attention.c) against the same arithmetic in
torch ops, the operator TorchScript calls, and the kernel's build and its fallback."""

import contextlib
import io
import os
import shutil
import tempfile
import unittest
from pathlib import Path
from typing import List
from unittest import mock

import torch

from coa_engine import attention, blas

from .helpers import kernel_expected, require_kernels


def case(rows, heads, t, d, ends, counts=None, allocated_rows=None, positions=None, seed=0):
    """Queries and a cache laid out as the decode step lays them out: queries [N, H, D] (row after row,
    `counts` of them a row, default t each), a strided view as the step's are (of queries, keys and
    values together); the cache's keys and values views of the first `rows` rows of a larger
    allocation, with more positions allocated than any row holds, garbage past each row's end."""
    g = torch.Generator().manual_seed(seed)
    counts = counts or [t] * rows
    allocated_rows = allocated_rows or rows + 2
    positions = positions or max(ends) + 9
    keys = torch.randn(allocated_rows, heads, positions, d, generator=g)[:rows]
    values = torch.randn(allocated_rows, heads, positions, d, generator=g)[:rows]
    for r, end in enumerate(ends):
        keys[r, :, end:] = 1e30
        values[r, :, end:] = 1e30
    q = torch.randn(sum(counts), 3, heads, d, generator=g)[:, 0]
    return q, keys, values, counts, 1 / d**0.5


def bf16_attention_reference(q, keys, values, ends, counts, scale) -> torch.Tensor:
    """torch's bf16 attention (the trainer's `_attend`) in float64: the scaled scores rounded to bf16,
    the softmax's weights rounded to bf16, the weighted sums exact (unrounded)."""
    def rounded(x):
        return x.bfloat16().double()

    out, first = [], 0
    for r, (end, t) in enumerate(zip(ends, counts)):
        queries = q[first : first + t].transpose(0, 1).double()  # [H, t, D]
        scores = rounded(queries @ keys[r, :, :end].double().transpose(1, 2) * scale)
        seen = torch.ones(t, end, dtype=torch.bool)
        seen[:, end - t :] = torch.ones(t, t, dtype=torch.bool).tril()
        weights = rounded(torch.softmax(scores.masked_fill(~seen, float("-inf")), dim=-1))
        out.append((weights @ values[r, :, :end].double()).transpose(0, 1))
        first += t
    return torch.cat(out)


def attend_in_torchscript(
    q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, ends: List[int], counts: List[int]
) -> torch.Tensor:
    return torch.ops.coa.attend_rows(q, keys, values, ends, counts, 0.25)


class FusedAttentionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_kernels("fused attention")

    def check(self, rows, heads, t, d, ends, threads=1, **layout):
        q, keys, values, counts, scale = case(rows, heads, t, d, ends, **layout)
        expected = attention.attend_rows_torch(q, keys, values, ends, counts, scale)
        with mock.patch.object(torch, "get_num_threads", lambda: threads):
            got = attention.attend_rows_fused(q, keys, values, ends, counts, scale)
        self.assertEqual(got.shape, q.shape)
        self.assertTrue(torch.isfinite(got).all())
        torch.testing.assert_close(got, expected, rtol=0, atol=2e-5)

    def test_it_equals_torch_ops_over_each_rows_own_positions(self):
        """Every number of queries the engine makes (1; drafts of 1 to 8, past the kernel's group of
        6), head widths 32 and 64, rows shorter than a vector and not multiples of one, garbage past
        each row's end that would turn any read of it into inf or nan; and rows of different numbers of
        queries in one call (drafts of different lengths)."""
        for t in (1, 2, 5, 6, 7, 9):
            for d in (32, 64):
                ends = [t, t + 3, 17, 40, 8 * t + 5]
                with self.subTest(t=t, d=d):
                    self.check(len(ends), 3, t, d, ends)
        self.check(5, 3, 0, 32, [4, 40, 17, 9, 300], counts=[4, 1, 7, 2, 5])
        # Empty rows (the sampler's holes, garbage in every position) feed no queries and are not read.
        self.check(5, 3, 0, 32, [0, 40, 0, 9, 300], counts=[0, 1, 0, 2, 5])

    def test_a_bf16_cache_rounds_where_torchs_bf16_attention_rounds(self):
        """With a bf16 cache (a bf16 engine's) the kernel rounds the scores and the softmax's weights to
        bf16 where torch's bf16 ops round them and sums in fp32. Against that arithmetic in float64 its
        bf16 outputs are the reference's own rounding but for a few rounding-edge cases (measured: at
        least 99.8%; the fp32 kernel's on the same numbers, which rounds nothing, about 50%), and never
        a bf16 step away (measured: at most 0.31 of the bound below)."""
        for t, d, threads in ((1, 32, 1), (2, 64, 1), (5, 32, 2), (7, 64, 1), (9, 32, 3)):
            ends = [t, t + 3, 17, 40, 8 * t + 5, 300]
            q, keys, values, counts, scale = case(len(ends), 3, t, d, ends)
            q, keys, values = q.bfloat16(), keys.bfloat16(), values.bfloat16()
            self.assertTrue(attention.usable(q, keys, values))
            expected = bf16_attention_reference(q, keys, values, ends, counts, scale)
            with self.subTest(t=t, d=d), mock.patch.object(torch, "get_num_threads", lambda threads=threads: threads):
                got = attention.attend_rows_fused(q, keys, values, ends, counts, scale)
                self.assertEqual(got.dtype, torch.bfloat16)
                self.assertGreater((got == expected.bfloat16()).float().mean().item(), 0.97)
                torch.testing.assert_close(got.double(), expected, rtol=2**-7, atol=2**-7)

    def test_an_extends_many_queries(self):
        """A prefix-cache extend: ~100 new queries a row go through blocks of 16 transposed keys, 4
        queries at a time, in chunks of 48 queries (each over only the positions its last query sees);
        query counts that leave 1-3 queries past the blocks and a short last chunk, rows of fewer
        positions than a block, and bf16 within its rounding."""
        for t, d in ((8, 32), (48, 64), (51, 32), (103, 64)):
            ends = [t, t + 5, t + 300, t + 1000]
            with self.subTest(t=t, d=d):
                self.check(len(ends), 2, t, d, ends, threads=2)
                q, keys, values, counts, scale = case(len(ends), 2, t, d, ends)
                q, keys, values = q.bfloat16(), keys.bfloat16(), values.bfloat16()
                expected = bf16_attention_reference(q, keys, values, ends, counts, scale)
                got = attention.attend_rows_fused(q, keys, values, ends, counts, scale)
                self.assertGreater((got == expected.bfloat16()).float().mean().item(), 0.97)
                torch.testing.assert_close(got.double(), expected, rtol=2**-7, atol=2**-7)

    def test_long_rows_and_several_threads(self):
        """Long rows, and calls that read enough (>= 16 MiB, PARALLEL_BYTES) to run on several threads,
        each with its own buffers: the same numbers as one thread's."""
        self.check(6, 4, 5, 64, [1000, 5, 700, 2048, 513, 64], threads=2)
        self.check(4, 8, 2, 64, [2000, 1990, 2040, 1500], threads=2, allocated_rows=4)  # 29 MiB
        self.check(3, 8, 60, 64, [2048, 2000, 1100], threads=3, allocated_rows=3)  # 20 MiB, an extend's chunks
        self.check(3, 2, 1, 32, [1500, 2, 33], threads=3)
        self.check(4, 4, 0, 64, [1200, 6, 800, 90], counts=[6, 6, 1, 3], threads=2)

    def test_queries_see_their_own_drafts_causally(self):
        """A draft's query sees the ids before it and itself, never the ids drafted after it: changing the
        last position's key and value changes only the last query's output."""
        q, keys, values, counts, scale = case(1, 2, 4, 32, [20])
        before = attention.attend_rows_fused(q, keys, values, [20], counts, scale)
        keys[0, :, 19] += 5.0
        values[0, :, 19] += 5.0
        after = attention.attend_rows_fused(q, keys, values, [20], counts, scale)
        torch.testing.assert_close(after[:3], before[:3], rtol=0, atol=0)
        self.assertGreater((after[3] - before[3]).abs().max().item(), 1e-3)

    def test_the_operator_runs_the_kernel_or_torch_ops(self):
        """`torch.ops.coa.attend_rows` (what the TorchScript step calls) gives the kernel's answer, and
        torch ops' where the kernel is absent or the tensors are not its kind (float64)."""
        ends = [9, 30]
        q, keys, values, counts, scale = case(2, 2, 0, 32, ends, counts=[3, 2])
        operator = torch.ops.coa.attend_rows(q, keys, values, ends, counts, scale)
        self.assertTrue(torch.equal(operator, attention.attend_rows_fused(q, keys, values, ends, counts, scale)))
        scripted = torch.jit.script(attend_in_torchscript)(q, keys, values, ends, counts)
        expected = attention.attend_rows_torch(q, keys, values, ends, counts, 0.25)
        torch.testing.assert_close(scripted, expected, rtol=0, atol=2e-5)
        # Without the kernel the loop over rows runs compiled: from Python it cost 3.5 s an evaluation.
        self.assertIsInstance(attention.attend_rows_scripted(), torch.jit.ScriptFunction)
        with mock.patch.object(attention, "attention_kernel", lambda: None):
            operator = torch.ops.coa.attend_rows(q, keys, values, ends, counts, scale)
            self.assertTrue(torch.equal(operator, attention.attend_rows_torch(q, keys, values, ends, counts, scale)))
        wide = [x.double() for x in (q, keys, values)]
        self.assertFalse(attention.usable(*wide))
        got = torch.ops.coa.attend_rows(*wide, ends, counts, scale)
        torch.testing.assert_close(got, operator.double(), rtol=0, atol=2e-5)

    def test_queries_or_ends_that_do_not_fit_are_refused(self):
        """Counts that do not add up to the queries or below zero, or ends outside the cache (or short of
        a row's own queries) would make the kernel read past its inputs."""
        q, keys, values, counts, scale = case(2, 2, 3, 32, [9, 30])
        for ends, counts in (
            ([9], [3]), ([9, 2], [3, 3]), ([9, keys.shape[2] + 1], [3, 3]), ([9, 30], [3, 2]), ([9, 30], [7, -1])
        ):
            with self.subTest(ends=ends, counts=counts), self.assertRaisesRegex(Exception, "attend_rows"):
                torch.ops.coa.attend_rows(q, keys, values, ends, counts, scale)

    def test_rows_read_a_shared_prefix_from_one_copy_with_the_same_bits(self):
        """Rows whose first positions equal a shared copy's read them there (`shared`): the same bits as
        reading their own, fp32 and bf16, one query or an extend's many, one thread or two; with each
        row's own first positions spoiled (garbage, inf) the answer is still the true one, so the copy
        is what the kernel read. Rows read different lengths of it (a multiple of 16 each, 0: none)."""
        fp32, bf16 = torch.float32, torch.bfloat16
        for dtype, t, threads in ((fp32, 1, 1), (fp32, 5, 2), (bf16, 3, 1), (fp32, 60, 2)):
            ends = [t + 40, t + 300, t + 33, t + 700]
            q, keys, values, counts, scale = case(len(ends), 3, t, 32, ends, allocated_rows=4)
            q, keys, values = q.to(dtype), keys.to(dtype), values.to(dtype)
            sk, sv = keys[1, :, :32].clone(), values[1, :, :32].clone()
            keys[:, :, :32], values[:, :, :32] = sk, sv
            shared = [32, 32, 16, 0]
            with self.subTest(dtype=dtype, t=t), mock.patch.object(attention, "kernel_threads", lambda: threads):
                own = attention.attend_rows(q, keys, values, ends, counts, scale)
                got = attention.attend_rows(q, keys, values, ends, counts, scale, sk, sv, shared)
                self.assertTrue(torch.equal(got, own))
                for r, n in enumerate(shared):
                    keys[r, :, :n], values[r, :, :n] = float("inf"), float("nan")
                spoiled = torch.ops.coa.attend_rows(q, keys, values, ends, counts, scale, sk, sv, shared)
                self.assertTrue(torch.equal(spoiled, own))

    def test_a_shared_prefix_that_does_not_fit_is_refused(self):
        """Lengths that are not whole blocks of 16, reach a row's own new positions or past the copy, or a
        copy of another shape or dtype would make the kernel read the wrong memory."""
        q, keys, values, counts, scale = case(2, 2, 3, 32, [40, 60])
        sk, sv = keys[0, :, :32].clone(), values[0, :, :32].clone()
        for shared, k, v in (
            ([8, 0], sk, sv), ([48, 0], sk, sv), ([32, 32, 0], sk, sv), ([16, 0], sk[:1], sv[:1]),
            ([16, 0], sk.double(), sv.double()), ([16, 0], sk.transpose(1, 2), sv), ([16, 0], None, sv),
        ):  # fmt: skip
            with self.subTest(shared=shared), self.assertRaisesRegex(ValueError, "shared prefixes"):
                attention.attend_rows(q, keys, values, [40, 60], counts, scale, k, v, shared)

    def test_a_cache_off_the_cpu_never_builds_it(self):
        """A GPU's decode steps ask whether the kernel attends their cache (`fused_over`): no, without
        building or loading it (no compiler run on a machine that never decodes on its CPU)."""
        keys = torch.empty((2, 2, 8, 32), device="meta")
        with mock.patch.object(attention, "attention_kernel") as kernel:
            self.assertFalse(attention.fused_over(keys, keys, torch.float32))
        kernel.assert_not_called()

    def test_loading_it_leaves_denormals_alone(self):
        """Built with -ffast-math but not linked with it: gcc would otherwise add start-up code that makes
        the whole process flush denormal floats to zero, torch's arithmetic included."""
        tiny = torch.tensor([1e-39], dtype=torch.float32)
        self.assertGreater((tiny * 0.5).item(), 0.0)


class KernelBuildTest(unittest.TestCase):
    def test_a_build_is_cached_by_source_compiler_and_cpu(self):
        if not kernel_expected():
            self.skipTest("no gcc with AVX2/FMA here")
        with tempfile.TemporaryDirectory() as home, mock.patch.dict(os.environ, {"XDG_CACHE_HOME": home}):
            built = attention.build()
            self.assertEqual(built.parent, Path(home) / "coa" / "kernels")
            stamp = built.stat().st_mtime_ns
            self.assertEqual(attention.build(), built)  # cached: not compiled again
            self.assertEqual(built.stat().st_mtime_ns, stamp)
            with mock.patch.object(attention, "cpu_flags", lambda: "flags : another cpu"):
                self.assertNotEqual(attention.build(), built)
            self.assertEqual(sorted(p.suffix for p in built.parent.iterdir()), [".so", ".so"])  # no leftovers

    def test_without_a_compiler_decoding_falls_back_and_says_why(self):
        attention.attention_kernel.cache_clear()
        err = io.StringIO()
        try:
            with mock.patch.dict(os.environ, {"CC": "/nonexistent/cc"}), contextlib.redirect_stderr(err):
                self.assertIsNone(attention.attention_kernel())
        finally:
            attention.attention_kernel.cache_clear()
        self.assertIn("decode attention in torch ops", err.getvalue())
        self.assertIn("/nonexistent/cc", err.getvalue())

    def test_a_compiler_error_is_reported_with_its_message(self):
        if shutil.which("gcc") is None:
            self.skipTest("no gcc here")
        with tempfile.TemporaryDirectory() as home, mock.patch.dict(os.environ, {"XDG_CACHE_HOME": home}):
            source = Path(home) / "broken.c"
            source.write_text("int f( {\n")
            with mock.patch.object(attention, "SOURCES", (source,)):
                with self.assertRaises(Exception) as raised:
                    attention.build()
            self.assertIn("error", getattr(raised.exception, "stderr", "") or str(raised.exception))

    def test_a_cpu_engine_loads_it_at_start_and_reports_it(self):
        from coa_engine.worker import Worker

        for dtype in ("fp32", "bf16"):
            attention.attention_kernel.cache_clear()
            worker = Worker(preset="micro", device="cpu", dtype=dtype)
            try:
                with self.subTest(dtype=dtype):
                    self.assertEqual(worker.info()["decode_attention"]["fused"], kernel_expected())
            finally:
                worker.sampler.close()

    def test_it_runs_on_all_of_the_engines_threads(self):
        """An engine gives the kernel all of its threads (`--threads`) while generation runs torch on one
        fewer (the kernel is bound by memory, not by the core; it uses them for calls that read 16 MiB
        or more, PARALLEL_BYTES); /info says how many."""
        from coa_engine.worker import Worker

        worker = Worker(preset="micro", device="cpu", dtype="fp32", threads=2, generation_threads=1)
        real, threads = attention.attention_kernel(), []

        class Recorder:
            def coa_attend_rows(self, *args):
                threads.append(args[-2])
                return real.coa_attend_rows(*args)

        try:
            sgemm, pairs = blas.sgemm() is not None, bool(real.coa_row_step_pairs())
            expected = {"fused": True, "threads": 2, "sgemm": sgemm, "bf16_pairs": pairs}
            self.assertEqual(worker.info()["decode_attention"], expected)
            q, keys, values, counts, scale = case(2, 2, 1, 32, [5, 9])
            with mock.patch.object(attention, "attention_kernel", Recorder), mock.patch.object(torch, "get_num_threads", lambda: 1):
                attention.attend_rows_fused(q, keys, values, [5, 9], counts, scale)
            self.assertEqual(threads, [2])
        finally:
            worker.sampler.close()
            attention.use_threads(None)

    def test_disabled_by_the_environment(self):
        attention.attention_kernel.cache_clear()
        try:
            with mock.patch.dict(os.environ, {"COA_ATTENTION_KERNEL": "0"}):
                self.assertIsNone(attention.attention_kernel())
                self.assertEqual(attention.state(), {"fused": False, "reason": "off (COA_ATTENTION_KERNEL=0)"})
        finally:
            attention.attention_kernel.cache_clear()


if __name__ == "__main__":
    unittest.main()
