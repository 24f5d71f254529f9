import unittest

import torch

from coa_engine.hf import HFState


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


if __name__ == "__main__":
    unittest.main()
