"""Continuous batching (requests join a running batch between decode steps; one prefill per distinct
prompt) and the memory bounds (rows in flight, bytes of keys and values, the queue; 503 when full)."""

import random
import threading
import time
import unittest
from unittest import mock

import torch

from coa_engine import attention
from coa_engine.model import KVCache, SharedPrefix
from coa_engine.sampling import CachedDecoder, ModelGate, Refused, Sampler, SamplingParams
from coa_engine.worker import Worker

from .helpers import TOKENIZER, micro_model, serve

# micro: 2 layers x 2 (keys, values) x 128 fp32 numbers per position.
PER_TOKEN = 2 * 2 * 128 * 4


class Recording(CachedDecoder):
    """Records the rows and capacity of every decode step's cache and the most ids it fed a row, and
    can hold step `pause_at` until released (so a test queues a request while a batch is known to be
    mid-decode)."""

    def __init__(self, model, pause_at=None):
        super().__init__(model, "fp32")
        self.shapes, self.widths, self.pause_at, self.calls = [], [], pause_at, 0
        self.reached, self.release = threading.Event(), threading.Event()

    def decode(self, cache, ids, *args, **options):
        self.calls += 1
        self.shapes.append((cache.rows, cache.capacity))
        self.widths.append(1 if ids.dim() == 1 else ids.shape[1])
        if self.calls == self.pause_at:
            self.reached.set()
            self.release.wait(60)
        return super().decode(cache, ids, *args, **options)


def wait_for(condition):
    done = threading.Event()
    while not condition():
        done.wait(0.002)


def start(fn, *args):
    """Runs `fn(*args)` on a new thread; `out` gets its "rows", or the "error" it raised."""
    out = {}

    def run():
        try:
            out["rows"] = fn(*args)
        except Exception as err:  # noqa: BLE001 - the test reads it
            out["error"] = err

    thread = threading.Thread(target=run, daemon=True)  # a request that never finishes fails its test, not the run
    thread.start()
    return thread, out


def join_mid_decode(sampler, decoder, running, joining):
    """Starts the request `running` (`generate`'s arguments), waits for the decoder's paused step,
    queues `joining` and releases the step; returns both requests' outputs once both are done."""
    thread_a, a = start(sampler.generate, *running)
    decoder.reached.wait(60)
    thread_b, b = start(sampler.generate, *joining)
    wait_for(lambda: len(sampler._pending) == 1)
    decoder.release.set()
    thread_b.join()
    thread_a.join()
    return a, b


def assert_same(test, rows, solo, delta):
    for a, b in zip(rows, solo):
        test.assertEqual(a.ids, b.ids)
        test.assertEqual(len(a.logprobs), len(b.logprobs))
        for x, y in zip(a.logprobs, b.logprobs):
            test.assertAlmostEqual(x, y, delta=delta)


class ContinuousBatchingTest(unittest.TestCase):
    def test_a_request_joins_a_running_batch_and_matches_its_solo_run(self):
        """B arrives while A decodes: it is prefilled and merged at the next step (A is still running
        when B returns), and B's ids equal B run alone, greedy and seeded, n = 2 (a prompt of several
        rows is prefilled once and copied, where a lone row's rides a step)."""
        model = micro_model(seed=11)
        long_prompt, short_prompt = [1] + list(range(40, 70)), [1, 80, 81, 82, 83]
        for temperature in (0.0, 1.0):
            with self.subTest(temperature=temperature):
                a_params = SamplingParams(max_tokens=150, temperature=temperature, seed=5, ignore_eos=True)
                b_params = SamplingParams(max_tokens=40, temperature=temperature, seed=9, ignore_eos=True)
                alone = Sampler(CachedDecoder(model, "fp32"), TOKENIZER, ModelGate())
                try:
                    solo_a = alone.generate([long_prompt], a_params)
                    solo_b = alone.generate([short_prompt], b_params, n=2)
                finally:
                    alone.close()
                decoder = Recording(model, pause_at=10)
                sampler = Sampler(decoder, TOKENIZER, ModelGate())
                try:
                    a, b = join_mid_decode(sampler, decoder, ([long_prompt], a_params), ([short_prompt], b_params, 2))
                finally:
                    sampler.close()
                self.assertEqual(sampler.joins, 1)
                # Step 11 decodes A and both rows of B together; once B is done, A goes on alone.
                self.assertEqual([rows for rows, _ in decoder.shapes[9:12]], [1, 3, 3])
                self.assertEqual(decoder.shapes[-1][0], 1)
                # A step a new id, the first too where A's prompt rode a step (the fused kernel's).
                stepped = int(attention.attention_kernel() is not None)
                self.assertEqual(len(decoder.shapes), 150 - 1 + stepped)
                # Batched arithmetic may differ in the last bits (measured <= 5e-7 here); ids are equal.
                assert_same(self, a["rows"], solo_a, 1e-5)
                assert_same(self, b["rows"], solo_b, 1e-5)

    def test_a_cold_prompt_rides_a_step_alone_or_joining_a_batch(self):
        """Where the fused kernel attends rows alone, a prompt of one row with nothing cached is computed
        within a decode step, never prefilled: the first step of its own session, or the next step of a
        batch it joins (A decoding), both feeding all its ids. It samples the same either way."""
        if attention.attention_kernel() is None:
            self.skipTest("prompts ride decode steps only beside the fused attention kernel")
        model = micro_model(seed=17)
        a_prompt, b_prompt = [1] + list(range(40, 60)), [1] + list(range(90, 103))
        a_params = SamplingParams(max_tokens=30, temperature=1.0, seed=5, ignore_eos=True)
        b_params = SamplingParams(max_tokens=12, temperature=1.0, seed=8, ignore_eos=True)
        alone_decoder = Recording(model)
        alone = Sampler(alone_decoder, TOKENIZER, ModelGate())
        try:
            with mock.patch.object(alone_decoder, "prefill", wraps=alone_decoder.prefill) as prefills:
                solo = alone.generate([b_prompt], b_params)
        finally:
            alone.close()
        self.assertEqual((prefills.call_count, alone_decoder.widths[0]), (0, len(b_prompt)))
        decoder = Recording(model, pause_at=5)
        sampler = Sampler(decoder, TOKENIZER, ModelGate())
        try:
            with mock.patch.object(decoder, "prefill", wraps=decoder.prefill) as prefills:
                _, b = join_mid_decode(sampler, decoder, ([a_prompt], a_params), ([b_prompt], b_params))
        finally:
            sampler.close()
        self.assertEqual((prefills.call_count, sampler.joins, sampler.stepped_prefills), (0, 1, 2))
        self.assertEqual(decoder.widths[0], len(a_prompt))
        self.assertEqual((decoder.widths[5], [rows for rows, _ in decoder.shapes[4:6]]), (len(b_prompt), [1, 2]))
        assert_same(self, b["rows"], solo, 1e-5)

    def test_a_batch_whose_rows_are_attended_alone_grows_to_the_whole_context_past_half_of_it(self):
        """Rows joining with longer prompts raise a batch's capacity step by step; where steps read only
        each row's own positions, a growth past half the model's context takes all of it at once."""
        model = micro_model(max_seq_len=512)
        batch = CachedDecoder(model, "fp32").empty_batch(300, 40, whole_context=True)
        self.assertIsNone(CachedDecoder(model, "fp32").empty_batch(300, 40).context)
        if attention.attention_kernel() is None:
            self.assertIsNone(batch.context)  # torch's attention reads every allocated position
            return
        self.assertEqual((batch.context, batch.positions), (512, 104))
        batch.make_room(2, 200, 300)
        self.assertEqual((batch.positions, batch.capacity), (512, 512))
        # The sampler asks for it only where every row at the context fits the memory bound beside a
        # full prefix cache.
        per_row = 512 * CachedDecoder(model, "fp32").kv_bytes_per_token
        for bound, whole in ((64 * per_row + (1 << 20), True), (64 * per_row, False)):
            sampler = Sampler(CachedDecoder(model, "fp32"), TOKENIZER, ModelGate(), max_rows=64,
                              prefix_cache_bytes=1 << 20, max_kv_bytes=bound)  # fmt: skip
            try:
                with mock.patch.object(sampler.decoder, "empty_batch", wraps=sampler.decoder.empty_batch) as made:
                    sampler.generate([[1, 5, 6]], SamplingParams(max_tokens=2, temperature=0.0))
                self.assertEqual(made.call_args.kwargs["whole_context"], whole)
            finally:
                sampler.close()

    def test_a_prompt_not_yet_fed_stays_in_the_batch_when_a_row_before_it_finishes(self):
        """C's cold prompt joins at the batch's end in the iteration where A finishes: A's row becomes a
        hole, and C, holding no positions until the next step feeds its prompt, stays in the batch
        (emptied rows at the end leave it; C's is not emptied) and completes as it does alone."""
        if attention.attention_kernel() is None:
            self.skipTest("prompts ride decode steps only beside the fused attention kernel")
        model = micro_model(seed=29)
        a_prompt, b_prompt, c_prompt = [1] + list(range(40, 50)), [1] + list(range(50, 62)), [1, 90, 91, 92, 93]
        a_params = SamplingParams(max_tokens=5, temperature=1.0, seed=1, ignore_eos=True)
        b_params = SamplingParams(max_tokens=30, temperature=1.0, seed=2, ignore_eos=True)
        c_params = SamplingParams(max_tokens=10, temperature=1.0, seed=3, ignore_eos=True)
        decoder, gate = Recording(model, pause_at=5), ModelGate()  # the call whose logits give A's last id
        sampler = Sampler(decoder, TOKENIZER, gate)
        try:
            with gate.exclusive():
                (thread_a, _), (thread_b, _) = start(sampler.generate, [a_prompt], a_params), start(
                    sampler.generate, [b_prompt], b_params
                )
                wait_for(lambda: len(sampler._pending) == 2)
            decoder.reached.wait(60)
            thread_c, c = start(sampler.generate, [c_prompt], c_params)
            wait_for(lambda: len(sampler._pending) == 1)
            decoder.release.set()
            thread_c.join(60)
            self.assertFalse(thread_c.is_alive(), "C's row left the batch before its prompt was fed")
        finally:
            sampler.close()
            for thread in (thread_a, thread_b, thread_c):
                thread.join(60)
        alone = Sampler(CachedDecoder(model, "fp32"), TOKENIZER, ModelGate())
        try:
            assert_same(self, c["rows"], alone.generate([c_prompt], c_params), 1e-5)
        finally:
            alone.close()

    def test_requests_coming_and_going_at_random_all_finish_as_they_do_alone(self):
        """Forty requests started at random moments (cold prompts, next turns of earlier ones that hit
        the prefix cache, n = 2), of 1 to 24 new ids, under a budget of 24 prompt ids a step: rows join
        holes and the batch's end, wait for their step, finish beside rows not yet fed; every request
        completes, each with the ids it samples alone."""
        model = micro_model(seed=31)
        draw = random.Random(7)
        done: list[tuple[list[int], SamplingParams, int, dict]] = []
        sampler = Sampler(Recording(model), TOKENIZER, ModelGate(), step_prompt_ids=24, prefix_cache_bytes=1 << 24)
        threads = []
        try:
            for i in range(40):
                finished = [d for d in done if "rows" in d[3]]
                if finished and draw.random() < 0.3:  # a next turn: an earlier prompt, its ids, a few more
                    prompt, _, _, out = draw.choice(finished)
                    prompt = prompt + out["rows"][0].ids + [draw.randrange(3, 200) for _ in range(3)]
                else:
                    prompt = [1] + [draw.randrange(3, 200) for _ in range(draw.randrange(2, 40))]
                params = SamplingParams(max_tokens=draw.randrange(1, 25), temperature=1.0, seed=i, ignore_eos=True)
                n = 2 if draw.random() < 0.15 else 1
                thread, out = start(sampler.generate, [prompt], params, n)
                threads.append(thread)
                done.append((prompt, params, n, out))
                threading.Event().wait(draw.random() * 0.004)
            deadline = time.monotonic() + 60
            for thread in threads:
                thread.join(max(0.0, deadline - time.monotonic()))
            self.assertFalse(any(t.is_alive() for t in threads), "a request never finished")
        finally:
            sampler.close()
        self.assertEqual([d[3].get("error") for d in done], [None] * 40)
        alone = Sampler(CachedDecoder(model, "fp32"), TOKENIZER, ModelGate())
        try:
            for prompt, params, n, out in done:
                assert_same(self, out["rows"], alone.generate([prompt], params, n), 1e-5)
        finally:
            alone.close()

    def test_prompts_past_a_steps_budget_ride_a_later_step(self):
        """Three cold prompts of 6, 7 and 12 ids start together under a budget of 13 prompt ids a step:
        whatever their order, one step feeds the 6 and the 7 and another the 12 (the first pending prompt
        always rides, however long), the rows waiting in between feeding nothing; each samples what it
        samples alone."""
        if attention.attention_kernel() is None:
            self.skipTest("prompts ride decode steps only beside the fused attention kernel")
        model = micro_model(seed=19)
        prompts = [[1] + list(range(40, 45)), [1] + list(range(50, 56)), [1] + list(range(60, 71))]
        params = SamplingParams(max_tokens=10, temperature=1.0, seed=3, ignore_eos=True)
        decoder, gate = Recording(model), ModelGate()
        sampler = Sampler(decoder, TOKENIZER, gate, step_prompt_ids=13)
        try:
            with gate.exclusive():
                started = [start(sampler.generate, [p], params) for p in prompts]
                wait_for(lambda: len(sampler._pending) == 3)
            for thread, _ in started:
                thread.join()
        finally:
            sampler.close()
        self.assertEqual((sampler.stepped_prefills, sorted(decoder.widths[:2])), (3, [7, 12]))
        alone = Sampler(CachedDecoder(model, "fp32"), TOKENIZER, ModelGate())
        try:
            for p, (_, out) in zip(prompts, started):
                assert_same(self, out["rows"], alone.generate([p], params), 1e-5)
        finally:
            alone.close()

    def test_a_request_joins_into_the_hole_a_finished_row_left(self):
        """A and B start together, B (the shorter prompt, row 0) finishes first and leaves a hole that
        the step reads nothing of; C, B's next turn (its prompt and completion and more), arrives while
        A decodes and takes B's row, its cached prefix copied straight into it (no cache of its own)
        and its new ids fed within A's next decode step (where the fused kernel attends row by row;
        elsewhere an extend of its own into the row): the batch never holds more than two rows, no row
        is copied out of it (no compaction), and A and C sample what they sample alone."""
        model = micro_model(seed=13)
        a_prompt, b_prompt = [1] + list(range(40, 60)), [1, 80, 81] + list(range(100, 120))
        a_params = SamplingParams(max_tokens=60, temperature=1.0, seed=5, ignore_eos=True)
        b_params = SamplingParams(max_tokens=4, temperature=1.0, seed=6, ignore_eos=True)
        c_params = SamplingParams(max_tokens=20, temperature=0.0, ignore_eos=True)
        decoder, gate = Recording(model, pause_at=10), ModelGate()
        sampler = Sampler(decoder, TOKENIZER, gate, prefix_cache_bytes=1 << 24)
        try:
            with gate.exclusive():  # A and B start as one batch
                (thread_a, a), (thread_b, b) = start(sampler.generate, [a_prompt], a_params), start(
                    sampler.generate, [b_prompt], b_params
                )
                wait_for(lambda: len(sampler._pending) == 2)
            decoder.reached.wait(60)
            thread_b.join()
            c_prompt = b_prompt + b["rows"][0].ids + [90, 91, 92]
            with mock.patch.object(KVCache, "empty", wraps=KVCache.empty) as caches, mock.patch.object(
                decoder, "extend", wraps=decoder.extend
            ) as extends:
                thread_c, c = start(sampler.generate, [c_prompt], c_params)
                wait_for(lambda: len(sampler._pending) == 1)
                decoder.release.set()
                for thread in (thread_a, thread_c):
                    thread.join()
            self.assertEqual(caches.call_count, 0, "C's prefix went into B's row, in no cache of its own")
        finally:
            sampler.close()
        self.assertEqual((sampler.joins, sampler.prefix_cache.hits), (1, 1))
        stepped = int(attention.attention_kernel() is not None)
        # A's and B's prompts rode the first step, C's new ids a later one; or C's were an extend.
        self.assertEqual((sampler.stepped_prefills, extends.call_count), (3 * stepped, 1 - stepped))
        if stepped:  # the step after C's admission fed A's id and C's new ids
            fed = len(c_prompt) - sampler.prefix_cache.saved_tokens
            self.assertIn(fed, decoder.widths)
        self.assertEqual(max(rows for rows, _ in decoder.shapes), 2)
        self.assertEqual(sampler.compactions, 0)
        alone = Sampler(CachedDecoder(model, "fp32"), TOKENIZER, ModelGate())
        try:
            solo = [alone.generate([p], q) for p, q in ((a_prompt, a_params), (c_prompt, c_params))]
        finally:
            alone.close()
        assert_same(self, a["rows"], solo[0], 1e-5)
        assert_same(self, c["rows"], solo[1], 1e-5)

    def test_a_request_that_finished_before_the_batch_failed_gets_its_rows(self):
        """A's row finishes in the step where emptying it from the batch fails: A, complete, still gets
        its ids (requests are told at the next decode step); B, still decoding, gets the error."""
        model = micro_model(seed=14)
        gate = ModelGate()
        sampler = Sampler(CachedDecoder(model, "fp32"), TOKENIZER, gate)
        a_params = SamplingParams(max_tokens=3, temperature=0.0, ignore_eos=True)
        b_params = SamplingParams(max_tokens=30, temperature=0.0, ignore_eos=True)
        try:
            with mock.patch.object(KVCache, "vacate", side_effect=RuntimeError("lost the batch")):
                with gate.exclusive():  # one batch: A's shorter prompt is row 0, so its row leaves a hole
                    (thread_a, a), (thread_b, b) = start(sampler.generate, [[1, 80, 81]], a_params), start(
                        sampler.generate, [[1] + list(range(40, 60))], b_params
                    )
                    wait_for(lambda: len(sampler._pending) == 2)
                thread_a.join()
                thread_b.join()
        finally:
            sampler.close()
        self.assertEqual(len(a["rows"][0].ids), 3)
        self.assertIn("lost the batch", str(b["error"]))

    def test_episodes_of_turns_overlapping_in_one_batch_match_their_solo_runs(self):
        """Six agent-like episodes of three turns each, every turn's prompt its last prompt and
        completion plus an observation, run at once with drafts and the prefix cache: rows finish at
        different steps (holes), turns join the running batch (into holes, extending from the prefix
        cache in place) in whatever order the threads make. Each turn samples what it samples when its
        episode runs alone: the same ids, logprobs within batched arithmetic's last bits."""
        model = micro_model(seed=21)
        rng = random.Random(7)
        episodes = [
            {
                "first": [1] + [rng.randrange(3, 200) for _ in range(rng.randrange(20, 60))],
                "observations": [[rng.randrange(3, 200) for _ in range(rng.randrange(5, 30))] for _ in range(2)],
                "params": [
                    SamplingParams(
                        max_tokens=rng.randrange(3, 25),
                        temperature=0.0 if e % 3 else 1.0,
                        seed=e,
                        ignore_eos=True,
                    )
                    for _ in range(3)
                ],
            }
            for e in range(6)
        ]

        def episode(sampler, spec, out):
            prompt = spec["first"]
            for turn, params in enumerate(spec["params"]):
                row = sampler.generate([prompt], params)[0]
                out.append(row)
                if turn < 2:
                    prompt = prompt + row.ids + spec["observations"][turn]

        def sampler():
            return Sampler(
                CachedDecoder(model, "fp32"), TOKENIZER, ModelGate(), prefix_cache_bytes=1 << 24, draft_tokens=4
            )

        solo = []
        for spec in episodes:
            alone, turns = sampler(), []
            try:
                episode(alone, spec, turns)
            finally:
                alone.close()
            solo.append(turns)
        together = sampler()
        outs = [[] for _ in episodes]
        try:
            threads = [threading.Thread(target=episode, args=(together, spec, out)) for spec, out in zip(episodes, outs)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        finally:
            together.close()
        self.assertGreaterEqual(together.prefix_cache.hits, 12)  # every later turn extends its last
        if attention.attention_kernel() is not None:  # turns joining the batch fed within its steps
            self.assertGreater(together.stepped_prefills, 0)
        for got, expected in zip(outs, solo):
            assert_same(self, got, expected, 1e-4)

    def test_requests_sending_one_prompt_share_its_prefill(self):
        model = micro_model(seed=12)
        gate = ModelGate()
        sampler = Sampler(CachedDecoder(model, "fp32"), TOKENIZER, gate)
        shared, other = [1] + list(range(50, 60)), [1, 90, 91]
        requests = [([shared], 1), ([shared], 2), ([other, shared], 1)]
        params = SamplingParams(max_tokens=12, temperature=1.0, seed=3, ignore_eos=True)
        try:
            solo = [sampler.generate(p, params, n) for p, n in requests]
            before = sampler.prefilled_prompts
            self.assertEqual(before, 4)
            with gate.exclusive():  # queue all three, then let them start as one batch
                threads = [start(sampler.generate, p, params, n) for p, n in requests]
                wait_for(lambda: len(sampler._pending) == 3)
            for (thread, out), alone in zip(threads, solo):
                thread.join()
                assert_same(self, out["rows"], alone, 1e-5)
            self.assertEqual(sampler.prefilled_prompts - before, 2, "one prefill per distinct prompt")
        finally:
            sampler.close()

    def test_a_shared_prefix_copies_only_positions_its_row_holds(self):
        """A row that holds 70 positions of a 200-id common prefix (a prefix-cache hit whose new ids are
        still pending) gives a copy of its first 64 (whole blocks of 16); one that holds 40 gives none."""
        model = micro_model(seed=3)
        cache = KVCache.empty(model.config, 2, 256, torch.float32)
        for layer in cache.keys + cache.values:
            layer.normal_()
        cache.lens = torch.tensor([70, 40])
        ids = list(range(3, 203))
        shared = SharedPrefix.of_row(cache, 0, ids)
        self.assertEqual(shared.ids, ids[:64])
        self.assertTrue(torch.equal(shared.keys[0], cache.keys[0][0, :, :64]))
        self.assertIsNone(SharedPrefix.of_row(cache, 1, ids))

    def test_rows_sharing_a_system_prompt_read_it_from_one_copy(self):
        """Three requests whose prompts start with one 83-id system prompt start as a batch: its first 80
        positions (whole blocks of 16) become the batch's shared copy, which each row takes and the
        fused kernel reads instead of the row's own. The first finishes early; while the others decode,
        its next turn (extending it from the prefix cache), another request with the system prompt, one
        without and one sharing its first 70 ids join: the first two read the copy, the third none, the
        fourth its first 64 positions. Every request samples what it samples alone (ids equal, logprobs
        within the last bits the copy's arithmetic may change)."""
        model = micro_model(seed=15)
        system = [1] + [3 + (7 * i) % 150 for i in range(82)]
        prompts = [system + tail for tail in ([160, 161], [170], [180, 181, 182])]
        short, params = (SamplingParams(max_tokens=m, temperature=0.0, ignore_eos=True) for m in (4, 24))
        decoder, gate = Recording(model, pause_at=8), ModelGate()
        sampler = Sampler(decoder, TOKENIZER, gate, prefix_cache_bytes=1 << 24)
        try:
            with gate.exclusive():
                first = [start(sampler.generate, [p], short if i == 0 else params) for i, p in enumerate(prompts)]
                wait_for(lambda: len(sampler._pending) == 3)
            decoder.reached.wait(60)
            first[0][0].join()  # done at its fourth id
            turn = prompts[0] + first[0][1]["rows"][0].ids + [195, 196]
            prompts += [turn, [*system, 190], [1, 200, 201, 202], system[:70] + [205, 206]]
            late = [start(sampler.generate, [p], params) for p in prompts[3:]]
            wait_for(lambda: len(sampler._pending) == 4)
            decoder.release.set()
            for thread, _ in (*first, *late):
                thread.join()
        finally:
            sampler.close()
        if attention.attention_kernel() is not None:
            self.assertEqual(sampler.shared_prefix_rows, 6)
            # Every prompt rode a step: three from the prefix cache (the turn, the system prompt's request
            # and the one sharing its first 70), the first three and the one without the system prompt
            # from position 0, the first three taking the copy made after their step.
            self.assertEqual(sampler.stepped_prefills, 7)
            self.assertEqual([out["rows"][0].shared for _, out in (*first, *late)], [80, 80, 80, 80, 80, 0, 64])
        alone = Sampler(CachedDecoder(model, "fp32"), TOKENIZER, ModelGate())
        try:
            solo = [alone.generate([p], short if i == 0 else params) for i, p in enumerate(prompts)]
        finally:
            alone.close()
        for (_, out), expected in zip((*first, *late), solo):
            assert_same(self, out["rows"], expected, 1e-5)


class BoundsTest(unittest.TestCase):
    def test_rows_and_kv_bytes_in_flight_stay_within_the_bounds(self):
        """Six requests of two rows queued at once: with room for 4 rows, or for the keys and values of
        3 rows of 48 positions, the batch never holds more; every request still completes exactly."""
        model = micro_model(seed=13)
        prompts = [[1, 60 + i, 61, 62, 63] for i in range(6)]
        params = SamplingParams(max_tokens=43, temperature=1.0, seed=4, ignore_eos=True)  # 48 positions a row
        for max_rows, max_kv, most in ((4, None, 4), (8, 3 * 48 * PER_TOKEN, 2)):
            with self.subTest(max_rows=max_rows, max_kv=max_kv):
                decoder = Recording(model)
                gate = ModelGate()
                sampler = Sampler(decoder, TOKENIZER, gate, max_rows=max_rows, max_kv_bytes=max_kv)
                try:
                    with gate.exclusive():
                        threads = [start(sampler.generate, [p], params, 2) for p in prompts]
                        wait_for(lambda: len(sampler._pending) == 6)
                    for thread, _ in threads:
                        thread.join()
                    solo = [sampler.generate([p], params, 2) for p in prompts]
                finally:
                    sampler.close()
                # 3 rows' bytes hold one request of 2 rows, not two.
                self.assertEqual(max(rows for rows, _ in decoder.shapes), most)
                if max_kv is not None:
                    self.assertLessEqual(max(r * c * PER_TOKEN for r, c in decoder.shapes), max_kv)
                    self.assertLessEqual(sampler.peak_kv_bytes, max_kv)
                for (_, out), alone in zip(threads, solo):
                    assert_same(self, out["rows"], alone, 1e-5)

    def test_the_prefix_cache_gives_way_to_the_running_batch(self):
        model = micro_model(seed=14)
        bound = 250 * PER_TOKEN
        sampler = Sampler(
            CachedDecoder(model, "fp32"), TOKENIZER, ModelGate(), prefix_cache_bytes=64 << 20, max_kv_bytes=bound
        )
        params = SamplingParams(max_tokens=20, temperature=0.0, ignore_eos=True)
        try:
            for base in (40, 80, 120):  # three kept entries of 50 positions: 150 of the 250
                sampler.generate([[1] + [base + i for i in range(30)]], params)
            self.assertEqual(sampler.prefix_cache.stats()["entries"], 3)
            # A batch of 2 x 80 positions leaves room for 90: two entries go when it is admitted, the
            # third when its 79-position rows are kept (both rows sampled the same greedy ids: one entry).
            more = SamplingParams(max_tokens=39, temperature=0.0, ignore_eos=True)
            sampler.generate([[1] + list(range(150, 190))], more, n=2)
            self.assertLessEqual(sampler.peak_kv_bytes, bound)
            stats = sampler.prefix_cache.stats()
            self.assertEqual((stats["evictions"], stats["entries"], stats["tokens"]), (3, 1, 79))
        finally:
            sampler.close()

    def test_a_full_queue_refuses_with_503_and_a_request_over_a_bound_with_400(self):
        model = micro_model(seed=15)
        gate = ModelGate()
        sampler = Sampler(
            CachedDecoder(model, "fp32"), TOKENIZER, gate, max_rows=2, max_queued_rows=2,
            max_kv_bytes=2 * 100 * PER_TOKEN,
        )
        params = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)
        try:
            with gate.exclusive():
                thread, out = start(sampler.generate, [[1, 70, 71]], params, 2)
                wait_for(lambda: len(sampler._pending) == 1)
                with self.assertRaises(Refused) as full:
                    sampler.generate([[1, 72]], params)
                self.assertEqual((full.exception.status, full.exception.code), (503, "queue_full"))
                self.assertEqual(full.exception.retry_after, 1.0)
                self.assertIn("at capacity", str(full.exception))
                self.assertEqual(sampler.stats()["refused"], 1)
            thread.join()
            self.assertEqual([len(r.ids) for r in out["rows"]], [8, 8])
            # Once the queue drains, the same request runs.
            self.assertEqual(len(sampler.generate([[1, 72]], params)[0].ids), 8)
            with self.assertRaises(Refused) as rows:
                sampler.generate([[1, 72]], params, n=3)
            self.assertEqual((rows.exception.status, rows.exception.code), (400, "too_many_rows"))
            with self.assertRaises(Refused) as kv:
                sampler.generate([[1] + [72] * 150], SamplingParams(max_tokens=60), n=2)
            self.assertEqual((kv.exception.status, kv.exception.code), (400, "kv_too_large"))
        finally:
            sampler.close()


class OverloadOverHttpTest(unittest.TestCase):
    def test_503_with_retry_after_and_a_reason_then_200_when_capacity_frees(self):
        worker = Worker(
            preset="micro", dtype="fp32", device="cpu", max_seq_len=128, max_rows=2, max_queued_rows=2, kv_cache_mb=64
        )
        body = {"prompt": [1, 70, 71], "max_tokens": 6, "temperature": 0, "ignore_eos": True, "n": 2}
        with serve(worker) as call:
            with worker.gate.exclusive():  # nothing decodes: the first request waits in the queue
                thread, first = start(call, "/v1/completions", body)
                wait_for(lambda: len(worker.sampler._pending) == 1)
                status, headers, reply = call("/v1/completions", {**body, "n": 1})
                self.assertEqual(status, 503)
                self.assertEqual(headers["Retry-After"], "1")
                self.assertEqual(reply["error"]["type"], "overloaded_error")
                self.assertEqual(reply["error"]["code"], "queue_full")
                self.assertIn("the engine is at capacity: 2 rows wait", reply["error"]["message"])
            thread.join()
            self.assertEqual(first["rows"][0], 200)
            status, _, reply = call("/v1/completions", {**body, "n": 1})
            self.assertEqual((status, len(reply["choices"][0]["token_ids"])), (200, 6))
            status, headers, reply = call("/v1/completions", {**body, "n": 3})
            self.assertEqual((status, reply["error"]["code"]), (400, "too_many_rows"))
            self.assertNotIn("Retry-After", headers)
            capacity = call("/info")[2]["capacity"]
            self.assertEqual((capacity["refused"], capacity["max_rows"], capacity["max_queued_rows"]), (1, 2, 2))
            self.assertEqual(capacity["max_kv_bytes"], 64 * 2**20)


class ModelGateRunTest(unittest.TestCase):
    def test_exclusive_work_from_many_callers_runs_on_one_thread(self):
        # Each HTTP request has its own thread; the model's kernels should see only one.
        gate = ModelGate()
        seen: list[str] = []

        def call():
            seen.append(gate.run(lambda: threading.current_thread().name))

        callers = [threading.Thread(target=call) for _ in range(4)]
        for t in callers:
            t.start()
        for t in callers:
            t.join()
        self.assertEqual(len(seen), 4)
        self.assertEqual(len(set(seen)), 1)
        self.assertTrue(seen[0].startswith("model"))
        self.assertNotIn(seen[0], {t.name for t in callers})

    def test_generation_and_exclusive_work_interleave_without_stranding_requests(self):
        """Requests and exclusive work from many threads at once: each request is served, whether it
        arrived while a session ran, while exclusive work held the model, or as either ended."""
        gate = ModelGate()
        sampler = Sampler(CachedDecoder(micro_model(), "fp32"), TOKENIZER, gate)
        served, ran = [], []

        def client(k: int):
            for i in range(6):
                if (k + i) % 2:
                    params = SamplingParams(max_tokens=4, seed=k * 10 + i, ignore_eos=True)
                    rows = sampler.generate([[1, 60 + k, 70 + i]], params)
                    served.append(len(rows[0].ids))
                else:
                    ran.append(gate.run(lambda: threading.current_thread().name))

        callers = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(6)]
        try:
            for t in callers:
                t.start()
            for t in callers:
                t.join(timeout=60)
            self.assertFalse(any(t.is_alive() for t in callers), "a caller never returned")
        finally:
            sampler.close()
        self.assertEqual((len(served), len(ran)), (18, 18))
        self.assertEqual(set(served), {4})
        self.assertEqual(len(set(ran)), 1)


class ShutdownTest(unittest.TestCase):
    def test_close_refuses_what_decodes_and_what_waits_without_waiting_for_it(self):
        """A shutdown ends a long generation at its next step: the request decoding, one waiting in the
        queue for a free row and one sent after the close all get 503 shutting_down."""
        decoder = Recording(micro_model(max_seq_len=4096), pause_at=3)
        sampler = Sampler(decoder, TOKENIZER, ModelGate(), max_rows=1)
        long = SamplingParams(max_tokens=4000, ignore_eos=True)
        decoding, a = start(sampler.generate, [[1, 60, 61]], long)
        self.assertTrue(decoder.reached.wait(30))  # the long request holds the only row, mid-decode
        queued, b = start(sampler.generate, [[1, 70]], long)
        wait_for(lambda: sampler.stats()["queued_rows"] == 1)
        decoder.release.set()
        sampler.close()
        for thread in (decoding, queued):
            thread.join(timeout=30)
            self.assertFalse(thread.is_alive())
        self.assertLess(decoder.calls, 4000)
        for out in (a, b):
            self.assertIsInstance(out["error"], Refused)
            self.assertEqual((out["error"].status, out["error"].code), (503, "shutting_down"))
        with self.assertRaises(Refused):
            sampler.generate([[1, 80]], long)


if __name__ == "__main__":
    unittest.main()
