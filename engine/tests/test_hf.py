import tempfile
import threading
import unittest
from types import SimpleNamespace

import torch
from torch import nn

from coa_engine.hf import HFCausalLM, HFDecoder, HFState, HFWorker, _legacy
from coa_engine.sampling import ModelGate, Sampler, SamplingParams
from coa_engine.tokenizer import PAD_ID
from coa_engine.train import PolicyParams, Sequence, Trainer

from .helpers import TOKENIZER, serve

try:
    import transformers
except ImportError:  # Debian's torch has no transformers beside it; a GPU machine's usually has
    transformers = None


class CausalBigram(nn.Module):
    """The call a Hugging Face causal LM answers (`model(input_ids=...).logits`), from a bigram table:
    enough to drive the trainer without `transformers`."""

    def __init__(self, vocab: int):
        super().__init__()
        self.table = nn.Embedding(vocab, vocab)

    def forward(self, input_ids: torch.Tensor):
        return SimpleNamespace(logits=self.table(input_ids))


class CachingSum(nn.Module):
    """A stand-in with the Hugging Face call and a cache (per-layer keys and values, here the ids fed):
    the logits depend on the last id and on the sum of every id before (padding is id 0), so a row
    paired with another row's cache samples something else."""

    def __init__(self, vocab: int):
        super().__init__()
        self.last, self.before = nn.Embedding(vocab, vocab), nn.Embedding(vocab, vocab)

    def forward(self, input_ids, attention_mask=None, position_ids=None, past_key_values=None, use_cache=False):
        if past_key_values is not None:  # with transformers present the decoder hands a DynamicCache
            past_key_values = _legacy(past_key_values)
        fed = input_ids.float()[:, None, :, None]  # [rows, 1 head, positions, 1]
        past = fed if past_key_values is None else torch.cat((past_key_values[0][0], fed), dim=2)
        seen = past_key_values[0][0].sum(dim=(1, 2, 3)) if past_key_values is not None else 0.0
        running = (input_ids.cumsum(-1) + torch.as_tensor(seen).long().reshape(-1, 1)) % self.before.num_embeddings
        return SimpleNamespace(logits=self.last(input_ids) + self.before(running), past_key_values=((past, past),))


class PausingDecoder(HFDecoder):
    """Holds decode step `pause_at` until released, so that a request arrives mid-batch."""

    def __init__(self, model, pause_at: int):
        super().__init__(model, PAD_ID, 512)
        self.pause_at, self.calls = pause_at, 0
        self.reached, self.release = threading.Event(), threading.Event()

    def decode(self, state, ids):
        self.calls += 1
        if self.calls == self.pause_at:
            self.reached.set()
            self.release.wait(60)
        return super().decode(state, ids)


class HFBatchingTest(unittest.TestCase):
    def test_a_request_joins_a_running_batch_and_rows_leave_it(self):
        """The sampler's batch on the Hugging Face backend's state (left-padded, no holes: a finished
        row is compacted away), with a stand-in model (no `transformers`): B joins while A decodes and
        finishes first; both sample what they sample alone."""
        torch.manual_seed(0)
        model = HFCausalLM(CachingSum(TOKENIZER.vocab_size))
        prompts, budgets = ([1, 40, 41, 42, 43], [1, 50]), (30, 8)
        params = [SamplingParams(max_tokens=m, temperature=0.0, ignore_eos=True) for m in budgets]
        alone = Sampler(HFDecoder(model, PAD_ID, 512), TOKENIZER, ModelGate())
        try:
            solo = [alone.generate([p], q)[0].ids for p, q in zip(prompts, params)]
        finally:
            alone.close()
        decoder = PausingDecoder(model, pause_at=5)
        sampler = Sampler(decoder, TOKENIZER, ModelGate())
        results = {}

        def run(i):
            results[i] = sampler.generate([prompts[i]], params[i])[0].ids

        try:
            first = threading.Thread(target=run, args=(0,))
            first.start()
            decoder.reached.wait(60)
            second = threading.Thread(target=run, args=(1,))
            second.start()
            while len(sampler._pending) < 1:
                threading.Event().wait(0.002)
            decoder.release.set()
            first.join()
            second.join()
        finally:
            sampler.close()
        self.assertEqual(sampler.joins, 1)
        self.assertEqual(sampler.compactions, 1)
        self.assertEqual([results[0], results[1]], solo)


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


def tiny_hf_model(folder: str) -> None:
    """A random two-layer Llama and a byte-level BPE tokenizer trained on a few sentences, saved as a
    Hugging Face model folder: the real classes and files, no downloaded weights."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    text = ["the search tool found the capital of France", "def add(a, b): return a + b", "naive cafe 42"]
    trainer = trainers.BpeTrainer(
        vocab_size=320, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(text, trainer)
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")
    fast.save_pretrained(folder)
    config = transformers.LlamaConfig(
        vocab_size=len(fast),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        eos_token_id=fast.eos_token_id,
        bos_token_id=fast.eos_token_id,
    )
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(folder)


@unittest.skipUnless(transformers, "needs transformers")
class HFBackendTest(unittest.TestCase):
    """`--hf-model` end to end on a real transformers model (on the GPU where torch sees one)."""

    @classmethod
    def setUpClass(cls):
        cls.folder = tempfile.TemporaryDirectory()
        tiny_hf_model(cls.folder.name)

    @classmethod
    def tearDownClass(cls):
        cls.folder.cleanup()

    def worker(self) -> HFWorker:
        worker = HFWorker(self.folder.name, dtype="fp32")
        self.addCleanup(worker.sampler.close)  # closing twice is harmless
        return worker

    def test_token_bytes_spell_the_text(self):
        tokenizer = self.worker().tokenizer
        text = "the café found 42 naïve answers"
        self.assertEqual(b"".join(tokenizer.token_bytes(t) for t in tokenizer.encode(text)), text.encode())

    def test_sampled_logprobs_equal_a_forward_pass(self):
        """Prompts of different lengths share left-padded decode steps (n=2: four rows); each sampled id's
        logprob equals the uncached forward pass over that row alone, and greedy ids are its argmax."""
        worker = self.worker()
        prompts = [worker.tokenizer.encode("the search tool"), worker.tokenizer.encode("def add(a, b): return")]
        for temperature in (1.0, 0.0):
            params = SamplingParams(max_tokens=12, temperature=temperature, seed=3, ignore_eos=True)
            rows = worker.sampler.generate(prompts, params, n=2)
            self.assertEqual([len(r.ids) for r in rows], [12] * 4)
            full = [r.prompt + r.ids for r in rows]
            for r, lp in zip(rows, worker.trainer.score(full, 1.0)):
                for x, y in zip(r.logprobs, lp[len(r.prompt) - 1 :]):
                    self.assertAlmostEqual(x, y, delta=1e-3)
            if temperature == 0.0:
                with torch.no_grad():
                    for r, ids in zip(rows, full):
                        logits = worker.model(torch.tensor([ids], device=worker.device))[0]
                        self.assertEqual(logits[len(r.prompt) - 1 : -1].argmax(-1).tolist(), r.ids)

    def test_a_policy_step_follows_the_advantages(self):
        """GRPO's step on the real model, with the old logprobs its own sampler gave: the rewarded
        completion gains on the penalised one (what a small step on their summed objective guarantees),
        and the first step's ratio is 1 (sampler and trainer agree), so nothing is clipped."""
        worker = self.worker()
        prompt = worker.tokenizer.encode("the search tool")
        params = SamplingParams(max_tokens=10, temperature=1.0, seed=5, ignore_eos=True)
        rows = worker.sampler.generate([prompt], params, n=2)
        batch = []
        for r, advantage in zip(rows, (1.0, -1.0)):
            n = len(r.prompt)
            s = Sequence(r.prompt + r.ids, [0] * n + [1] * len(r.ids), old_logprobs=[0.0] * n + r.logprobs)
            s.advantages = [advantage] * len(s.ids)
            batch.append(s)

        def completion_logprob(s: Sequence) -> float:
            return sum(worker.trainer.score([s.ids], 1.0)[0][len(prompt) - 1 :])

        before = [completion_logprob(s) for s in batch]
        stats = worker.trainer.policy(batch, PolicyParams(), lr=1e-3)
        self.assertEqual(stats["tokens"], 20)
        self.assertEqual(stats["clip_frac"], 0.0)
        self.assertLess(stats["approx_kl"], 1e-5)
        after = [completion_logprob(s) for s in batch]
        self.assertGreater(after[0] - after[1], before[0] - before[1])

    def test_serves_trains_and_restores_a_checkpoint(self):
        worker = self.worker()
        with serve(worker) as call:
            status, _, info = call("/info")
            self.assertEqual((status, info["backend"], info["device"]), (200, "hf", worker.device))
            body = {"prompt": "the search tool", "max_tokens": 6, "temperature": 0, "ignore_eos": True, "logprobs": 0}
            status, _, reply = call("/v1/completions", body)
            self.assertEqual(status, 200, reply)
            self.assertEqual(len(reply["choices"][0]["logprobs"]["token_logprobs"]), 6)
            ids = worker.tokenizer.encode("def add(a, b): return a + b")
            batch = [Sequence(ids, [0] + [1] * (len(ids) - 1))]
            first = worker.trainer.sft(batch, lr=0.01)["loss"]
            for _ in range(4):
                last = worker.trainer.sft(batch, lr=0.01)["loss"]
            self.assertLess(last, first)
            with tempfile.TemporaryDirectory() as saved:
                worker.save(saved)
                restored = self.worker()
                self.assertEqual(restored.load(saved)["step"], 5)
                after = restored.trainer.score([ids], 1.0)[0]
                for x, y in zip(after, worker.trainer.score([ids], 1.0)[0]):
                    self.assertAlmostEqual(x, y, delta=1e-5)


if __name__ == "__main__":
    unittest.main()
