import unittest

import torch

from coa_engine.model import PRESETS, KVCache, Transformer, preset_config

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


class _no_init:
    """Skips weight initialisation: counting parameters does not need it."""

    def __enter__(self):
        self.saved = torch.nn.init.normal_
        torch.nn.init.normal_ = lambda t, *a, **k: t

    def __exit__(self, *exc):
        torch.nn.init.normal_ = self.saved


if __name__ == "__main__":
    unittest.main()
