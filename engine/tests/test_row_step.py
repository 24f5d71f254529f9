"""The one-row decode step in native code (row_step.c, `RowStep`) against the TorchScript step
(`decode_tokens`) that every other step runs: the same logits and cache writes, taken exactly where it
applies."""

import contextlib
import unittest
from unittest import mock

import torch

from coa_engine import attention, blas, row_step
from coa_engine import model as model_module
from coa_engine.model import KVCache, ModelConfig, SharedPrefix, Transformer
from coa_engine.precision import autocast
from coa_engine.row_step import BLOCK, RowStep, packed

from .helpers import micro_model, require_kernels

# Shapes no block or vector divides: 100 ids (the output's last block is 36 columns), 200 hidden units
# (gate_up 400 columns, down 200 rows).
ODD = ModelConfig(vocab_size=100, dim=64, n_layers=2, n_heads=2, hidden_dim=200, max_seq_len=128)


# Keys and values (magnitudes up to a few units) from fp32 sums in another order than OpenBLAS's, whose
# kernels differ between CPUs: a few ulps apart (measured here: 3.6e-7 at most).
KEYS_ATOL = 5e-6


def bf16_batches() -> bool:
    """Whether a bf16 step of any number of ids runs natively here (AVX512-BF16 pairs, no AMX)."""
    kernel = attention.attention_kernel()
    return kernel is not None and bool(kernel.coa_row_step_pairs()) and not attention.has_amx()


def dtype_of(cache_dtype: torch.dtype) -> str:
    return "bf16" if cache_dtype == torch.bfloat16 else "fp32"


def torch_step():
    """The TorchScript step for one row as well (no native step)."""
    return mock.patch.object(model_module.DecodeWeights, "row_step", lambda self: None)


@contextlib.contextmanager
def recorded_threads():
    """The thread count each native step is given (`coa_row_step`'s `threads`), in order."""
    calls, real = [], attention.attention_kernel()

    class Recorder:
        def coa_row_step(self, *args):
            calls.append(args[-3])
            return real.coa_row_step(*args)

        def __getattr__(self, name):
            return getattr(real, name)

    with mock.patch.object(attention, "attention_kernel", Recorder):
        yield calls


@contextlib.contextmanager
def threads_of(generation: int, attending: int):
    """Generation's threads (torch's count here) and the fused attention's (`attention.use_threads`)."""
    before = torch.get_num_threads()
    torch.set_num_threads(generation)
    attention.use_threads(attending)
    try:
        yield
    finally:
        attention.use_threads(None)
        torch.set_num_threads(before)


class RowStepTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        require_kernels("native kernels")

    def decode_both(self, model, prompts, feeding, steps=4, fed=1, dtype="fp32"):
        """Prefills `prompts` into one batch, then for `steps` steps feeds `fed` ids (a speculative step's
        last id and draft, when more than one) to row `feeding` only (the others are holes, as the
        sampler's finished rows are) natively and in torch ops, on copies of one cache. Returns both
        logits per step and both caches."""
        cache_dtype = torch.bfloat16 if dtype == "bf16" else torch.float32
        cache = KVCache.empty(model.config, len(prompts), 64, cache_dtype, holding=max(map(len, prompts)))
        width = max(map(len, prompts))
        ids = torch.tensor([p + [0] * (width - len(p)) for p in prompts])
        counts = [fed * int(i == feeding) for i in range(len(prompts))]
        with torch.no_grad(), autocast(dtype):
            model(ids, cache, torch.tensor([len(p) for p in prompts]))
            copy = KVCache([k.clone() for k in cache.keys], [v.clone() for v in cache.values], cache.lens.clone(), 64)
            caches = [cache, copy]
            logits = [[], []]
            for s in range(steps):
                step = torch.tensor([[3 + 7 * s + j for j in range(fed)]] * len(prompts))
                logits[0].append(model.decode(step, caches[0], counts=counts))
                with torch_step():
                    logits[1].append(model.decode(step, caches[1], counts=counts))
        return logits, caches

    def test_it_matches_the_torchscript_step_and_writes_only_its_row(self):
        for name, model in (("micro", micro_model(seed=11)), ("odd shapes", Transformer(ODD).eval())):
            torch.manual_seed(1)
            prompts = [[1, 5, 9, 13], [1, *range(20, 50)], [1, 7]]
            calls = []
            real = RowStep.__call__
            spy = mock.patch.object(RowStep, "__call__", lambda *a: calls.append((a[1], a[3])) or real(*a))
            with self.subTest(model=name), spy:
                (native, scripted), (ours, theirs) = self.decode_both(model, prompts, feeding=1)
                self.assertEqual(calls, [([1], [31]), ([1], [32]), ([1], [33]), ([1], [34])])  # row 1, natively
                for a, b in zip(native, scripted):
                    self.assertEqual(a.shape, (1, model.config.vocab_size))
                    torch.testing.assert_close(a, b, rtol=0, atol=1e-5)
                self.assertEqual(ours.lens.tolist(), [4, 35, 2])
                for k, v, k2, v2 in zip(ours.keys, ours.values, theirs.keys, theirs.values):
                    torch.testing.assert_close(k[1, :, :35], k2[1, :, :35], rtol=0, atol=KEYS_ATOL)
                    torch.testing.assert_close(v[1, :, :35], v2[1, :, :35], rtol=0, atol=KEYS_ATOL)
                    # The holes' rows untouched, bit for bit.
                    self.assertTrue(torch.equal(k[[0, 2]], k2[[0, 2]]) and torch.equal(v[[0, 2]], v2[[0, 2]]))

    def test_a_drafted_step_of_one_row_matches_too(self):
        """Three ids at once (a speculative step: the last id and a draft of two), causal among
        themselves: each position's logits and keys as the TorchScript step computes them."""
        model = micro_model(seed=15)
        prompts = [[1, 5], [1, *range(20, 45)]]
        (native, scripted), (ours, theirs) = self.decode_both(model, prompts, feeding=1, steps=3, fed=3)
        for a, b in zip(native, scripted):
            self.assertEqual(a.shape, (3, model.config.vocab_size))
            torch.testing.assert_close(a, b, rtol=0, atol=1e-5)
        self.assertEqual(ours.lens.tolist(), [2, 35])
        for k, k2 in zip(ours.keys, theirs.keys):
            torch.testing.assert_close(k[1, :, :35], k2[1, :, :35], rtol=0, atol=KEYS_ATOL)

    def test_in_bf16_it_rounds_as_the_bf16_step_does(self):
        """A bf16 engine's one-row step (bf16 matrices and cache): each projection's input and output, the
        queries, keys, attention output and SwiGLU rounded to bf16 where torch's bf16 ops round them. Its
        fp32 sums run in another order than OpenBLAS's matrix-vector products (`RowWeights`), so an
        output may land one bf16 step (2^-8 relative) away; logits and keys stay within 2^-6 of the
        largest (measured here: at most 0.15 of that)."""
        model = micro_model(seed=16)
        (native, scripted), (ours, theirs) = self.decode_both(model, [[1, 5], [1, *range(20, 45)]], 1, dtype="bf16")
        for a, b in zip(native, scripted):
            self.assertEqual(a.shape, (1, model.config.vocab_size))
            self.assertTrue(torch.equal(a.float(), a.bfloat16().float()))  # bf16 values, in fp32 or bf16
            torch.testing.assert_close(a.float(), b.float(), rtol=0, atol=2**-6 * b.abs().max().item())
        for k, k2 in zip(ours.keys, theirs.keys):
            self.assertEqual(k.dtype, torch.bfloat16)
            held, expected = k[1, :, :30].float(), k2[1, :, :30].float()
            torch.testing.assert_close(held, expected, rtol=0, atol=2**-6 * expected.abs().max().item())
        self.assertTrue(torch.equal(ours.keys[0][0], theirs.keys[0][0]))  # the hole untouched

    def test_a_drafted_step_equals_its_ids_one_at_a_time(self):
        """Each id of a drafted step runs the same sums as alone, attending up to its own position: the
        same logits and keys as feeding the ids in turn (bit for bit here; allowed a last fp32 bit, or
        in bf16 one rounding step, in case a compiler orders a loop differently in the two)."""
        model = micro_model(seed=17)
        for dtype, cache_dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
            caches = [KVCache.empty(model.config, 1, 64, cache_dtype) for _ in range(2)]
            with self.subTest(dtype=dtype), torch.no_grad(), autocast(dtype):
                for cache in caches:
                    model(torch.tensor([[1, *range(30, 60)]]), cache)
                drafted = model.decode(torch.tensor([[11, 12, 13, 14]]), caches[0])[0].float()
                alone = torch.cat([model.decode(torch.tensor([i]), caches[1]) for i in (11, 12, 13, 14)]).float()
                atol = 1e-6 if dtype == "fp32" else 2**-7 * alone.abs().max().item()
                torch.testing.assert_close(drafted, alone, rtol=0, atol=atol)
                for k, k2 in zip(caches[0].keys, caches[1].keys):
                    torch.testing.assert_close(k.float(), k2.float(), rtol=0, atol=atol)

    def test_the_same_bits_on_one_thread_or_two(self):
        """The step runs on the threads it is given (a lone row: the fused attention's); how its blocks and
        heads are shared among them changes no sum."""
        model = micro_model(seed=12)
        outs = []
        with recorded_threads() as calls:
            for n in (1, 2):
                with threads_of(n, n):
                    (native, _), _ = self.decode_both(model, [[1, *range(30, 70)]], feeding=0, steps=3)
                outs.append(torch.cat(native))
        self.assertEqual(calls, [1, 1, 1, 2, 2, 2])
        self.assertTrue(torch.equal(outs[0], outs[1]))

    def test_a_lone_row_takes_the_attentions_threads(self):
        """Generation's threads leave a core to the client running beside the engine; a lone row's client
        is waiting for it, so its step takes the fused attention's threads (all of `--threads`)."""
        model = micro_model(seed=14)
        for idle, threads in ((False, [2, 1]), (True, [2, 2])):
            cache = KVCache.empty(model.config, 2, 64, torch.float32, holding=4)
            # A batch also takes them while the cores beyond generation's idle (`spare_cores`).
            with recorded_threads() as calls, threads_of(1, 2), torch.no_grad():
                with mock.patch.object(row_step.SPARE, "idle", lambda: idle):
                    model(torch.tensor([[1, 5, 9, 13], [1, 7, 8, 9]]), cache)
                    model.decode(torch.tensor([[3], [4]]), cache, counts=[1, 0])  # the other row a hole
                    model.decode(torch.tensor([3, 4]), cache)
            self.assertEqual(calls, threads)

    def test_rows_drafts_and_holes_the_same_bits_on_one_thread_or_two(self):
        """Each attention job (a row and head) rotates and stores its own head's ids; every thread computes
        the norms itself: the same logits, keys and values whatever the threads, in fp32 and bf16."""
        model = micro_model(seed=13)
        prompts = [[1, 5, 9, 13], [1, *range(20, 50)], [1, 7], [1, *range(60, 75)]]
        width = max(map(len, prompts))
        ids = torch.tensor([p + [0] * (width - len(p)) for p in prompts])
        step = torch.tensor([[3, 4, 5]] * len(prompts))
        with recorded_threads() as calls:
            for dtype, cache_dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
                results = []
                for n in (1, 2):
                    cache = KVCache.empty(model.config, len(prompts), 64, cache_dtype, holding=width)
                    with threads_of(n, n), torch.no_grad(), autocast(dtype):
                        model(ids, cache, torch.tensor([len(p) for p in prompts]))
                        logits = model.decode(step, cache, counts=[1, 2, 0, 2])  # drafts, a hole
                    results.append((logits, cache))
                (a, ours), (b, theirs) = results
                with self.subTest(dtype=dtype):
                    self.assertEqual(a.shape, (5, model.config.vocab_size))
                    self.assertTrue(torch.equal(a, b))
                    for k, v, k2, v2 in zip(ours.keys, ours.values, theirs.keys, theirs.values):
                        self.assertTrue(torch.equal(k, k2) and torch.equal(v, v2))
        self.assertEqual(calls, [1, 2, 1, 2])  # natively, both dtypes on both thread counts

    def test_several_rows_each_as_alone(self):
        """Rows at different positions, one feeding a draft and one a hole, in one native call: each row's
        logits and keys as the TorchScript step computes them, and bit for bit as when each row runs on
        its own (every id's sums are its own; each row attends over its own positions)."""
        model = micro_model(seed=18)
        prompts = [[1, *range(20, 50)], [1, 5], [1, 7, 8, 9, 10], [1, *range(60, 72)]]
        counts = [1, 3, 0, 2]  # row 2 is a hole
        width = max(map(len, prompts))
        padded = torch.tensor([p + [0] * (width - len(p)) for p in prompts])
        lengths = torch.tensor([len(p) for p in prompts])
        step_ids = torch.tensor([[40 + 5 * r + j for j in range(3)] for r in range(4)])
        outs = []
        for scripted, solo in ((False, False), (True, False), (False, True)):
            cache = KVCache.empty(model.config, 4, 64, torch.float32, holding=width)
            with torch.no_grad(), autocast("fp32"), (torch_step() if scripted else mock.MagicMock()):
                model(padded, cache, lengths)
                if solo:  # one row at a time, the others holes for that step
                    parts = []
                    for r, c in enumerate(counts):
                        if c:
                            alone = [c if i == r else 0 for i in range(4)]
                            parts.append(model.decode(step_ids, cache, counts=alone))
                    logits = torch.cat(parts)
                else:
                    logits = model.decode(step_ids, cache, counts=counts)
            outs.append((logits, [k.clone() for k in cache.keys], cache.lens.tolist()))
        (native, keys, lens), (scripted, their_keys, their_lens), (solo, solo_keys, solo_lens) = outs
        self.assertEqual(native.shape, (6, model.config.vocab_size))
        self.assertEqual(lens, [32, 5, 5, 15])
        self.assertEqual(lens, their_lens)
        torch.testing.assert_close(native, scripted, rtol=0, atol=1e-5)
        self.assertTrue(torch.equal(native, solo))
        for k, k2, k3 in zip(keys, their_keys, solo_keys):
            for r, n in enumerate(lens):
                torch.testing.assert_close(k[r, :, :n], k2[r, :, :n], rtol=0, atol=KEYS_ATOL)
                self.assertTrue(torch.equal(k[r, :, :n], k3[r, :, :n]))

    def test_taken_only_for_a_few_ids_beside_the_fused_attention(self):
        model = micro_model(seed=13)
        calls = []
        real = RowStep.__call__
        most, most_bf16 = model_module.ROW_STEP_IDS[torch.float32], model_module.ROW_STEP_IDS[torch.bfloat16]
        with torch.no_grad(), mock.patch.object(RowStep, "__call__", lambda *a: calls.append(1) or real(*a)):
            for dtype, cache_dtype, rows, t in (
                ("fp32", torch.float32, most + 1, 1),
                ("fp32", torch.float32, most // 2 + 1, 2),
                ("bf16", torch.float32, 1, 1),  # a bf16 step over an fp32 cache: no fused attention
                ("bf16", torch.bfloat16, most_bf16, 1),
                ("bf16", torch.bfloat16, most_bf16 + 1, 1),
                ("fp32", torch.float32, 1, 2),
                ("fp32", torch.float32, most // 2, 2),
            ):
                with self.subTest(dtype=dtype, cache=cache_dtype, rows=rows, ids=t), autocast(dtype):
                    cache = KVCache.empty(model.config, rows, 32, cache_dtype)
                    model(torch.tensor([[1, 40, 41]] * rows), cache)
                    calls.clear()
                    model.decode(torch.full((rows, t), 50), cache)
                    # fp32 with the system OpenBLAS's sgemm, bf16 in pairs without AMX: any number of ids
                    # (`RowStep.batches`).
                    limit = (1 << 20 if blas.sgemm() else most) if dtype == "fp32" else (1 << 20 if bf16_batches() else most_bf16)
                    self.assertEqual(len(calls), int(rows * t <= limit and dtype_of(cache_dtype) == dtype))
            with mock.patch.object(attention, "attention_kernel", lambda: None), autocast("fp32"):
                self.assertIsNone(model_module.DecodeWeights(model, torch.float32, None).row_step())

    def test_pairs_beside_amx_take_steps_up_to_their_limit(self):
        """On a CPU with AMX (patched in here) bf16 steps in pairs run natively up to
        `PAIRS_IDS_BESIDE_AMX` ids, rows of one id or drafted steps alike; past it TorchScript's, whose
        products run on AMX tiles."""
        kernel = attention.attention_kernel()
        if kernel is None or not kernel.coa_row_step_pairs():
            self.skipTest("bf16 products in pairs need AVX512-BF16")
        model = micro_model(seed=13)
        most = model_module.PAIRS_IDS_BESIDE_AMX
        calls = []
        real = RowStep.__call__
        with (
            torch.no_grad(),
            autocast("bf16"),
            mock.patch.object(attention, "has_amx", lambda: True),
            mock.patch.object(RowStep, "__call__", lambda *a: calls.append(1) or real(*a)),
        ):
            for rows, t in ((most, 1), (most // 4, 4), (most + 1, 1), (most // 4 + 1, 4)):
                with self.subTest(rows=rows, ids=t):
                    cache = KVCache.empty(model.config, rows, 32, torch.bfloat16)
                    model(torch.tensor([[1, 40, 41]] * rows), cache)
                    calls.clear()
                    model.decode(torch.full((rows, t), 50), cache)
                    self.assertEqual(len(calls), int(rows * t <= most))

    @unittest.skipIf(blas.sgemm() is None, "torch's BLAS here is not the system OpenBLAS: no batched native step")
    def test_a_batch_of_many_ids_matches_the_torchscript_step(self):
        """A batch's step in fp32 (`RowStep.batches`): rows feeding one id, a draft, a prompt's 30 new ids
        (its last logits only, or all of them) and none (a hole), reading a shared prefix, in one native
        call whose projections run through sgemm (the output matrix's too for 16 selected ids or more):
        the logits and keys of the TorchScript step (sums in another order: within 1e-5; measured here
        4.8e-7), the same through `gemv` (`GEMM_IDS`), and bit for bit what each row reads from its own
        positions (the shared prefix holds their bits; their own are spoiled where the copy is read)."""
        model = micro_model(seed=19)
        base = [1, *range(20, 89)]  # 70 ids, 64 positions of them shared
        prompts = [[*base, 100, 101], [*base[:66], 5], [1, 7, 8], [*base, 102]]
        counts = [1, 4, 0, 30]
        width = max(map(len, prompts))
        padded = torch.tensor([p + [0] * (width - len(p)) for p in prompts])
        step_ids = torch.tensor([[40 + r + j for j in range(30)] for r in range(4)])
        for last_only, selected in (([False, False, False, True], 1 + 4 + 1), (None, 1 + 4 + 30)):
            outs = []
            for path in ("native", "torchscript", "gemv", "own positions"):
                cache = KVCache.empty(model.config, 4, 128, torch.float32, holding=width)
                calls = []
                real = RowStep.__call__
                spy = mock.patch.object(RowStep, "__call__", lambda *a, **k: calls.append(1) or real(*a, **k))
                scripted = torch_step() if path == "torchscript" else mock.MagicMock()
                gemv = mock.patch.object(row_step, "GEMM_IDS", 1 << 20) if path == "gemv" else mock.MagicMock()
                with torch.no_grad(), autocast("fp32"), spy, scripted, gemv:
                    model(padded, cache, torch.tensor([len(p) for p in prompts]))
                    shared = SharedPrefix.of_row(cache, 0, base)
                    self.assertEqual([shared.adopt(cache, r, prompts[r]) for r in (1, 3)], [64, 64])
                    reading = [0, 0, 0, 0] if path == "own positions" else [64, 64, 0, 64]
                    if any(reading):  # the rows' own copies spoiled: what they read comes from the shared one
                        for kv in (*cache.keys, *cache.values):
                            kv[[0, 1, 3], :, :64] = float("nan")
                    logits = model.decode(step_ids, cache, counts=counts, last_only=last_only, shared=shared,
                                          shared_rows=reading)  # fmt: skip
                self.assertEqual(len(calls), int(path != "torchscript"))
                outs.append((logits, cache))
            (native, ours), (scripted, theirs), (gemv, _), (own, _) = outs
            with self.subTest(selected=selected):
                self.assertEqual(native.shape, (selected, model.config.vocab_size))
                self.assertEqual(ours.lens.tolist(), [73, 71, 3, 101])
                torch.testing.assert_close(native, scripted, rtol=0, atol=1e-5)
                torch.testing.assert_close(native, gemv, rtol=0, atol=1e-5)
                self.assertTrue(torch.equal(native, own))
                for k, k2 in zip((*ours.keys, *ours.values), (*theirs.keys, *theirs.values)):
                    for r, n in enumerate(ours.lens.tolist()):
                        first = 0 if r == 2 else 64
                        torch.testing.assert_close(k[r, :, first:n], k2[r, :, first:n], rtol=0, atol=KEYS_ATOL)

    def test_a_selection_or_shared_prefix_that_does_not_fit_is_refused(self):
        model = micro_model(seed=20)
        with torch.no_grad(), autocast("fp32"):
            step = model.decode_weights().row_step()
            cache = KVCache.empty(model.config, 2, 48, torch.float32)
            cache.lens = torch.tensor([40, 20])
            keys, values = cache.row(0, 32)
            step([0, 1], [[5], [6, 7]], [40, 20], cache.keys, cache.values, [0, 2], (keys, values, [32, 16]))  # fits
            for select, shared in (
                ([3], None), ([-1], None), ([], None),
                (None, (keys, values, [32])),  # a count per row
                (None, (keys, values, [48, 0])),  # more than the copy holds
                (None, (keys, values, [32, 32])),  # more than row 1 holds before its ids
                (None, (keys, values, [8, 0])),  # not whole blocks
                (None, (keys[:1], values[:1], [16, 0])),  # a layer short
                (None, ([keys[0], keys[1][:, :16]], [values[0], values[1][:, :16]], [16, 0])),  # layers unlike
                (None, ([k.bfloat16() for k in keys], values, [16, 0])),
            ):
                with self.subTest(select=select, shared=shared and shared[2]), self.assertRaises(ValueError):
                    step([0, 1], [[5], [6, 7]], [40, 20], cache.keys, cache.values, select, shared)

    def test_packed_blocks(self):
        w = torch.arange(3 * 70, dtype=torch.float32).view(3, 70)
        p = packed(w)
        self.assertEqual(tuple(p.shape), (2, 3, BLOCK))
        self.assertTrue(torch.equal(p[0], w[:, :BLOCK]))
        self.assertTrue(torch.equal(p[1, :, : 70 - BLOCK], w[:, BLOCK:]))
        self.assertTrue(torch.equal(p[1, :, 70 - BLOCK :], torch.zeros(3, 2 * BLOCK - 70)))

    def test_packed_in_pairs(self):
        """AVX512-BF16's layout (`gemv_pairs`): block b, pair i, column c holds rows 2i and 2i + 1 of column
        64 b + c side by side; an odd row count and the last block padded with zeros."""
        w = torch.arange(3 * 70, dtype=torch.float32).view(3, 70).bfloat16()
        p = packed(w, pairs=True)
        self.assertEqual((tuple(p.shape), p.dtype), ((2, 2, BLOCK, 2), torch.bfloat16))
        even = torch.cat([w, torch.zeros(1, 70, dtype=w.dtype)])
        for b, i, c, e in ((0, 0, 0, 0), (0, 0, 5, 1), (0, 1, 63, 0), (1, 0, 70 - BLOCK - 1, 1), (1, 1, 3, 0)):
            self.assertEqual(p[b, i, c, e].item(), even[2 * i + e, BLOCK * b + c].item())
        self.assertTrue(torch.equal(p[0, 1, :, 1], torch.zeros(BLOCK, dtype=w.dtype)))  # the padded row
        self.assertTrue(torch.equal(p[1, :, 70 - BLOCK :], torch.zeros(2, 2 * BLOCK - 70, 2, dtype=w.dtype)))

    def test_a_bf16_batch_in_pairs_matches_the_torchscript_step_and_each_row_alone(self):
        """Where bf16 steps multiply in pairs (AVX512-BF16, no AMX: `RowStep.batches`), a batch of 14 rows
        (more than a tile of 6 ids) feeding one id, a draft, a prompt's 20 new ids or none (a hole) runs
        in one native call: logits and keys within 2^-6 of the largest of the TorchScript step's (sums in
        another order, as a lone row's), and each row's bit for bit what it computes alone, whatever
        shares its tiles. 201 hidden units: the down matrix's input odd (its last pair padded with zeros)."""
        if not bf16_batches():
            self.skipTest("bf16 products in pairs need AVX512-BF16 without AMX")
        torch.manual_seed(23)
        model = Transformer(ModelConfig(vocab_size=100, dim=64, n_layers=2, n_heads=2, hidden_dim=201, max_seq_len=128)).eval()
        counts = [1, 4, 0, 20, *[1] * 10]
        prompts = [[1, *range(5, 5 + 3 * r % 40)] for r in range(len(counts))]
        width, rows = max(map(len, prompts)), len(counts)
        padded = torch.tensor([p + [0] * (width - len(p)) for p in prompts])
        step_ids = torch.tensor([[(7 * r + j) % 97 + 2 for j in range(20)] for r in range(rows)])
        outs = []
        for path in ("native", "torchscript", "alone", "last only"):
            cache = KVCache.empty(model.config, rows, 64, torch.bfloat16, holding=width)
            calls = []
            real = RowStep.__call__
            spy = mock.patch.object(RowStep, "__call__", lambda *a, **k: calls.append(1) or real(*a, **k))
            with torch.no_grad(), autocast("bf16"), spy, (torch_step() if path == "torchscript" else mock.MagicMock()):
                model(padded, cache, torch.tensor([len(p) for p in prompts]))
                if path == "alone":
                    parts = [model.decode(step_ids, cache, counts=[c if i == r else 0 for i in range(rows)])
                             for r, c in enumerate(counts) if c]  # fmt: skip
                    logits = torch.cat(parts)
                else:  # "last only": the prompt's row returns its last logits only, as a stepped prefill's
                    last_only = [r == 3 for r in range(rows)] if path == "last only" else None
                    logits = model.decode(step_ids, cache, counts=counts, last_only=last_only)
            self.assertEqual(len(calls), {"native": 1, "torchscript": 0, "alone": rows - 1, "last only": 1}[path])
            outs.append((logits.float(), cache))
        (native, ours), (scripted, theirs), (alone, solo), (last, _) = outs
        self.assertTrue(torch.equal(last, native[[*range(5), 24, *range(25, 35)]]))
        self.assertEqual(native.shape, (sum(counts), 100))
        torch.testing.assert_close(native, scripted, rtol=0, atol=2**-6 * scripted.abs().max().item())
        self.assertTrue(torch.equal(native, alone))
        for k, k2, k3 in zip((*ours.keys, *ours.values), (*theirs.keys, *theirs.values), (*solo.keys, *solo.values)):
            for r, n in enumerate(ours.lens.tolist()):
                held, expected = k[r, :, :n].float(), k2[r, :, :n].float()
                torch.testing.assert_close(held, expected, rtol=0, atol=2**-6 * expected.abs().max().item())
                self.assertTrue(torch.equal(k[r, :, :n], k3[r, :, :n]))

    def test_what_does_not_fit_the_model_or_the_cache_is_refused(self):
        model = micro_model(seed=14)
        with torch.no_grad(), autocast("fp32"):
            step = model.decode_weights().row_step()
            cache = KVCache.empty(model.config, 2, 16, torch.float32)
            step([0, 1], [[5], [6, 7]], [3, 14], cache.keys, cache.values)  # fits: the last positions
            for rows, ids, starts in (
                ([0], [[5]], [16]), ([0], [[5, 6]], [15]), ([0], [[5]], [-1]), ([0], [[model.config.vocab_size]], [3]),
                ([0], [[]], [3]), ([2], [[5]], [3]), ([1, 1], [[5], [6]], [3, 4]), ([1, 0], [[5], [6]], [3, 4]),
                ([], [], []), ([0, 1], [[5]], [3]),
            ):
                with self.subTest(rows=rows, ids=ids, starts=starts), self.assertRaises(ValueError):
                    step(rows, ids, starts, cache.keys, cache.values)
            # Another dtype, or a layout the kernel would misread (head_dim not contiguous).
            for keys in ([k.bfloat16() for k in cache.keys], [k.transpose(2, 3) for k in cache.keys]):
                with self.subTest(keys=(keys[0].dtype, keys[0].stride())), self.assertRaises(ValueError):
                    step([0], [[5]], [3], keys, cache.values)


if __name__ == "__main__":
    unittest.main()
