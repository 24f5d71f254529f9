import unittest
from unittest import mock

import torch

from coa_engine import attention
from coa_engine import model as model_module
from coa_engine.model import PRESETS, KVCache, Transformer, matmul_dtype, preset_config
from coa_engine.precision import autocast

from .helpers import TOKENIZER, micro_model


class ModelTest(unittest.TestCase):
    def test_preset_sizes(self):
        expected = {"micro": (0.3e6, 0.7e6), "tiny": (3e6, 5e6), "small": (20e6, 30e6)}
        for name in PRESETS:
            with self.subTest(name=name):
                with _no_init():
                    n = Transformer(preset_config(name, TOKENIZER.vocab_size)).num_params()
                lo, hi = expected[name]
                self.assertTrue(lo <= n <= hi, f"{name}: {n} params")

    def test_cached_decoding_matches_full_forward(self):
        model = micro_model()
        prompts = [[1, 40, 41, 42, 43, 44], [1, 50, 51]]
        continuation = [[60, 61, 62], [70, 71, 72]]
        with torch.no_grad():
            lengths = torch.tensor([len(p) for p in prompts])
            ids = torch.zeros(2, 6, dtype=torch.long)
            for i, p in enumerate(prompts):
                ids[i, : len(p)] = torch.tensor(p)
            cache = KVCache.empty(model.config, 2, 16, torch.float32)
            model(ids, cache, lengths)
            stepped = [model.decode(torch.tensor([c[k] for c in continuation]), cache) for k in range(3)]
            for row in range(2):
                full = model(torch.tensor([prompts[row] + continuation[row]]))[0]
                for k in range(3):
                    pos = len(prompts[row]) + k
                    torch.testing.assert_close(stepped[k][row], full[pos], atol=1e-4, rtol=1e-4)

    def test_attention_in_query_blocks_matches_the_whole_matrix(self):
        # 600 positions are three blocks of queries; the reference attends over the whole matrix.
        model = micro_model(max_seq_len=1024)
        ids = torch.randint(3, TOKENIZER.vocab_size, (2, 600))

        def run(block: int):
            saved, model_module.QUERY_BLOCK = model_module.QUERY_BLOCK, block
            try:
                model.zero_grad(set_to_none=True)
                logits = model(ids)
                logits.float().square().mean().backward()
                with torch.no_grad():
                    cache = KVCache.empty(model.config, 2, 600, torch.float32)
                    model(ids[:, :300], cache)
                    extended = model.extend(ids[:, 300:], cache, 300)
                return logits.detach(), extended, [p.grad.clone() for p in model.parameters()]
            finally:
                model_module.QUERY_BLOCK = saved

        blocked, whole = run(model_module.QUERY_BLOCK), run(10_000)
        self.assertLess(model_module.QUERY_BLOCK, 300)
        torch.testing.assert_close(blocked[0], whole[0], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(blocked[1], whole[0][:, 300:], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(blocked[1], whole[1], atol=1e-5, rtol=1e-5)
        for a, b in zip(blocked[2], whole[2]):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-4)

    def test_cache_select_and_merge_keep_rows(self):
        model = micro_model()
        with torch.no_grad():
            a = KVCache.empty(model.config, 2, 8, torch.float32)
            model(torch.tensor([[1, 2, 3], [1, 4, 5]]), a)
            b = KVCache.empty(model.config, 1, 12, torch.float32)
            model(torch.tensor([[1, 6]]), b)
            merged = a.select(torch.tensor([1])).merge(b)
            self.assertEqual(merged.capacity, 12)
            self.assertEqual(merged.lens.tolist(), [3, 2])
            torch.testing.assert_close(merged.keys[0][0, :, :3], a.keys[0][1, :, :3])
            torch.testing.assert_close(merged.keys[0][1, :, :2], b.keys[0][0, :, :2])

    def test_extend_stays_exact_with_the_kernel_and_without(self):
        """80 new ids after 150 cached: the real positions' logits, the row's length and the next decoded
        token are those of the whole sequence, whether the fused kernel attends (on a CPU where it
        builds) or torch's ops do. Unpadded in fp32; in bf16 padded to 128 (EXTEND_BLOCK), the kernel's
        logits within bf16 rounding of torch's (each rounds scores and weights where the other does)."""
        self.assertEqual(model_module.EXTEND_BLOCK, 64)
        model = micro_model(max_seq_len=512)
        ids = torch.randint(3, TOKENIZER.vocab_size, (1, 230))
        kernels = {"kernel": attention.attention_kernel(), "torch ops": None}

        def extended(dtype, kernel, last):
            cache_dtype = torch.bfloat16 if dtype == "bf16" else torch.float32
            fused = mock.patch.object(attention, "attend_rows_fused", wraps=attention.attend_rows_fused)
            with torch.no_grad(), autocast(dtype), mock.patch.object(attention, "attention_kernel", lambda: kernel):
                cache = KVCache.empty(model.config, 1, 400, cache_dtype, holding=150)
                model(ids[:, :150], cache)
                with fused as calls:
                    out = model.extend(ids[:, 150:], cache, 150, last=last)
                self.assertEqual(calls.call_count, model.config.n_layers if kernel else 0)
                self.assertEqual(cache.lens.tolist(), [230])
                fed = 128 if dtype == "bf16" else 80
                held = 150 + model_module.GROW_POSITIONS  # as `empty` allocated, grown once by `extend`
                self.assertEqual(cache.positions, model_module.grown_positions(held, 150 + fed, 400))
                return out.float(), model.decode(torch.tensor([7]), cache).float()

        with torch.no_grad():
            full = model(torch.cat((ids, torch.tensor([[7]])), dim=1))
        for last in (False, True):
            expected = full[:, 229] if last else full[:, 150:230]
            for name, kernel in kernels.items():
                with self.subTest(last=last, path=name):
                    out, step = extended("fp32", kernel, last)
                    # Other GEMM shapes, other last bits (the decode tests allow 1e-4 too); a pad
                    # attended to would move these logits by far more.
                    torch.testing.assert_close(out, expected, atol=1e-4, rtol=1e-4)
                    torch.testing.assert_close(step, full[:, 230], atol=1e-4, rtol=1e-4)
            if kernels["kernel"] is not None:
                fused, unfused = (extended("bf16", kernel, last) for kernel in kernels.values())
                for a, b in zip(fused, unfused):
                    self.assertLess((a - b).abs().max().item(), 2**-5 * b.abs().max().item())

    def test_cache_layout_round_trips(self):
        """Keys and values lie [rows, heads, positions, head_dim] (the fused kernel's layout); `write`,
        `attended`, `row` and `put_row` give back what was written."""
        model = micro_model()
        c = model.config
        cache = KVCache.empty(c, 2, 16, torch.float32)
        k, v = torch.randn(2, c.n_heads, 5, c.head_dim), torch.randn(2, c.n_heads, 5, c.head_dim)
        cache.write(0, k, v, start=3)
        self.assertEqual(tuple(cache.values[0].shape), (2, c.n_heads, 16, c.head_dim))
        keys, values = cache.attended(0, 8)
        torch.testing.assert_close(keys[:, :, 3:8], k, rtol=0, atol=0)
        torch.testing.assert_close(values[:, :, 3:8], v, rtol=0, atol=0)
        self.assertTrue(bool((values[:, :, :3] == 0).all()))
        other = KVCache.empty(c, 1, 16, torch.float32)
        other.put_row(0, *cache.row(1, 8), 8)
        torch.testing.assert_close(other.attended(0, 8)[1][0], values[1], rtol=0, atol=0)
        torch.testing.assert_close(other.attended(0, 8)[0][0], keys[1], rtol=0, atol=0)

    def test_an_emptied_row_feeds_nothing_and_a_joining_row_fills_it(self):
        """A row that finishes is emptied in place (`vacate`: length 0, the other rows where they were)
        and a step feeds it nothing (count 0); a row that joins fills it (`merge(into=)`) without moving
        any other, or an extend writes it in place (`row_view`). Every row decodes what it decodes
        alone, with the kernel and in torch ops."""
        model = micro_model()
        prompts = [[1, 2, 3], [1, 4, 5, 6], [1, 7]]

        def alone(ids):
            return model(torch.tensor([ids]))[0, -1]

        for name, kernel in {"kernel": attention.attention_kernel(), "torch ops": None}.items():
            with self.subTest(attention=name), torch.no_grad(), mock.patch.object(
                attention, "attention_kernel", lambda: kernel
            ):
                cache = KVCache.empty(model.config, 3, 40, torch.float32)
                ids = torch.tensor([p + [0] * (4 - len(p)) for p in prompts])
                model(ids, cache, torch.tensor([len(p) for p in prompts]))
                storage = cache.keys[0].data_ptr()
                cache.vacate([1])
                self.assertEqual(cache.lens.tolist(), [3, 0, 2])
                logits = model.decode(torch.tensor([[9], [0], [10]]), cache, counts=[1, 0, 1])
                self.assertEqual(cache.lens.tolist(), [4, 0, 3])
                torch.testing.assert_close(logits, torch.stack([alone([1, 2, 3, 9]), alone([1, 7, 10])]), atol=1e-4, rtol=0)
                joining = KVCache.empty(model.config, 1, 40, torch.float32)
                model(torch.tensor([[1, 11, 12]]), joining)
                with self.assertRaisesRegex(ValueError, "distinct and empty"):
                    cache.merge(joining, into=[0])
                cache.merge(joining, into=[1])
                self.assertEqual((cache.lens.tolist(), cache.keys[0].data_ptr()), ([4, 3, 3], storage))
                logits = model.decode(torch.tensor([13, 14, 15]), cache)
                expected = [alone([1, 2, 3, 9, 13]), alone([1, 11, 12, 14]), alone([1, 7, 10, 15])]
                torch.testing.assert_close(logits, torch.stack(expected), atol=1e-4, rtol=0)
                # A prefix-cache hit extends straight into an emptied row: nothing copied by `merge`.
                cache.vacate([0])
                keys, values = cache.row(1, 4)  # row 1's first turn, [1, 11, 12, 14], as the prefix cache keeps it
                with self.assertRaisesRegex(ValueError, "neither empty"):
                    cache.row_view(1, 40)
                view = cache.row_view(0, 40)
                view.put_row(0, keys, values, 4)
                last = model.extend(torch.tensor([[16, 17]]), view, 4, last=True)
                torch.testing.assert_close(last[0], alone([1, 11, 12, 14, 16, 17]), atol=1e-4, rtol=0)
                write = torch.Tensor.__setitem__

                def no_cache_writes(t, index, value):
                    if t.dim() == 4:  # keys or values (the lengths may be written)
                        raise AssertionError("merge copied a row that was in place")
                    write(t, index, value)

                with mock.patch.object(torch.Tensor, "__setitem__", no_cache_writes):
                    cache.merge(view, into=[0])
                self.assertEqual((cache.lens.tolist(), cache.keys[0].data_ptr()), ([6, 4, 4], storage))
                logits = model.decode(torch.tensor([18, 19, 20]), cache)
                expected = [alone([1, 11, 12, 14, 16, 17, 18]), alone([1, 11, 12, 14, 19]), alone([1, 7, 10, 15, 20])]
                torch.testing.assert_close(logits, torch.stack(expected), atol=1e-4, rtol=0)
                cache.vacate([2])  # an empty row at the end leaves the batch
                self.assertEqual((cache.rows, cache.lens.tolist()), (2, [7, 5]))
                cache.vacate([0, 1])
                self.assertEqual(cache.rows, 0)

    def test_cache_compact_and_merge_work_in_place(self):
        """Rows leave by moving the last ones into the gaps and join into the room they left: the
        allocation is reused, and every kept row keeps its keys, values and length."""
        model = micro_model()
        with torch.no_grad():
            cache = KVCache.empty(model.config, 4, 10, torch.float32)
            model(torch.tensor([[1, 2, 3], [1, 4, 5], [1, 6, 7], [1, 8, 9]]), cache, torch.tensor([3, 2, 3, 1]))
            before = [k.clone() for k in cache.keys]
            storage = cache.keys[0].data_ptr()
            cache.compact(torch.tensor([0, 3, 2]))  # row 1 left; row 3 moves into its place
            self.assertEqual(cache.lens.tolist(), [3, 1, 3])
            for j, (source, n) in enumerate([(0, 3), (3, 1), (2, 3)]):  # the positions each row holds
                torch.testing.assert_close(cache.keys[1][j, :, :n], before[1][source, :, :n])
            extra = KVCache.empty(model.config, 1, 6, torch.float32)
            model(torch.tensor([[1, 11]]), extra)
            cache.merge(extra)
            self.assertEqual((cache.rows, cache.allocated_rows, cache.capacity), (4, 4, 10))
            self.assertEqual(cache.keys[0].data_ptr(), storage)
            self.assertEqual(cache.lens.tolist(), [3, 1, 3, 2])
            torch.testing.assert_close(cache.values[0][3, :, :2], extra.values[0][0, :, :2])
            torch.testing.assert_close(cache.keys[1][1, :, :1], before[1][3, :, :1])
            cache.merge(extra)  # past the allocation: it grows to exactly the rows held
            self.assertEqual((cache.rows, cache.allocated_rows), (5, 5))
            for j, (source, n) in enumerate([(0, 3), (3, 1), (2, 3)]):
                torch.testing.assert_close(cache.keys[1][j, :, :n], before[1][source][:, :n])
            # Rows leave, then a longer row joins: the allocation grows its positions but keeps the
            # rows it has held, for the rows that will join again.
            cache.compact(torch.tensor([0, 1]))
            longer = KVCache.empty(model.config, 1, 80, torch.float32)
            model(torch.tensor([[1] + list(range(20, 40))]), longer)
            cache.merge(longer)
            self.assertEqual((cache.rows, cache.allocated_rows), (3, 5))
            self.assertGreaterEqual(cache.positions, 21)
            torch.testing.assert_close(cache.keys[1][2, :, :21], longer.keys[1][0, :, :21])

    def test_masks_are_built_in_the_matmul_dtype(self):
        """Under bf16 autocast an attention mask is bf16 (0 and -inf are exact), so no block casts it."""
        cpu = torch.device("cpu")
        self.assertEqual(matmul_dtype(cpu), torch.float32)
        with autocast("bf16"):
            self.assertEqual(matmul_dtype(cpu), torch.bfloat16)
        with autocast("fp32"):
            self.assertEqual(matmul_dtype(cpu), torch.float32)

    def test_cache_compact_takes_any_order(self):
        """The sampler's orders copy each moved row straight into its place; an order whose moved rows
        are also read (a swap, a repeat) reads them all before writing any."""
        model = micro_model()
        with torch.no_grad():
            cache = KVCache.empty(model.config, 3, 8, torch.float32)
            model(torch.tensor([[1, 2, 3], [1, 4, 5], [1, 6, 7]]), cache)
            before = [k.clone() for k in cache.keys]
            cache.compact(torch.tensor([2, 0, 0]))
            for j, source in enumerate([2, 0, 0]):
                torch.testing.assert_close(cache.keys[0][j], before[0][source], rtol=0, atol=0)

    def test_cache_grows_as_rows_decode(self):
        """A cache that allocates only what its rows hold grows as they decode, by GROW_POSITIONS past
        what they need and at least half again what it held, never past its capacity (all of it where
        less than GROW_POSITIONS would be left), and decodes what a fully allocated one does: bit for bit in
        fp32, whose decode attends the same span either way; in bf16, which reads the whole allocation,
        masked, the two attend different widths, and a CPU's bf16 GEMM may block a reduction of another
        length differently, so the last bits may differ. bf16 keeps 8 significant bits, so that is
        within a few of its steps at the scale of the largest value: identical on an AVX-512 BF16 EPYC,
        2 steps apart at most on an AVX2 EPYC (which emulates bf16); allowed: 2^-5 of the largest."""
        model = micro_model(max_seq_len=256)
        prompts = torch.tensor([[1, 40, 41, 42, 43], [1, 50, 51, 0, 0]])
        lengths = torch.tensor([5, 3])
        steps = torch.randint(3, TOKENIZER.vocab_size, (model_module.GROW_POSITIONS + 40, 2))
        for dtype in ("fp32", "bf16"):
            with self.subTest(dtype=dtype), torch.no_grad(), autocast(dtype, "cpu"):
                cache_dtype = torch.bfloat16 if dtype == "bf16" else torch.float32
                full = KVCache.empty(model.config, 2, 200, cache_dtype)
                lazy = KVCache.empty(model.config, 2, 200, cache_dtype, holding=5)
                model(prompts, full, lengths)
                model(prompts, lazy, lengths)
                self.assertEqual((full.positions, lazy.positions), (200, 5 + model_module.GROW_POSITIONS))
                for ids in steps:
                    expected = model.decode(ids, full)
                    atol = bf16_steps(expected, dtype)
                    torch.testing.assert_close(model.decode(ids, lazy), expected, atol=atol, rtol=0)
                # 104 steps take the longer row from 5 to 109 positions: it held 5 + 64 and grew once,
                # when it needed 70 (to 70 + 64).
                self.assertEqual(model_module.GROW_POSITIONS, 64)
                self.assertEqual((int(lazy.lens.max()), lazy.positions), (109, 134))
                expected = full.keys[1][:, :, :40]
                torch.testing.assert_close(lazy.keys[1][:, :, :40], expected, atol=bf16_steps(expected, dtype), rtol=0)
        tight = KVCache.empty(model.config, 1, 140, torch.float32, holding=4)
        self.assertEqual(tight.positions, 68)
        with self.assertRaisesRegex(ValueError, "KV cache is full"):
            tight.reserve(141)
        tight.reserve(90)
        self.assertEqual(tight.positions, 140)  # growth stops at the capacity
        # Not 64 positions short of it: the growth after would come within 64 steps, copying everything.
        self.assertEqual(KVCache.empty(model.config, 1, 100, torch.float32, holding=4).positions, 100)
        self.assertEqual(model_module.grown_positions(88, 89, 183), 183)
        self.assertEqual(model_module.grown_positions(88, 89, 217), 153)
        # A long row grows by half what is held, not by 64 positions: a few growths, each copying the batch.
        self.assertEqual(model_module.grown_positions(1000, 1001, 4000), 1500)
        self.assertEqual(model_module.grown_positions(1000, 1700, 4000), 1764)
        self.assertEqual(model_module.grown_positions(1000, 1001, 1200), 1200)
        self.assertEqual(KVCache.empty(model.config, 1, 10, torch.float32, holding=4).positions, 10)
        # With the model's context (a batch its rows attend alone), a growth reaching half of it takes it
        # all, past the rows' capacity, which then counts what the allocation holds.
        self.assertEqual(model_module.grown_positions(300, 301, 700, context=1024), 450)
        self.assertEqual(model_module.grown_positions(400, 401, 700, context=1024), 1024)
        whole = KVCache.empty(model.config, 1, 600, torch.float32, holding=4)
        whole.context = 1024
        whole.reserve(500)
        self.assertEqual((whole.positions, whole.capacity), (1024, 1024))


def bf16_steps(expected: torch.Tensor, dtype: str) -> float:
    """What two bf16 computations of `expected` that sum in different orders may differ by: a few of
    bf16's steps (8 significant bits) at its largest value's scale, 2^-5 of it; none in fp32."""
    return 0.0 if dtype == "fp32" else 2**-5 * float(expected.abs().max())


class _no_init:
    """Skips weight initialisation: counting parameters does not need it."""

    def __enter__(self):
        self.saved = torch.nn.init.normal_
        torch.nn.init.normal_ = lambda t, *a, **k: t

    def __exit__(self, *exc):
        torch.nn.init.normal_ = self.saved


if __name__ == "__main__":
    unittest.main()
