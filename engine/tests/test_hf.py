import unittest
from types import SimpleNamespace

import torch
from torch import nn

from coa_engine.hf import HFCausalLM, HFState
from coa_engine.train import PolicyParams, Sequence, Trainer


class CausalBigram(nn.Module):
    """The call a Hugging Face causal LM answers (`model(input_ids=...).logits`), from a bigram table:
    enough to drive the trainer without `transformers`."""

    def __init__(self, vocab: int):
        super().__init__()
        self.table = nn.Embedding(vocab, vocab)

    def forward(self, input_ids: torch.Tensor):
        return SimpleNamespace(logits=self.table(input_ids))


class HFStateTest(unittest.TestCase):
    def test_merge_left_pads_every_state_to_the_widest(self):
        """The Hugging Face backend's cache is left-padded: merging several states at once pads each
        to the widest and keeps the rows in order (this needs no `transformers`)."""

        def state(rows: int, width: int, fill: float) -> HFState:
            kv = torch.full((rows, 2, width, 4), fill)
            return HFState(((kv, kv.clone()),), torch.ones(rows, width), torch.full((rows,), width))

        merged = state(1, 3, 1.0).merge(state(2, 5, 2.0), state(1, 3, 3.0))
        self.assertEqual(tuple(merged.past[0][0].shape), (4, 2, 5, 4))
        self.assertEqual(merged.mask[:, :2].tolist(), [[0, 0], [1, 1], [1, 1], [0, 0]])
        self.assertEqual(merged.next_pos.tolist(), [3, 5, 5, 3])
        self.assertEqual(merged.past[0][1][3, 0, :, 0].tolist(), [0, 0, 3, 3, 3])
        kept = merged.compact(torch.tensor([3, 1]))  # the sampler's compaction: rows in the order given
        self.assertEqual(kept.next_pos.tolist(), [3, 5])
        self.assertEqual(kept.past[0][0][:, 0, -1, 0].tolist(), [3, 2])


class HFTrainingTest(unittest.TestCase):
    def test_the_trainer_updates_a_hugging_face_model(self):
        """The trainer's losses ask for logits at the trained positions only (`at`) and size their
        micro-batches by the engine's own model shape; a Hugging Face model has neither, and trains."""
        torch.manual_seed(0)
        model = HFCausalLM(CausalBigram(16))
        trainer = Trainer(model, "fp32")
        batch = [Sequence([1, 5, 6, 7, 8], [0, 0, 1, 1, 1]), Sequence([1, 9, 10], [0, 1, 1])]
        first = trainer.sft(batch, lr=0.1)["loss"]
        for _ in range(5):
            last = trainer.sft(batch, lr=0.1)["loss"]
        self.assertLess(last, first)
        for s in batch:
            s.advantages = [1.0] * len(s.ids)
        stats = trainer.policy(batch, PolicyParams(), lr=0.1)
        self.assertEqual(stats["tokens"], 5)


if __name__ == "__main__":
    unittest.main()
