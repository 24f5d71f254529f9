"""Speculative decoding: drafts from earlier text (drafting.py), checked in one multi-id decode step.
A draft may change how many ids a step yields, never which ids: greedy and seeded rows sample what they
sample without drafts, with the same random numbers, and their caches stay consistent."""

import itertools
import threading
import unittest
from unittest import mock

import torch

from coa_engine import attention
from coa_engine.drafting import NgramDrafter, RowContext
from coa_engine.model import KVCache
from coa_engine.sampling import CachedDecoder, ModelGate, Sampler, SamplingParams

from .helpers import TOKENIZER, micro_model


class NgramDrafterTest(unittest.TestCase):
    def test_proposes_what_followed_the_last_ids_before(self):
        drafter = NgramDrafter(max_tokens=4, n=2)
        row = RowContext([5, 6, 7, 8, 9, 1, 5, 6])
        self.assertEqual(drafter.propose(row, limit=10), [7, 8, 9, 1])
        self.assertEqual(drafter.propose(row, limit=2), [7, 8])
        row.ids += [7, 3]  # 7, 3 never occurred before: nothing to propose
        self.assertEqual(drafter.propose(row, limit=10), [])

    def test_the_latest_occurrence_wins_and_a_repeat_continues_with_its_period(self):
        drafter = NgramDrafter(max_tokens=5, n=2)
        self.assertEqual(drafter.propose(RowContext([1, 2, 3, 1, 2, 4, 1, 2]), 5), [4, 1, 2, 4, 1])
        self.assertEqual(drafter.propose(RowContext([9, 9, 9]), 5), [9, 9, 9, 9, 9])

    def test_falls_back_on_what_finished_rows_wrote(self):
        drafter = NgramDrafter(max_tokens=3, n=2)
        finished = RowContext([99, 100, 101])
        finished.ids += [1, 2, 3, 4, 5]
        drafter.learn(finished, generated=5)
        self.assertEqual(drafter.propose(RowContext([50, 1, 2]), 10), [3, 4, 5])
        self.assertEqual(drafter.propose(RowContext([50, 4, 5]), 10), [])  # nothing followed them
        # From the prompt, only the n ids before the generated ones: how the completion began.
        self.assertEqual(drafter.propose(RowContext([7, 100, 101]), 10), [1, 2, 3])
        self.assertEqual(drafter.propose(RowContext([7, 99, 100]), 10), [])

    def test_learned_ngrams_are_bounded_oldest_first(self):
        drafter = NgramDrafter(max_tokens=2, n=1, max_learned=3)
        row = RowContext([])
        row.ids += [10, 11, 12, 13, 14]
        drafter.learn(row, generated=5)
        self.assertEqual(drafter.learned, 3)
        self.assertEqual(drafter.propose(RowContext([10]), 5), [])  # the oldest went first
        self.assertEqual(drafter.propose(RowContext([13]), 5), [14])

    def test_a_continued_prompt_takes_the_finished_rows_index(self):
        """A prompt extending a finished row's ids proposes what indexing it whole proposes, from the
        row's index (taken: a second prompt continuing the same row indexes its own)."""
        drafter = NgramDrafter(max_tokens=3, n=2)
        finished = RowContext([4, 5, 6, 7, 4, 5])
        self.assertEqual(drafter.propose(finished, 3), [6, 7, 4])
        finished.ids += [6, 8]
        prompt = [*finished.ids, 9, 4, 5, 6]
        taken = drafter.continued(finished, prompt, shared=len(finished.ids))
        self.assertEqual(taken.indexed, 4)
        self.assertEqual((finished.starts, finished.indexed), ({}, 0))
        self.assertEqual(drafter.propose(taken, 3), drafter.propose(RowContext(prompt), 3))
        self.assertEqual(drafter.propose(taken, 3), [8, 9, 4])
        again = drafter.continued(finished, prompt, shared=len(finished.ids))
        self.assertEqual((again.starts, again.indexed), ({}, 0))
        self.assertEqual(drafter.propose(again, 3), [8, 9, 4])
        # A prompt that shares fewer ids than the index covers starts from nothing.
        short = RowContext([4, 5, 6, 7, 4, 5])
        drafter.propose(short, 3)
        self.assertEqual(drafter.continued(short, [4, 5, 6, 1, 2], shared=3).indexed, 0)

    def test_no_drafts_past_the_limits(self):
        drafter = NgramDrafter(max_tokens=0, n=1)
        self.assertEqual(drafter.propose(RowContext([1, 2, 1]), 5), [])
        self.assertEqual(NgramDrafter(max_tokens=3, n=1).propose(RowContext([1, 2, 1]), 0), [])
        with self.assertRaises(ValueError):
            NgramDrafter(max_tokens=-1)


def peaked_model(seed: int, scale: float):
    """A fresh micro model whose tied embedding is scaled up: its distributions are peaked, so sampling at
    temperature 1 mostly repeats itself (drafts get accepted) yet sometimes departs (drafts get refused)."""
    model = micro_model(seed=seed)
    with torch.no_grad():
        model.embed.weight.mul_(scale)
    return model


def run(model, draft_tokens, prompts, params, n=1, prefix_cache_bytes=0):
    sampler = Sampler(
        CachedDecoder(model, "fp32"),
        TOKENIZER,
        ModelGate(),
        draft_tokens=draft_tokens,
        prefix_cache_bytes=prefix_cache_bytes,
    )
    try:
        rows = sampler.generate(prompts, params, n=n)
        return rows, sampler
    finally:
        sampler.close()


PROMPTS = [[1] + list(range(40, 60)) * 3, [1, 80, 81, 82, 83, 80, 81, 82]]


class SpeculativeSamplingTest(unittest.TestCase):
    def test_greedy_and_seeded_rows_sample_the_same_ids_in_fewer_steps(self):
        for scale, temperature in ((1.0, 0.0), (3.0, 1.0), (5.0, 1.0)):
            with self.subTest(scale=scale, temperature=temperature):
                model = peaked_model(seed=3, scale=scale)
                params = SamplingParams(max_tokens=120, temperature=temperature, seed=7, ignore_eos=True)
                plain, plain_sampler = run(model, 0, PROMPTS, params, n=2)
                drafted, sampler = run(model, 4, PROMPTS, params, n=2)
                self.assertGreater(sampler.accepted_tokens, 0)
                self.assertLess(sampler.steps, plain_sampler.steps)
                self.assertEqual(sampler.generated_tokens, plain_sampler.generated_tokens)
                for a, b in zip(plain, drafted):
                    self.assertEqual(a.ids, b.ids)
                    self.assertEqual(len(b.ids), 120)
                    # Logprobs from a multi-id step: the same arithmetic up to fp32 rounding.
                    for x, y in zip(a.logprobs, b.logprobs):
                        self.assertAlmostEqual(x, y, delta=1e-4)
                    if temperature:
                        # The same random numbers drawn, no more: the generators end in the same state.
                        self.assertTrue(torch.equal(a.generator.get_state(), b.generator.get_state()))

    def test_some_drafts_are_refused_at_temperature_one(self):
        model = peaked_model(seed=3, scale=3.0)
        params = SamplingParams(max_tokens=120, temperature=1.0, seed=7, ignore_eos=True)
        _, sampler = run(model, 4, PROMPTS, params, n=2)
        self.assertLess(sampler.accepted_tokens, sampler.drafted_tokens)

    def test_a_stop_inside_an_accepted_draft_ends_the_row_there(self):
        """A fresh micro model's greedy text repeats one byte; a stop of k of them ends the row on its
        k-th id, whichever position of a drafted step that is (k = 8..14 covers all five), with the
        cache holding exactly the ids fed (the prefix cache's store checks the count)."""
        model = micro_model(seed=3)
        (row,), _ = run(model, 0, PROMPTS[:1], SamplingParams(max_tokens=20, temperature=0.0, ignore_eos=True))
        byte = TOKENIZER.decode(row.ids[:1])
        self.assertEqual(TOKENIZER.decode(row.ids), byte * 20)
        for k in range(8, 15):
            with self.subTest(k=k):
                params = SamplingParams(max_tokens=60, temperature=0.0, stop=(byte * k,), ignore_eos=True)
                (drafted,), sampler = run(model, 4, PROMPTS[:1], params, prefix_cache_bytes=1 << 24)
                self.assertGreater(sampler.accepted_tokens, 0)
                self.assertEqual(drafted.ids, row.ids[:k])
                self.assertEqual((drafted.finish_reason, drafted.stop_reason), ("stop", byte * k))
                self.assertEqual(sampler.prefix_cache.stored, 1)

    def test_the_cache_keeps_exactly_the_ids_fed_so_the_next_turn_reuses_it(self):
        """The prefix cache stores a finished row's keys and values for its prompt and every id but the
        last (asserting their count); a next turn that extends it prefills only its new ids and samples
        what a cold prefill samples."""
        model = peaked_model(seed=3, scale=1.0)
        params = SamplingParams(max_tokens=50, temperature=0.0, ignore_eos=True)
        (first,), _ = run(model, 4, PROMPTS[:1], params)
        turn = PROMPTS[0] + first.ids + [60, 61, 62]
        sampler = Sampler(
            CachedDecoder(model, "fp32"), TOKENIZER, ModelGate(), draft_tokens=4, prefix_cache_bytes=1 << 24
        )
        try:
            sampler.generate(PROMPTS[:1], params)
            (entry,) = sampler.prefix_cache._entries.values()
            self.assertGreater(entry.context.indexed, 0)
            (warm,) = sampler.generate([turn], params)
            self.assertGreater(sampler.prefix_cache.hits, 0)
            self.assertEqual(entry.context.indexed, 0)  # its drafting index went to the next turn
        finally:
            sampler.close()
        (cold,), _ = run(model, 0, [turn], params)
        self.assertEqual(warm.ids, cold.ids)


    def test_rows_joining_a_drafted_batch_and_rows_reaching_the_context_end(self):
        """B is admitted while A's batch decodes drafted steps (its prefill's logits join the batch's
        multi-id ones); C's prompt leaves 20 positions of the 256-position context, and no draft runs
        past them. Each row samples what it samples alone without drafts."""
        model = micro_model(seed=3)
        params = SamplingParams(max_tokens=150, temperature=0.0, ignore_eos=True)
        a_prompt, b_prompt, c_prompt = PROMPTS[0], PROMPTS[1], [1] + [70 + i % 9 for i in range(235)]
        solo = [run(model, 0, [p], params)[0][0] for p in (a_prompt, b_prompt, c_prompt)]
        decoder = Pausing(model, pause_at=6)
        sampler = Sampler(decoder, TOKENIZER, ModelGate(), draft_tokens=4)
        try:
            results = {}
            a = threading.Thread(target=lambda: results.setdefault("a", sampler.generate([a_prompt], params)))
            a.start()
            decoder.reached.wait(60)
            self.assertEqual(decoder.widths[-1], 5)  # A is mid-draft when B and C arrive
            b = threading.Thread(target=lambda: results.setdefault("bc", sampler.generate([b_prompt, c_prompt], params)))
            b.start()
            while not sampler._pending:
                threading.Event().wait(0.002)
            decoder.release.set()
            a.join()
            b.join()
        finally:
            sampler.close()
        rows = results["a"] + results["bc"]
        self.assertEqual(len(rows[2].ids), 20)
        self.assertGreater(sampler.joins, 0)
        for got, want in zip(rows, solo):
            self.assertEqual(got.ids, want.ids)


class Pausing(CachedDecoder):
    """Records each decode step's ids per row, and holds step `pause_at` until released."""

    def __init__(self, model, pause_at):
        super().__init__(model, "fp32")
        self.widths, self.pause_at = [], pause_at
        self.reached, self.release = threading.Event(), threading.Event()

    def decode(self, cache, ids, *args, **options):
        self.widths.append(1 if ids.dim() == 1 else ids.shape[1])
        if len(self.widths) == self.pause_at:
            self.reached.set()
            self.release.wait(60)
        return super().decode(cache, ids, *args, **options)


class MultiIdDecodeTest(unittest.TestCase):
    def test_t_ids_per_row_in_one_step_equal_t_steps_of_one(self):
        model = micro_model(seed=5)
        decoder = CachedDecoder(model, "fp32")
        with torch.inference_mode():
            for prompts in ([[1, 2, 3, 4, 5], [1, 9, 8]], [[1, 2, 3], [4, 5, 6]]):  # rows apart, rows aligned
                with self.subTest(prompts=prompts):
                    cache, _ = decoder.prefill(prompts, 40)
                    start = cache.lens.clone()
                    ids = torch.tensor([[10, 11, 12, 13], [20, 21, 22, 23]])
                    steps = torch.stack([decoder.decode(cache, ids[:, j]) for j in range(4)], dim=1)
                    cache.lens = start.clone()
                    at_once = decoder.decode(cache, ids)
                    self.assertTrue(torch.equal(cache.lens, start + 4))
                    torch.testing.assert_close(at_once, steps, atol=1e-4, rtol=1e-4)
                    self.assertIsInstance(cache, KVCache)

    def test_rows_feed_only_their_own_drafts(self):
        """With `counts` each row feeds its first counts[b] ids (drafts of other lengths): the logits of
        those positions, row after row, as one id a step gives them, and each row's length advanced by
        its own count. The fused kernel feeds no padding at all; without it the batched step feeds every
        id and keeps the rows' own."""
        model = micro_model(seed=5)
        decoder = CachedDecoder(model, "fp32")
        kernel = attention.attention_kernel()
        cases = [  # rows at different positions; one row feeding 2 of its 4 ids
            ([[1, 2, 3, 4, 5], [1, 9, 8], [1, 7]], [4, 1, 2]),
            ([[1, 2, 3]], [2]),
        ]
        for (prompts, counts), loaded in itertools.product(cases, {None, kernel}):
            ids = torch.tensor([[10, 11, 12, 13], [20, 21, 22, 23], [30, 31, 32, 33]])[: len(prompts)]
            with self.subTest(kernel=loaded is not None, counts=counts), torch.inference_mode():
                with mock.patch.object(attention, "attention_kernel", lambda loaded=loaded: loaded):
                    cache, _ = decoder.prefill(prompts, 40)
                    start = cache.lens.clone()
                    steps = torch.stack([decoder.decode(cache, ids[:, j]) for j in range(4)], dim=1)
                    cache.lens = start.clone()
                    ragged = decoder.decode(cache, ids, counts)
                self.assertTrue(torch.equal(cache.lens, start + torch.tensor(counts)))
                expected = torch.cat([steps[r, :c] for r, c in enumerate(counts)])
                torch.testing.assert_close(ragged, expected, atol=1e-4, rtol=1e-4)

if __name__ == "__main__":
    unittest.main()
