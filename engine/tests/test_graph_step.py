"""Decode steps replayed from CUDA graphs (graph_step.py) against the same steps launched op by op (these
tests skip where torch sees no CUDA GPU)."""

import os
import unittest
from unittest import mock

import torch

from coa_engine.model import DecodeWeights, KVCache
from coa_engine.precision import autocast
from coa_engine.sampling import CachedDecoder, ModelGate, Sampler, SamplingParams
from coa_engine.train import Trainer

from .helpers import TOKENIZER, micro_model


def decode_weights(model, dtype: torch.dtype, graphs: bool) -> DecodeWeights:
    with mock.patch.dict(os.environ, {"COA_CUDA_GRAPHS": "1" if graphs else "0"}):
        weights = DecodeWeights(model, dtype, None)
        weights.graph_steps()  # decided now, under the variable
    return weights


@unittest.skipUnless(torch.cuda.is_available(), "needs a CUDA GPU")
class GraphStepTest(unittest.TestCase):
    def steps(self, dtype: str):
        """The same steps through graphs and op by op, each on its own copy of one cache: rows at
        different positions, a hole, a drafted step, and enough steps for the cache to grow. Yields the
        two steps' logits and caches after each step."""
        model = micro_model().cuda()
        torch_dtype = torch.bfloat16 if dtype == "bf16" else torch.float32
        graphed, eager = (decode_weights(model, torch_dtype, g) for g in (True, False))
        prompts = torch.randint(3, 200, (3, 12), generator=torch.Generator().manual_seed(1)).cuda()
        caches = []
        with torch.no_grad(), autocast(dtype, "cuda"):
            for _ in range(2):
                cache = KVCache.empty(model.config, 3, 256, torch_dtype, "cuda", holding=12)
                model(prompts, cache, torch.tensor([12, 7, 10], device="cuda"))
                caches.append(cache)
            draw = torch.Generator().manual_seed(2)
            for step in range(90):
                if step == 40:  # row 1 finishes: a hole, which feeds nothing
                    caches = [cache.vacate([1]) for cache in caches]
                fed = [1, 0, 1] if step >= 40 else None
                ids = torch.randint(3, 200, (3, 1), generator=draw).cuda()
                if step % 17 == 5:  # a drafted step: rows feed their id and up to 2 more
                    ids, fed = torch.randint(3, 200, (3, 3), generator=draw).cuda(), [3, 0 if fed else 1, 2]
                elif fed is None:
                    ids = ids[:, 0]
                yield [model.decode(ids, c, w, fed) for c, w in zip(caches, (graphed, eager))], caches
        self.graphs = graphed.graph_steps()

    def test_replayed_steps_equal_steps_launched_op_by_op(self):
        for dtype, atol in (("fp32", 1e-4), ("bf16", 0.1)):
            with self.subTest(dtype=dtype):
                for (graph_logits, eager_logits), (graph_cache, eager_cache) in self.steps(dtype):
                    self.assertEqual(graph_logits.shape, eager_logits.shape)
                    torch.testing.assert_close(graph_logits.float(), eager_logits.float(), atol=atol, rtol=0)
                    self.assertEqual(graph_cache.lens.tolist(), eager_cache.lens.tolist())
                    for a, b in zip(graph_cache.keys + graph_cache.values, eager_cache.keys + eager_cache.values):
                        for row, n in enumerate(eager_cache.lens.tolist()):
                            torch.testing.assert_close(a[row, :, :n].float(), b[row, :, :n].float(), atol=atol, rtol=0)
                self.assertGreaterEqual(self.graphs.captures, 2)  # the cache grew, the hole, the drafts
                self.assertGreater(self.graphs.replays, 3 * self.graphs.captures)  # shapes held between

    def test_sampled_logprobs_through_graphs_equal_a_forward_pass(self):
        model = micro_model().cuda()
        sampler = Sampler(CachedDecoder(model, "fp32"), TOKENIZER, ModelGate())
        params = SamplingParams(max_tokens=40, seed=3, ignore_eos=True)
        rows = sampler.generate([[1, 60, 61, 62], [1, 64], [1, 70, 71]], params, n=2)
        scored = Trainer(model, "fp32").score([r.prompt + r.ids for r in rows], 1.0)
        for r, lp in zip(rows, scored):
            for x, y in zip(r.logprobs, lp[len(r.prompt) - 1 :]):
                self.assertAlmostEqual(x, y, delta=1e-3)
        with autocast("fp32", "cuda"):
            self.assertGreater(model.decode_weights().graph_steps().replays, 0)


if __name__ == "__main__":
    unittest.main()
