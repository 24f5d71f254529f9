import threading
import unittest
from unittest import mock

import torch

from coa_engine import sampling
from coa_engine.sampling import CachedDecoder, ModelGate, Sampler, SamplingParams, argmax_rows, find_stop, sample
from coa_engine.train import Trainer

from .helpers import TOKENIZER, micro_model


def make_sampler(model):
    return Sampler(CachedDecoder(model, "fp32"), TOKENIZER, ModelGate())


class SampleTest(unittest.TestCase):
    def test_argmax_rows_is_torchs_argmax(self):
        """The greedy pick through numpy's vectorized argmax: the same index as torch's for random rows,
        ties (the first), NaN (counted largest) and infinities, of a contiguous or a strided tensor."""
        g = torch.Generator().manual_seed(3)
        logits = torch.randn(37, 2048, generator=g)
        logits[1, [5, 900]] = 50.0
        logits[2, 7] = float("nan")
        logits[3] = float("-inf")
        logits[4, 11] = float("inf")
        for x in (logits, logits[:, ::2], logits.t().contiguous().t(), logits.double(), logits[:3, :1]):
            got = argmax_rows(x)
            self.assertEqual(got.dtype, torch.int64)
            self.assertTrue(torch.equal(got, x.argmax(-1)))
        self.assertEqual(argmax_rows(logits)[:5].tolist(), [int(logits[0].argmax()), 5, 7, 0, 11])
        with mock.patch.object(sampling, "_numpy", None):  # a torch without numpy keeps its own argmax
            self.assertTrue(torch.equal(argmax_rows(logits), logits.argmax(-1)))

    def test_greedy_and_narrow_top_p_take_the_argmax(self):
        logits = torch.tensor([[0.0, 2.0, 1.0], [0.0, 2.0, 1.0]])
        tokens, _ = sample(logits, [0.0, 1.0], [1.0, 1e-6], [0.9, 0.9])
        self.assertEqual(tokens.tolist(), [1, 1])

    def test_inverse_cdf_follows_the_distribution(self):
        logits = torch.log(torch.tensor([[0.5, 0.3, 0.2]])).repeat(3, 1)
        tokens, logp = sample(logits, [1.0] * 3, [1.0] * 3, [0.1, 0.6, 0.95])
        self.assertEqual(tokens.tolist(), [0, 1, 2])
        torch.testing.assert_close(logp[0].exp(), torch.tensor([0.5, 0.3, 0.2]))

    def test_without_top_p_the_cdf_runs_in_vocabulary_order(self):
        logits = torch.log(torch.tensor([[0.2, 0.5, 0.3]])).repeat(4, 1)
        tokens, _ = sample(logits, [1.0] * 4, [1.0] * 4, [0.1, 0.3, 0.69, 0.75])
        self.assertEqual(tokens.tolist(), [0, 1, 1, 2])

    def test_a_token_of_zero_probability_is_never_drawn(self):
        logits = torch.tensor([[0.0, float("-inf"), 0.0]]).repeat(3, 1)
        tokens, _ = sample(logits, [1.0] * 3, [1.0] * 3, [0.0, 0.5, 0.999])
        self.assertEqual(tokens.tolist(), [0, 2, 2])

    def test_top_p_drops_the_tail(self):
        logits = torch.log(torch.tensor([[0.5, 0.3, 0.2]]))
        tokens, _ = sample(logits, [1.0], [0.7], [0.99])
        self.assertEqual(tokens.tolist(), [1])

    def test_find_stop_spans_token_boundaries(self):
        text = bytearray(b"abc</ans")
        self.assertIsNone(find_stop(text, 3, [b"</answer>"]))
        text += b"wer>"
        self.assertEqual(find_stop(text, 4, [b"</answer>", b"zz"]), (0, 3, 12))


class ThreadsTest(unittest.TestCase):
    def test_generation_and_exclusive_work_share_one_thread_with_their_own_counts(self):
        """Generation and exclusive work run on the gate's one model thread (one OpenMP pool in the
        process), each turn with its own torch thread count, whatever the other set last."""
        gate = ModelGate(threads=2)
        sampler = Sampler(CachedDecoder(micro_model(), "fp32"), TOKENIZER, gate, threads=1)
        seen = []
        decode = sampler.decoder.decode

        def watched(cache, ids, *args, **options):
            seen.append((threading.current_thread().name, torch.get_num_threads()))
            return decode(cache, ids, *args, **options)

        sampler.decoder.decode = watched
        here = lambda: (threading.current_thread().name, torch.get_num_threads())  # noqa: E731
        try:
            model_thread, threads = gate.run(here)
            self.assertEqual(threads, 2)
            sampler.generate([[1, 70]], SamplingParams(max_tokens=3, temperature=0.0))
            self.assertEqual(gate.run(here), (model_thread, 2))
        finally:
            sampler.close()
        self.assertEqual(set(seen), {(model_thread, 1)})


class SamplerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = micro_model()
        cls.sampler = make_sampler(cls.model)

    def test_seeded_requests_repeat_and_differ_across_samples(self):
        params = SamplingParams(max_tokens=12, temperature=1.0, seed=7)
        a = self.sampler.generate([[1, 70, 71]], params, n=3)
        b = self.sampler.generate([[1, 70, 71]], params, n=3)
        self.assertEqual([r.ids for r in a], [r.ids for r in b])
        self.assertEqual(len({tuple(r.ids) for r in a}), 3)

    def test_a_row_does_not_depend_on_its_batch_mates(self):
        params = SamplingParams(max_tokens=10, seed=3)
        alone = self.sampler.generate([[1, 80, 81, 82]], params)[0].ids
        results = {}

        def run(key, prompt):
            results[key] = self.sampler.generate([prompt], params)[0].ids

        threads = [threading.Thread(target=run, args=(k, p)) for k, p in (("a", [1, 80, 81, 82]), ("b", [1, 90]))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(results["a"], alone)

    def test_logprobs_equal_a_forward_pass_under_the_same_temperature(self):
        trainer = Trainer(self.model, "fp32")
        for temperature in (1.0, 0.7):
            params = SamplingParams(max_tokens=20, temperature=temperature, seed=11, ignore_eos=True)
            prompts = [[1, 60, 61, 62, 63], [1, 64]]
            rows = self.sampler.generate(prompts, params, n=2)
            scored = trainer.score([r.prompt + r.ids for r in rows], temperature)
            for r, lp in zip(rows, scored):
                recomputed = lp[len(r.prompt) - 1 :]
                self.assertEqual(len(recomputed), len(r.logprobs))
                for x, y in zip(r.logprobs, recomputed):
                    self.assertAlmostEqual(x, y, delta=1e-4)

    def test_a_session_decodes_with_the_weights_of_its_start(self):
        """Weights changed between two sessions (training, a load): the second samples what a fresh
        sampler samples over the new weights, prefix cache off and its prompt computed within a decode
        step (nothing prefilled, which used to take the weights' layout, as the first session's prompt of
        two samples did)."""
        model = micro_model(seed=23)
        sampler = make_sampler(model)
        params = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)
        try:
            before = sampler.generate([[1, 70, 71, 72]], params, n=2)[0].ids
            g = torch.Generator().manual_seed(1)
            # As training and loads do: on the gate, once the first session has ended.
            with sampler.gate.exclusive(), torch.no_grad():
                for weight in model.parameters():
                    weight.add_(torch.randn(weight.shape, generator=g))
            after = sampler.generate([[1, 70, 71, 72]], params)[0].ids
        finally:
            sampler.close()
        fresh = make_sampler(model)
        try:
            self.assertEqual(after, fresh.generate([[1, 70, 71, 72]], params)[0].ids)
        finally:
            fresh.close()
        self.assertNotEqual(after, before)

    def test_stop_ends_on_the_token_that_completes_it(self):
        params = SamplingParams(max_tokens=60, temperature=1.0, seed=5, ignore_eos=True)
        free = self.sampler.generate([[1, 100]], params)[0]
        # A stop string made of two consecutive ASCII byte tokens of the free run (same seed, so the
        # stopped run samples the same tokens up to the stop).
        text = bytes(free.text)
        printable = [32 <= t - TOKENIZER.byte_offset < 127 for t in free.ids]
        ascii_ids = [i for i in range(len(free.ids) - 1) if printable[i] and printable[i + 1]]
        self.assertTrue(ascii_ids, "the free run has two ASCII bytes in a row")
        stop = TOKENIZER.decode(free.ids[ascii_ids[0] : ascii_ids[0] + 2])
        with_stop = SamplingParams(**{**params.__dict__, "stop": ("zzzz", stop)})
        stopped = self.sampler.generate([[1, 100]], with_stop)[0]
        end = text.find(stop.encode()) + len(stop)
        self.assertEqual((stopped.finish_reason, stopped.stop_reason), ("stop", stop))
        self.assertEqual(bytes(stopped.text), text[:end])
        self.assertEqual(stopped.ids, free.ids[: len(stopped.ids)])
        self.assertEqual(stopped.stop_span, (end - len(stop), end))

    def test_max_tokens_and_context_bound_length(self):
        rows = self.sampler.generate([[1, 2]], SamplingParams(max_tokens=5, seed=1, ignore_eos=True))
        self.assertEqual((len(rows[0].ids), rows[0].finish_reason), (5, "length"))
        prompt = [1] + [100] * 250
        rows = self.sampler.generate([prompt], SamplingParams(max_tokens=50, seed=1, ignore_eos=True))
        self.assertEqual(len(rows[0].ids), 256 - 251)


if __name__ == "__main__":
    unittest.main()
