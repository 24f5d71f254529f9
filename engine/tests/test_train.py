import copy
import math
import unittest

import torch

from coa_engine.train import PolicyParams, Sequence, Trainer, clip_gradients, micro_batches, target_logprobs

from .helpers import micro_model


def seq(ids, mask, **kw):
    return Sequence(list(ids), list(mask), **kw)


class TrainTest(unittest.TestCase):
    def test_masked_positions_get_no_gradient(self):
        model = micro_model()
        ids = torch.tensor([[1, 40, 41, 42, 43, 44, 45, 46]])
        mask = torch.tensor([[0, 0, 1, 1, 0, 1, 0, 0]], dtype=torch.float32)[:, 1:]
        logits = None

        def keep(module, inputs, output):
            nonlocal logits
            logits = output
            output.retain_grad()

        handle = model.register_forward_hook(keep)
        lp, _ = target_logprobs(model, ids, 1.0, "fp32")
        handle.remove()
        (-(lp * mask).sum()).backward()
        grad_per_position = logits.grad.abs().sum(-1)[0]
        self.assertTrue(torch.all(grad_per_position[mask[0] == 0] == 0))
        self.assertTrue(torch.all(grad_per_position[mask[0] == 1] > 0))

    def test_logprobs_of_marked_targets_equal_those_of_the_whole_sequence(self):
        """Losses compute the vocabulary only where the mask marks a target: the same numbers as the
        whole sequence's, taken at those positions."""
        model = micro_model()
        ids = torch.tensor([[1, 40, 41, 42, 43, 44, 45, 46], [1, 50, 51, 52, 0, 0, 0, 0]])
        on = torch.tensor([[0, 1, 1, 0, 1, 0, 1], [1, 0, 1, 0, 0, 0, 0]], dtype=torch.bool)
        with torch.no_grad():
            for temperature in (1.0, 0.7):
                whole, whole_logp = target_logprobs(model, ids, temperature, "fp32")
                marked, marked_logp = target_logprobs(model, ids, temperature, "fp32", on)
                self.assertEqual(marked.shape, (int(on.sum()),))
                # Equal up to float32 rounding: another CPU's BLAS may block the two products
                # differently, and one ulp of a logprob near -7 is already 5e-7.
                torch.testing.assert_close(marked, whole[on], atol=1e-6, rtol=1e-6)
                torch.testing.assert_close(marked_logp, whole_logp[on], atol=1e-6, rtol=1e-6)

    def test_tokens_after_the_last_target_do_not_change_the_update(self):
        a, b = micro_model(), micro_model()
        base = [1, 40, 41, 42, 43]
        ta, tb = Trainer(a, "fp32"), Trainer(b, "fp32")
        ta.sft([seq(base + [50, 51], [0, 0, 1, 1, 1, 0, 0])])
        tb.sft([seq(base + [90, 91], [0, 0, 1, 1, 1, 0, 0])])
        for pa, pb in zip(a.parameters(), b.parameters()):
            torch.testing.assert_close(pa, pb, atol=0, rtol=0)

    def test_micro_batching_does_not_change_the_step(self):
        batch = [seq([1] + list(range(40, 40 + n)), [0] + [1] * n) for n in (5, 9, 3, 12)]
        results = []
        for budget in (10_000, 13):
            trainer = Trainer(micro_model(), "fp32")
            results.append(trainer.sft(batch, micro_batch_tokens=budget))
        self.assertAlmostEqual(results[0]["loss"], results[1]["loss"], places=5)
        self.assertAlmostEqual(results[0]["grad_norm"], results[1]["grad_norm"], places=4)

    def test_a_saved_optimizer_state_keeps_this_torchs_kernel(self):
        """A checkpoint written under another torch may name another AdamW kernel (fused, where this one
        may have none for a CPU): its moments load, the kernel stays the one `adamw` chose here, and the
        next step continues from the loaded moments exactly as the saving trainer would."""
        batch = [seq([1, 40, 41, 42], [0, 1, 1, 1])]
        saving, loading = Trainer(micro_model(), "fp32"), Trainer(micro_model(), "fp32")
        saving.sft(batch)
        chosen = [(g.get("fused"), g.get("foreach")) for g in loading.optimizer.param_groups]
        state = saving.optimizer.state_dict()
        for group in state["param_groups"]:
            group["fused"], group["foreach"] = not group.get("fused"), None  # the other kernel
        loading.model.load_state_dict(saving.model.state_dict())
        loading.load_optimizer_state(copy.deepcopy(state))  # as from a file: no tensor shared with `saving`
        self.assertEqual([(g.get("fused"), g.get("foreach")) for g in loading.optimizer.param_groups], chosen)
        saving.sft(batch)
        loading.sft(batch)
        for a, b in zip(saving.model.parameters(), loading.model.parameters()):
            torch.testing.assert_close(a, b, atol=0, rtol=0)

    def test_gradients_are_clipped_as_torch_clips_them(self):
        """The norm torch's `clip_grad_norm_` reports, up to the order of an fp32 sum; above `max_norm`
        the same scaled gradients, below it the gradients untouched (bf16 ones too)."""
        torch.manual_seed(0)
        shapes = [(384, 128), (128,), (1, 4096), (3, 5, 7)]
        for max_norm in (1.0, 1e4):
            grads = [torch.randn(s) * 3 for s in shapes] + [torch.randn(64).bfloat16()]
            theirs = [g.clone() for g in grads]
            params = [torch.nn.Parameter(torch.zeros_like(g)) for g in theirs]
            for p, g in zip(params, theirs):
                p.grad = g
            expected = float(torch.nn.utils.clip_grad_norm_(params, max_norm))
            before = [g.clone() for g in grads]
            norm = clip_gradients(grads, max_norm)
            self.assertAlmostEqual(norm, expected, delta=1e-5 * expected)
            if norm > max_norm:
                for mine, reference in zip(grads, theirs):
                    torch.testing.assert_close(mine, reference)
                self.assertAlmostEqual(clip_gradients([g.clone() for g in grads], math.inf), max_norm, places=3)
            else:
                for mine, old in zip(grads, before):
                    torch.testing.assert_close(mine, old, atol=0, rtol=0)

    def test_micro_batches_respect_the_budget(self):
        groups = micro_batches([5, 9, 3, 12, 2], 20)
        self.assertEqual(sorted(i for g in groups for i in g), [0, 1, 2, 3, 4])
        lengths = [5, 9, 3, 12, 2]
        for g in groups:
            self.assertTrue(len(g) == 1 or len(g) * max(lengths[i] for i in g) <= 20)

    def test_policy_gradient_moves_logprobs_with_the_advantage(self):
        ids = [1, 40, 41, 42, 43, 44]
        mask = [0, 0, 1, 1, 1, 1]
        for advantage, direction in ((1.0, 1), (-1.0, -1)):
            trainer = Trainer(micro_model(), "fp32")
            before = sum(trainer.score([ids])[0][1:])
            old = [0.0] + trainer.score([ids])[0]
            trainer.policy([seq(ids, mask, advantages=[advantage] * 6, old_logprobs=old)], PolicyParams(), lr=1e-3)
            after = sum(trainer.score([ids])[0][1:])
            self.assertEqual(direction, 1 if after > before else -1, f"advantage {advantage}")

    def test_clipping_stops_the_gradient_and_is_counted(self):
        trainer = Trainer(micro_model(), "fp32")
        ids, mask = [1, 40, 41, 42], [0, 1, 1, 1]
        current = [0.0] + trainer.score([ids])[0]
        # Old logprobs far below the current ones: ratio >> 1 + clip_high with a positive advantage.
        old = [x - 2.0 for x in current]
        out = trainer.policy([seq(ids, mask, advantages=[1.0] * 4, old_logprobs=old)], PolicyParams())
        self.assertEqual(out["clip_frac"], 1.0)
        self.assertEqual(out["grad_norm"], 0.0)

    def test_kl_to_the_reference_starts_at_zero_and_grows(self):
        trainer = Trainer(micro_model(), "fp32")
        batch = [seq([1, 40, 41, 42, 43], [0, 1, 1, 1, 1], advantages=[1.0] * 5)]
        first = trainer.policy(batch, PolicyParams(kl_coef=0.1), lr=1e-2)
        second = trainer.policy(batch, PolicyParams(kl_coef=0.1), lr=1e-2)
        self.assertAlmostEqual(first["kl"], 0.0, places=6)
        self.assertGreater(second["kl"], 0.0)

    def test_seq_mean_weighs_sequences_equally(self):
        short = seq([1, 40, 41], [0, 1, 1], advantages=[1.0] * 3)
        long = seq([1] + [50] * 9, [0] + [1] * 9, advantages=[1.0] * 10)
        token = Trainer(micro_model(), "fp32").policy([short, long], PolicyParams(agg="token-mean"))
        per_seq = Trainer(micro_model(), "fp32").policy([short, long], PolicyParams(agg="seq-mean"))
        # On-policy, each token's loss is -advantage = -1 whatever the weighting.
        self.assertAlmostEqual(token["loss"], -1.0, places=5)
        self.assertAlmostEqual(per_seq["loss"], -1.0, places=5)
        self.assertNotAlmostEqual(token["grad_norm"], per_seq["grad_norm"], places=4)

    def test_an_empty_mask_is_refused(self):
        with self.assertRaisesRegex(ValueError, "loss_mask"):
            Trainer(micro_model(), "fp32").sft([seq([1, 40, 41], [0, 0, 0])])


if __name__ == "__main__":
    unittest.main()
