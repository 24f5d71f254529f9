"""The decoding fast path (`Transformer.decode` with `DecodeWeights`) and the prefix cache, held
against a plain full-recompute forward pass and against cold requests."""

import io
import random
import threading
import unittest
from unittest import mock

import torch
import torch.nn.functional as F

from coa_engine import attention
from coa_engine import model as model_module
from coa_engine.model import KVCache, RowWeights, project
from coa_engine.precision import autocast
from coa_engine.sampling import CachedDecoder, ModelGate, PrefixCache, Sampler, SamplingParams, common_prefix
from coa_engine.train import Sequence, Trainer
from coa_engine.worker import Worker

from .helpers import TOKENIZER, micro_model, serve

PROMPTS = [[1, 60, 61, 62, 63, 64, 65], [1, 70], [1, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91]]


def sampler_for(model, prefix_cache_bytes=0, min_tokens=16):
    return Sampler(
        CachedDecoder(model, "fp32"), TOKENIZER, ModelGate(),
        prefix_cache_bytes=prefix_cache_bytes, prefix_min_tokens=min_tokens,
    )


def full_forward_greedy(model, prompt, steps):
    """Greedy decoding by recomputing the whole sequence every step: ids and their logprobs."""
    ids, logprobs = list(prompt), []
    with torch.no_grad():
        for _ in range(steps):
            logp = F.log_softmax(model(torch.tensor([ids]))[0, -1].float(), dim=-1)
            t = int(logp.argmax())
            ids.append(t)
            logprobs.append(float(logp[t]))
    return ids[len(prompt):], logprobs


class GreedyMatchesFullForwardTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = micro_model(seed=3)
        cls.sampler = sampler_for(cls.model)

    @classmethod
    def tearDownClass(cls):
        cls.sampler.close()

    def check(self, rows):
        for r in rows:
            ids, logprobs = full_forward_greedy(self.model, r.prompt, len(r.ids))
            self.assertEqual(r.ids, ids, f"prompt {r.prompt}")
            for x, y in zip(r.logprobs, logprobs):
                self.assertAlmostEqual(x, y, delta=1e-4)

    def test_rows_at_different_positions(self):
        # Three prompts of different lengths in one batch: scattered cache writes and a masked softmax.
        params = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True)
        self.check(self.sampler.generate(PROMPTS, params))

    def test_one_row_and_n_rows_of_one_prompt(self):
        # All rows at the same position: sliced cache writes, no mask.
        params = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True)
        self.check(self.sampler.generate(PROMPTS[:1], params))
        rows = self.sampler.generate(PROMPTS[2:], params, n=3)
        self.assertEqual(rows[0].ids, rows[2].ids)
        self.check(rows)

    def test_decode_weights_follow_a_training_step(self):
        model = micro_model(seed=4)
        sampler = sampler_for(model)
        try:
            params = SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True)
            before = sampler.generate(PROMPTS[:1], params)[0].ids
            trainer = Trainer(model, "fp32")
            target = PROMPTS[0] + [200] * 12
            for _ in range(3):
                trainer.sft([Sequence(target, [0] * len(PROMPTS[0]) + [1] * 12)], lr=1e-2)
            model.eval()
            rows = sampler.generate(PROMPTS[:1], params)
            self.assertNotEqual(rows[0].ids, before, "the step changed the greedy continuation")
            ids, logprobs = full_forward_greedy(model, PROMPTS[0], 12)
            self.assertEqual(rows[0].ids, ids)
            for x, y in zip(rows[0].logprobs, logprobs):
                self.assertAlmostEqual(x, y, delta=1e-4)
        finally:
            sampler.close()

    def test_bf16_decode_uses_bf16_weights_and_stays_close(self):
        model = micro_model(seed=5)
        prompt = PROMPTS[2]
        with torch.no_grad(), autocast("bf16"):
            cache = KVCache.empty(model.config, 1, 32, torch.float32)
            model(torch.tensor([prompt]), cache)
            stepped = model.decode(torch.tensor([95]), cache).float()
            self.assertEqual(model.decode_weights().output.dtype, torch.bfloat16)
            full = model(torch.tensor([prompt + [95]]))[0, -1].float()
        torch.testing.assert_close(stepped[0], full, atol=2e-2, rtol=2e-2)
        # A bf16 cache holds exactly what autocast would cast an fp32 cache to: identical logits in torch
        # ops (over a bf16 cache the fused kernel attends: `test_row_by_row_attention_matches_the_batched_one`).
        outs = []
        for cache_dtype in (torch.float32, torch.bfloat16):
            with torch.no_grad(), autocast("bf16"), mock.patch.object(attention, "attention_kernel", lambda: None):
                cache = KVCache.empty(model.config, 2, 32, cache_dtype)
                model(torch.tensor([prompt, prompt[:5] + [0] * 8]), cache, torch.tensor([13, 5]))
                outs.append(torch.stack([model.decode(torch.tensor([95, 96]), cache).float() for _ in range(3)]))
        self.assertTrue(torch.equal(outs[0], outs[1]))
        with torch.no_grad():
            self.assertEqual(model.decode_weights().output.dtype, torch.float32)


    def test_one_row_projects_with_matrix_vector_products(self):
        """A step of one row projects with `RowWeights` (`torch.mv`): the batched path's [in, out]
        matrices themselves in fp32; under bf16, fp32 copies of those bf16 values, each product rounding
        its input and output to bf16 as a bf16 matmul does (the other tests hold its steps against the
        full forward pass)."""
        model = micro_model(seed=9)
        qkv = model.blocks[0].attn.qkv.weight
        with torch.no_grad():
            batched = model.decode_weights()
            self.assertIs(batched.for_rows(2), batched)
            fp32 = batched.for_rows(1)
            self.assertIsInstance(fp32, RowWeights)
            self.assertIs(fp32.layers[0][0], batched.layers[0][0])  # no copy
            self.assertTrue(torch.equal(fp32.layers[0][0], qkv.t()))
            with autocast("bf16"):
                bf16 = model.decode_weights().for_rows(1)
            self.assertTrue(torch.equal(bf16.layers[0][0], qkv.bfloat16().float().t()))
            x = torch.randn(1, qkv.shape[1])
            out = project(x, bf16.layers[0][0], bf16.dtype, bf16.vector)
            self.assertEqual(out.dtype, torch.bfloat16)
            # The bf16 rounding (half of 2^-8 relative) of an fp32 sum of exact products (each off by
            # at most n * 2^-24 of the sum of magnitudes, n = 128 here), with a factor of two to spare.
            terms = x.bfloat16().double()[0] * qkv.bfloat16().double()
            exact = terms.sum(-1)
            bound = exact.abs() * 2**-8 + terms.abs().sum(-1) * 2**-15
            self.assertTrue(((out[0].double() - exact).abs() <= bound).all())


class DotProductsTest(unittest.TestCase):
    def test_chunked_dot_products_equal_a_batched_matmul(self):
        """fp32 decode attention on a CPU (`dot_products`): every pair's dot product, as `bmm` gives it
        up to the order of an fp32 sum, across chunk boundaries (300 entries in chunks of 51) and whole."""
        torch.manual_seed(0)
        for n, t, m in ((300, 2, 40), (8, 1, 150)):
            x, y = torch.randn(n, t, 64), torch.randn(n, m, 64)
            torch.testing.assert_close(
                model_module.dot_products(x, y), torch.bmm(x, y.transpose(1, 2)), rtol=1e-5, atol=1e-5
            )


def torchscript_only():
    """Every decode step through the TorchScript step, not the native one (test_row_step)."""
    return mock.patch.object(model_module.DecodeWeights, "row_step", lambda self: None)


class CompiledDecodeTest(unittest.TestCase):
    def _steps(self, dtype, rows, lens):
        """Logits of 12 decode steps (one of three new ids per row every fourth step) and the cache, all
        through the TorchScript step (not the native one that few ids would take: test_row_step)."""
        model = micro_model(seed=11)
        g = torch.Generator().manual_seed(5)
        with torch.no_grad(), autocast(dtype), torchscript_only():
            cache = KVCache.empty(model.config, rows, 64, torch.bfloat16 if dtype == "bf16" else torch.float32)
            model(torch.randint(3, 200, (rows, 14), generator=g), cache, torch.tensor(lens))
            shapes = [(rows, 3) if step % 4 == 3 else (rows,) for step in range(12)]
            logits = [model.decode(torch.randint(3, 200, shape, generator=g), cache).reshape(-1) for shape in shapes]
        return torch.cat(logits), cache.keys + cache.values

    def test_torchscript_changes_no_bit(self):
        """`decode_step` compiles `decode_tokens`; run as plain Python it gives the same logits and
        cache entries, bit for bit, for one row, rows at one position and rows at different ones."""
        for dtype, rows, lens in (
            ("fp32", 1, [14]), ("fp32", 3, [14, 9, 2]), ("bf16", 1, [14]), ("bf16", 2, [14, 14]), ("bf16", 3, [5, 14, 9]),
        ):
            with self.subTest(dtype=dtype, rows=rows, lens=lens):
                self.assertIsNot(model_module.decode_step(), model_module.decode_tokens)  # compiled here
                compiled = self._steps(dtype, rows, lens)
                with mock.patch.object(model_module, "decode_step", lambda: model_module.decode_tokens):
                    plain = self._steps(dtype, rows, lens)
                self.assertTrue(torch.equal(compiled[0], plain[0]))
                for a, b in zip(compiled[1], plain[1]):
                    self.assertTrue(torch.equal(a, b))

    def test_without_torchscript_it_decodes_in_python_and_says_so(self):
        model_module.decode_step.cache_clear()
        try:
            with mock.patch.object(torch.jit, "script", side_effect=RuntimeError("no compiler")):
                with mock.patch("sys.stderr", new_callable=io.StringIO) as err:
                    self.assertIs(model_module.decode_step(), model_module.decode_tokens)
            self.assertIn("decoding without TorchScript (RuntimeError: no compiler)", err.getvalue())
        finally:
            model_module.decode_step.cache_clear()


class DecodeMaskTest(unittest.TestCase):
    def test_cache_entries_past_each_rows_length_are_never_seen(self):
        """Whatever sits in the cache beyond a row's own positions (padding of a shorter prompt, unwritten
        capacity that bf16 decoding reads whole) gets exactly zero weight."""
        model = micro_model(seed=7)
        prompts = [[1, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71], [1, 72, 73, 74, 75]]
        for dtype, capacity, rows in (
            ("fp32", 40, 2), ("fp32", 40, 1), ("bf16", 20, 2), ("bf16", 20, 1), ("bf16", 64, 2),
        ):
            with self.subTest(dtype=dtype, capacity=capacity, rows=rows):
                outs = []
                for garbage in (None, 1e4):
                    with torch.no_grad(), autocast(dtype):
                        cache = KVCache.empty(model.config, rows, capacity, torch.float32)
                        lens = torch.tensor([len(p) for p in prompts[:rows]])
                        ids = torch.zeros(rows, 13, dtype=torch.long)
                        for i, p in enumerate(prompts[:rows]):
                            ids[i, : len(p)] = torch.tensor(p)
                        model(ids, cache, lens)
                        if garbage is not None:
                            for layer in range(model.config.n_layers):
                                for i, n in enumerate(lens.tolist()):
                                    cache.keys[layer][i, :, n:] = garbage
                                    cache.values[layer][i, :, n:] = garbage
                        steps = [model.decode(torch.tensor([95, 96][:rows]), cache).float() for _ in range(4)]
                        outs.append(torch.stack(steps))
                self.assertTrue(torch.isfinite(outs[1]).all())
                self.assertTrue(torch.equal(outs[0], outs[1]))

    def test_row_by_row_attention_matches_the_batched_one(self):
        """A speculative step over rows of unequal lengths attends row by row over exactly each row's
        positions (`torch.ops.coa.attend_rows`), the batched step over the longest row's width with the
        rest masked: the same logits, whatever lies past each row's length, to the last bits of fp32
        sums, and in bf16 to a few of bf16's steps (the two sum in other orders before they round). In
        torch ops fp32 rows' fill decides (`ROW_ATTENTION_FILL`) and bf16 steps stay batched; with the
        fused kernel every step on a CPU goes row by row, fp32 or bf16."""
        model = micro_model(seed=9)
        prompts = [[1, *range(60, 60 + n)] for n in (3, 40, 11, 25)]
        drafts = torch.tensor([[95, 96, 97], [98, 99, 100], [101, 102, 103], [104, 105, 106]])
        step = model_module.decode_step()
        kernel = attention.attention_kernel()
        for dtype in ("fp32", "bf16"):
            taken, outs = [], []

            def spy(*args):
                taken.append(args[18])  # `ends`: None for the batched path
                return step(*args)

            runs = ([(0.0, None), (1.0, None)] if dtype == "fp32" else [(0.0, None)]) + (
                [(0.0, kernel)] if kernel is not None else []
            )
            for fill, loaded in runs:
                # The TorchScript step's paths (a step of 12 ids would otherwise be one native call).
                no_native = torchscript_only()
                with torch.no_grad(), mock.patch.object(model_module, "ROW_ATTENTION_FILL", fill), no_native:
                    with mock.patch.object(model_module, "decode_step", lambda: spy), mock.patch.object(
                        attention, "attention_kernel", lambda loaded=loaded: loaded
                    ):
                        decoder = CachedDecoder(model, dtype)
                        cache, _ = decoder.prefill(prompts, 64)
                        for layer in range(model.config.n_layers):  # garbage past each row's length
                            for i, p in enumerate(prompts):
                                cache.keys[layer][i, :, len(p) :] = 1e4
                                cache.values[layer][i, :, len(p) :] = 1e4
                        outs.append(torch.stack([decoder.decode(cache, drafts + 10 * s).float() for s in range(3)]))
            ends = [[len(p) + 3 * s + 3 for p in prompts] for s in range(3)]
            with self.subTest(dtype=dtype):
                self.assertEqual(taken, [None] * 3 + ends * (len(runs) - 1))
                for out in outs[1:]:
                    self.assertTrue(torch.isfinite(out).all())
                    atol = 1e-4 if dtype == "fp32" else 2**-5 * outs[0].abs().max().item()
                    torch.testing.assert_close(out, outs[0], rtol=0, atol=atol)


class FinishedRowsTest(unittest.TestCase):
    def test_a_prompt_fed_within_a_step_gets_its_last_logits_only(self):
        """A step where two rows feed one and three ids and a third a prompt's new ids (`last_only`, as
        the sampler feeds a prefix-cache hit within a step; 20 ids through the native step's sgemm in
        fp32 where there is one, else TorchScript, 5 through its `gemv`): the rows' logits, then the prompt's last, equal those of the step
        returning every position, the cache alike, and the prompt's last logits those of its extend
        from the same prefix (fp32 to the last bits; bf16 within a few of its steps, sums in another
        order). With the fused kernel the step reaches only each row's own positions (`reserve`): the
        prompt's row may feed more ids than the longest row has room for."""
        model = micro_model(seed=4)
        prompts = [[1, *range(60, 100)], [1, 70, 71], [1, *range(80, 85)]]
        capacity = 41 + 2 if attention.attention_kernel() is not None else 64
        for dtype, width in (("fp32", 20), ("bf16", 20), ("fp32", 5), ("bf16", 5)):
            ids = torch.full((3, width), 7)
            ids[0, :1], ids[1, :3] = torch.tensor([95]), torch.tensor([96, 97, 98])
            ids[2] = torch.arange(100, 100 + width)
            counts, last_only = [1, 3, width], [False, False, True]
            outs, caches = [], []
            with torch.no_grad():
                for marked in (None, last_only):
                    decoder = CachedDecoder(model, dtype)
                    cache, _ = decoder.prefill(prompts, capacity)
                    outs.append(decoder.decode(cache, ids, counts, marked))
                    caches.append(cache)
                keys, values = cache.row(2, 6)
                _, extended = decoder.extend(prompts[2] + ids[2].tolist(), keys, values, 6, capacity)
            full, selected = outs
            with self.subTest(dtype=dtype, width=width):
                self.assertEqual(tuple(selected.shape), (1 + 3 + 1, full.shape[1]))
                # The output matrix over 5 rows or all of them: another GEMM shape, which another CPU's
                # kernels may sum in another order (a bf16 step, in bf16). Measured here: 1.9e-7 in fp32,
                # equal in bf16.
                same = 1e-5 if dtype == "fp32" else 2**-6 * full.abs().max().item()
                torch.testing.assert_close(selected, full[[0, 1, 2, 3, 3 + width]], rtol=0, atol=same)
                self.assertEqual(caches[1].lens.tolist(), [42, 6, 6 + width])
                for a, b in zip((*caches[0].keys, *caches[0].values), (*caches[1].keys, *caches[1].values)):
                    for row, held in enumerate(caches[1].lens.tolist()):
                        torch.testing.assert_close(a[row, :, :held], b[row, :, :held], rtol=0, atol=1e-6)
                atol = 1e-5 if dtype == "fp32" else 2**-5 * extended.abs().max().item()
                torch.testing.assert_close(selected[-1:], extended, rtol=0, atol=atol)

    def test_prompts_ride_steps_where_the_native_step_takes_them(self):
        """Rows attend alone with the kernel in fp32 and bf16 alike (and read a shared prefix); a prompt's
        new ids ride a step in fp32, and in bf16 only where the native step takes any number of ids
        (AVX512-BF16 without AMX): TorchScript's bf16 products are built per shape."""
        model = micro_model(seed=4)
        lib = attention.attention_kernel()
        kernel = lib is not None
        for dtype, amx in (("fp32", False), ("bf16", False), ("bf16", True)):
            with self.subTest(dtype=dtype, amx=amx), mock.patch.object(attention, "has_amx", lambda: amx):
                decoder = CachedDecoder(model, dtype)
                with torch.no_grad():
                    cache, _ = decoder.prefill([[1, 60, 61]], 16)
                pairs = kernel and bool(lib.coa_row_step_pairs()) and not amx
                self.assertEqual(decoder.attends_rows_alone(cache), kernel)
                self.assertEqual(decoder.prefills_in_steps(cache), kernel and (dtype == "fp32" or pairs))

    def test_rows_finishing_at_different_steps_match_their_solo_runs(self):
        """Finished rows leave the batch at once, as holes that the next admission would fill, until
        holes outnumber the rows left (here when the fourth of six finished, the one compaction): the
        other rows' ids and logprobs are those of each request run alone."""
        model = micro_model(seed=8)
        gate = ModelGate()
        sampler = Sampler(CachedDecoder(model, "fp32"), TOKENIZER, gate)
        prompts = [[1, 60 + i, 61, 62, 63 + 2 * i][: 3 + i % 3] for i in range(6)]
        lengths = [3, 5, 9, 14, 20, 30]
        try:
            for temperature in (0.0, 1.0):
                with self.subTest(temperature=temperature):
                    params = [
                        SamplingParams(max_tokens=m, temperature=temperature, seed=21, ignore_eos=True) for m in lengths
                    ]
                    solo = [sampler.generate([p], q)[0] for p, q in zip(prompts, params)]
                    results = [None] * 6

                    def run(i):
                        results[i] = sampler.generate([prompts[i]], params[i])[0]

                    threads = [threading.Thread(target=run, args=(i,)) for i in range(6)]
                    before = sampler.compactions
                    with gate.exclusive():  # queue all six, then let them start as one batch
                        for t in threads:
                            t.start()
                        while len(sampler._pending) < 6:
                            threading.Event().wait(0.005)
                    for t in threads:
                        t.join()
                    self.assertEqual(sampler.compactions - before, 1)
                    for a, b in zip(results, solo):
                        self.assertEqual(a.ids, b.ids)
                        self.assertEqual(len(a.ids), len(a.logprobs))
                        for x, y in zip(a.logprobs, b.logprobs):
                            self.assertAlmostEqual(x, y, delta=1e-4)
        finally:
            sampler.close()


class PrefixCacheTest(unittest.TestCase):
    def setUp(self):
        self.model = micro_model(seed=6)
        self.cached = sampler_for(self.model, prefix_cache_bytes=64 << 20)
        self.cold = sampler_for(self.model)

    def tearDown(self):
        self.cached.close()
        self.cold.close()

    def test_a_turn_extending_the_last_reuses_it_and_matches_a_cold_request(self):
        first = [1] + list(range(40, 70))
        for params in (
            SamplingParams(max_tokens=20, temperature=0.0, ignore_eos=True),
            SamplingParams(max_tokens=20, temperature=1.0, seed=9, ignore_eos=True),
        ):
            with self.subTest(temperature=params.temperature):
                turn1 = self.cached.generate([first], params)[0]
                second = first + turn1.ids + [100, 101, 102, 103, 104]
                stats = self.cached.prefix_cache.stats()
                warm = self.cached.generate([second], params, n=2)
                cold = self.cold.generate([second], params, n=2)
                after = self.cached.prefix_cache.stats()
                self.assertEqual(after["hits"], stats["hits"] + 1)
                # Every id of turn 1 but its last sampled one was already in the cache.
                self.assertEqual(
                    after["saved_prefill_tokens"] - stats["saved_prefill_tokens"], len(first) + len(turn1.ids) - 1
                )
                self.assertEqual(after["prefill_tokens"] - stats["prefill_tokens"], 6)
                for w, c in zip(warm, cold):
                    self.assertEqual(w.ids, c.ids)
                    for x, y in zip(w.logprobs, c.logprobs):
                        self.assertAlmostEqual(x, y, delta=1e-4)

    def test_a_warm_greedy_turn_equals_a_full_recompute(self):
        params = SamplingParams(max_tokens=10, temperature=0.0, ignore_eos=True)
        first = [1] + list(range(40, 70))
        turn1 = self.cached.generate([first], params)[0]
        second = first + turn1.ids + [110, 111]
        row = self.cached.generate([second], params)[0]
        self.assertEqual(self.cached.prefix_cache.hits, 1)
        ids, logprobs = full_forward_greedy(self.model, second, 10)
        self.assertEqual(row.ids, ids)
        for x, y in zip(row.logprobs, logprobs):
            self.assertAlmostEqual(x, y, delta=1e-4)

    def test_bf16_hits_use_the_bf16_cache(self):
        # bf16 rounds differently along the cached (decoded) and cold (prefilled) paths: close, not equal.
        cached = Sampler(CachedDecoder(self.model, "bf16"), TOKENIZER, ModelGate(), prefix_cache_bytes=64 << 20)
        cold = Sampler(CachedDecoder(self.model, "bf16"), TOKENIZER, ModelGate())
        try:
            params = SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True)
            first = [1] + list(range(40, 70))
            turn1 = cached.generate([first], params)[0]
            second = first + turn1.ids + [100, 101]
            warm = cached.generate([second], params)[0]
            self.assertEqual(cached.prefix_cache.hits, 1)
            # Only turn 2 is kept (it extends turn 1): its prompt and 11 of its ids, 2 bytes a number.
            self.assertEqual(cached.prefix_cache.bytes, (len(second) + 11) * 2 * 2 * 128 * 2)
            ref = cold.generate([second], params)[0]
            self.assertEqual(len(warm.logprobs), 12)
            for x, y in zip(warm.logprobs[:1], ref.logprobs[:1]):
                self.assertAlmostEqual(x, y, delta=0.05)
        finally:
            cached.close()
            cold.close()

    def test_an_entry_that_a_later_one_extends_is_dropped(self):
        params = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)
        prompt = [1] + list(range(40, 60))
        for _ in range(3):
            row = self.cached.generate([prompt], params)[0]
            prompt = prompt + row.ids + [120, 121]
        stats = self.cached.prefix_cache.stats()
        self.assertEqual((stats["hits"], stats["misses"], stats["entries"]), (2, 1, 1))

    def test_an_update_that_leaves_the_version_counters_still_empties_the_cache(self):
        """AdamW's fused kernel (seen with torch 2.11) writes the parameters without bumping their version
        counters; the trainer's count of updates still tells the prefix cache and the decode weights.
        Simulated with a step through `.data`, whose writes the parameters' counters do not see."""
        params = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)
        prompt = [1] + list(range(40, 60))
        row = self.cached.generate([prompt], params)[0]
        decode_weights = self.model.decode_weights()
        trainer = Trainer(self.model, "fp32")

        def step_past_the_counters():
            for p in self.model.parameters():
                if p.grad is not None:
                    p.data.add_(p.grad.sign(), alpha=-1e-2)  # the size of Adam's first step

        versions = [p._version for p in self.model.parameters()]
        with mock.patch.object(trainer.optimizer, "step", step_past_the_counters):
            trainer.sft([Sequence(prompt + row.ids, [0] + [1] * (len(prompt) + 7))])
        self.assertEqual([p._version for p in self.model.parameters()], versions)
        self.model.eval()
        second = prompt + row.ids + [130]
        warm = self.cached.generate([second], params)[0]
        stats = self.cached.prefix_cache.stats()
        self.assertEqual((stats["hits"], stats["invalidations"]), (0, 1))
        self.assertIsNot(self.model.decode_weights(), decode_weights)
        self.assertEqual(warm.ids, full_forward_greedy(self.model, second, 8)[0])

    def test_short_or_unrelated_prompts_miss(self):
        params = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)
        self.cached.generate([[1] + list(range(40, 60))], params)
        self.cached.generate([[1] + list(range(40, 50)) + [99] * 10], params)  # 11 shared ids < 16
        self.cached.generate([[2] + list(range(40, 60))], params)
        self.assertEqual(self.cached.prefix_cache.hits, 0)

    def test_a_weight_update_empties_the_cache(self):
        params = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)
        prompt = [1] + list(range(40, 60))
        row = self.cached.generate([prompt], params)[0]
        Trainer(self.model, "fp32").sft([Sequence(prompt + row.ids, [0] + [1] * (len(prompt) + 7))], lr=1e-2)
        self.model.eval()
        second = prompt + row.ids + [130]
        warm = self.cached.generate([second], params)[0]
        stats = self.cached.prefix_cache.stats()
        self.assertEqual((stats["hits"], stats["invalidations"]), (0, 1))
        self.assertEqual(warm.ids, full_forward_greedy(self.model, second, 8)[0])

    def test_eviction_keeps_the_bound_and_the_most_recently_used(self):
        params = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)
        # micro: 2 layers x 2 (keys, values) x 128 fp32 numbers = 2 KiB per token; an entry here is 38 to 47 tokens.
        per_token = 2 * 2 * 128 * 4
        sampler = sampler_for(self.model, prefix_cache_bytes=90 * per_token)
        try:
            a, b, c = ([1] + [base + i for i in range(30)] for base in (40, 80, 120))
            ra = sampler.generate([a], params)[0]
            rb = sampler.generate([b], params)[0]
            sampler.generate([a + ra.ids + [5]], params)  # hit: a becomes the most recent (and is replaced)
            sampler.generate([c], params)  # over the bound: b, the least recently used, goes
            stats = sampler.prefix_cache.stats()
            self.assertLessEqual(stats["bytes"], stats["max_bytes"])
            self.assertEqual((stats["hits"], stats["evictions"], stats["entries"]), (1, 1, 2))
            # a + its completion + 1 id, then its 7 kept completion ids (47), and c's 31 + 7 (38).
            self.assertEqual((stats["tokens"], stats["bytes"]), (85, 85 * per_token))
            hits = stats["hits"]
            sampler.generate([b + rb.ids + [6]], params)
            self.assertEqual(sampler.prefix_cache.hits, hits, "b was evicted")
        finally:
            sampler.close()

    def test_lru_order_and_common_prefix(self):
        self.assertEqual(common_prefix([1, 2, 3, 4], [1, 2, 9]), 2)
        self.assertEqual(common_prefix([1, 2, 3], [1, 2, 3, 4]), 3)
        self.assertEqual(common_prefix([5], [1]), 0)
        self.assertEqual(common_prefix(list(range(1000)), list(range(777)) + [0]), 777)
        one = [torch.zeros(1, 4, 1)]  # 16 bytes per entry and side: 32 bytes
        cache = PrefixCache(max_bytes=64, min_tokens=2)
        cache.store([1, 2, 3, 4], one, one)
        cache.store([5, 6, 7, 8], one, one)
        self.assertIsNotNone(cache.lookup([1, 2, 3, 9])[0])  # touches the first
        cache.store([9, 9, 9, 9], one, one)  # evicts the second, the least recently used
        self.assertEqual(cache.lookup([5, 6, 7, 0]), (None, 0))
        self.assertEqual(cache.lookup([1, 2, 3, 4, 5])[1], 4)
        self.assertEqual(cache.lookup([1, 2, 3, 4])[1], 3, "the prompt's last id is always prefilled")

    def test_lookup_finds_the_oldest_longest_match_among_entries_sharing_a_prefix(self):
        """As agent turns do: every entry starts with one system prompt, some with one question. The
        lookup skips an entry by one id where it cannot beat the best so far; what it returns is what
        comparing every entry in full returns, the first (least recently used) on ties."""
        rng = random.Random(0)
        system = [rng.randrange(3, 200) for _ in range(40)]
        questions = [[rng.randrange(3, 200) for _ in range(8)] for _ in range(5)]
        one = [torch.zeros(1, 1, 1)]
        cache = PrefixCache(max_bytes=1 << 30, min_tokens=4)
        for _ in range(60):
            cache.store(system + rng.choice(questions) + [rng.randrange(3, 200) for _ in range(rng.randrange(1, 30))], one, one)
        for _ in range(200):
            ids = rng.choice(list(cache._entries.values())).ids
            prompt = ids[: rng.randrange(1, len(ids) + 1)] + [rng.randrange(3, 200) for _ in range(rng.randrange(3))]
            expected_key, expected = None, 0
            for key, entry in cache._entries.items():
                shared = common_prefix(entry.ids, prompt)
                if shared > expected:
                    expected_key, expected = key, shared
            entry, reuse = cache.lookup(prompt)
            if min(expected, len(prompt) - 1) < 4:
                self.assertEqual((entry, reuse), (None, 0))
            else:
                self.assertIs(entry, cache._entries[expected_key])
                self.assertEqual(reuse, min(expected, len(prompt) - 1))


    def test_a_stored_turn_replaces_every_entry_it_extends_and_no_other(self):
        """As comparing the new ids with every entry does: an entry whose ids start the new one's goes,
        whatever its length against the index's blocks; one differing anywhere stays."""
        rng = random.Random(1)
        system = [rng.randrange(3, 200) for _ in range(37)]
        one = [torch.zeros(1, 1, 1)]
        cache = PrefixCache(max_bytes=1 << 30, min_tokens=5)
        kept: list[list[int]] = []
        for _ in range(300):
            if kept and rng.random() < 0.6:  # the next turn of an earlier one, or a sibling of it
                base = rng.choice(kept)
                ids = base[: rng.randrange(len(system), len(base) + 1)] + [rng.randrange(3, 200) for _ in range(rng.randrange(0, 12))]
            else:
                ids = system + [rng.randrange(3, 200) for _ in range(rng.randrange(1, 20))]
            kept = [e for e in kept if not (len(e) <= len(ids) and ids[: len(e)] == e)] + [ids]
            cache.store(ids, one, one)
            self.assertEqual([e.ids for e in cache._entries.values()], kept)
        self.assertEqual(cache.stats()["entries"], len(kept))


class InfoCountsPrefixHitsTest(unittest.TestCase):
    def test_info_reports_hits_and_saved_tokens(self):
        worker = Worker(preset="micro", dtype="fp32", device="cpu", max_seq_len=256)
        with serve(worker) as reply:

            def call(path, body=None):
                return reply(path, body)[2]

            prompt = [1] + list(range(40, 70))
            body = {"prompt": prompt, "max_tokens": 12, "temperature": 0, "ignore_eos": True, "logprobs": 0}
            first = call("/v1/completions", body)["choices"][0]
            second = prompt + first["token_ids"] + [100, 101]
            warm = call("/v1/completions", {**body, "prompt": second})["choices"][0]
            info = call("/info")["prefix_cache"]
            self.assertEqual((info["hits"], info["misses"]), (1, 1))
            self.assertEqual(info["saved_prefill_tokens"], len(prompt) + 12 - 1)
            self.assertEqual(info["prefill_tokens"], len(prompt) + 3)
            self.assertGreater(info["max_bytes"], 0)
            ids, logprobs = full_forward_greedy(worker.model, second, 12)
            self.assertEqual(warm["token_ids"], ids)
            for x, y in zip(warm["logprobs"]["token_logprobs"], logprobs):
                self.assertAlmostEqual(x, y, delta=1e-4)


if __name__ == "__main__":
    unittest.main()
