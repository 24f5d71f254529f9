"""Decode steps replayed from CUDA graphs (graph_step.py) against the same steps launched op by op: on a
GPU (skipped where torch sees none), and on a CPU the arithmetic a graph records (each step at its fixed
shape), which every CI machine runs."""

import contextlib
import os
import unittest
from unittest import mock

import torch

from coa_engine import attention, graph_step
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


def assert_steps_agree(case: unittest.TestCase, dtype: str, device: str, record=None) -> None:
    """The same 90 steps through graphs and op by op, each on its own copy of one cache, agree in logits
    and in every key and value the rows hold: rows at different positions, a hole, drafted steps, and
    enough steps for the cache to grow. `record` stands in for the graphs (on a CPU)."""
    atol = 1e-4 if dtype == "fp32" else 0.1
    model = micro_model().to(device)
    torch_dtype = torch.bfloat16 if dtype == "bf16" else torch.float32
    graphed, eager = decode_weights(model, torch_dtype, True), decode_weights(model, torch_dtype, False)
    recorded = (
        mock.patch.object(DecodeWeights, "graph_steps", lambda w: record if w is graphed else None)
        if record
        else contextlib.nullcontext()
    )
    prompts = torch.randint(3, 200, (3, 12), generator=torch.Generator().manual_seed(1)).to(device)
    caches = []
    with torch.no_grad(), autocast(dtype, device), recorded:
        for _ in range(2):
            cache = KVCache.empty(model.config, 3, 256, torch_dtype, device, holding=12)
            model(prompts, cache, torch.tensor([12, 7, 10], device=device))
            caches.append(cache)
        draw = torch.Generator().manual_seed(2)
        for step in range(90):
            if step == 40:  # row 1 finishes: a hole, which feeds nothing
                caches = [cache.vacate([1]) for cache in caches]
            fed = [1, 0, 1] if step >= 40 else None
            ids = torch.randint(3, 200, (3, 1), generator=draw).to(device)
            if step % 17 == 5:  # a drafted step: rows feed their id and up to 2 more
                ids, fed = torch.randint(3, 200, (3, 3), generator=draw).to(device), [3, 0 if fed else 1, 2]
            elif fed is None:
                ids = ids[:, 0]
            graph_logits, eager_logits = (model.decode(ids, c, w, fed) for c, w in zip(caches, (graphed, eager)))
            case.assertEqual(graph_logits.shape, eager_logits.shape)
            torch.testing.assert_close(graph_logits.float(), eager_logits.float(), atol=atol, rtol=0)
            ours, theirs = caches
            case.assertEqual(ours.lens.tolist(), theirs.lens.tolist())
            for a, b in zip(ours.keys + ours.values, theirs.keys + theirs.values):
                for row, n in enumerate(theirs.lens.tolist()):
                    torch.testing.assert_close(a[row, :, :n].float(), b[row, :, :n].float(), atol=atol, rtol=0)


class RecordedArithmeticTest(unittest.TestCase):
    """What a graph records, run without recording it (a CPU has no graphs): each step at its fixed shape,
    over the whole allocation, against the usual step. Without the fused attention, so that both take
    the batched path, as on a GPU."""

    def test_fixed_shape_steps_equal_the_usual_steps(self):
        for dtype in ("fp32", "bf16"):
            shapes = set()

            def as_recorded(key, step, ids, pos):
                shapes.add(key)
                return step(ids.clone(), pos.clone())  # the graph's own input tensors

            with self.subTest(dtype=dtype), mock.patch.object(attention, "fused_over", lambda *a: False):
                assert_steps_agree(self, dtype, "cpu", record=as_recorded)
                self.assertGreaterEqual(len(shapes), 3)  # one id and drafted ids, before and after the cache grew


@unittest.skipUnless(torch.cuda.is_available(), "needs a CUDA GPU")
class GraphStepTest(unittest.TestCase):
    def test_replayed_steps_equal_steps_launched_op_by_op(self):
        for dtype in ("fp32", "bf16"):
            with self.subTest(dtype=dtype):
                before = graph_step.state()
                assert_steps_agree(self, dtype, "cuda")
                captures = graph_step.state()["captures"] - before["captures"]
                replays = graph_step.state()["replays"] - before["replays"]
                self.assertGreaterEqual(captures, 2)  # the cache grew, the hole, the drafts
                self.assertGreater(replays, 3 * captures)  # shapes held between

    def test_sampled_logprobs_through_graphs_equal_a_forward_pass(self):
        model = micro_model().cuda()
        replays = graph_step.state()["replays"]
        sampler = Sampler(CachedDecoder(model, "fp32"), TOKENIZER, ModelGate())
        params = SamplingParams(max_tokens=40, seed=3, ignore_eos=True)
        rows = sampler.generate([[1, 60, 61, 62], [1, 64], [1, 70, 71]], params, n=2)
        scored = Trainer(model, "fp32").score([r.prompt + r.ids for r in rows], 1.0)
        for r, lp in zip(rows, scored):
            for x, y in zip(r.logprobs, lp[len(r.prompt) - 1 :]):
                self.assertAlmostEqual(x, y, delta=1e-3)
        self.assertGreater(graph_step.state()["replays"], replays)


if __name__ == "__main__":
    unittest.main()
