"""Sampling with a KV cache, batched across requests.

Requests queue up; one thread runs the batch: it prefills newly admitted prompts (once per prompt,
then copies the cache for its n samples), merges them into the running batch, and decodes one token
per row per step, dropping rows as they finish. Every row draws its random numbers from its own
generator, seeded from the request's seed and the row's index, so a seeded request gives the same
samples whatever else shares the batch (up to last-bit differences of batched arithmetic).

Logprobs: the logprob of each sampled token under the temperature-scaled model distribution,
log_softmax(logits / T), before top-p truncation. That is the quantity the trainer recomputes
(/train/policy with the same temperature), so with top_p = 1 it is exactly the sampling
distribution. With top_p < 1 the sampled token's probability under the truncated distribution is
higher than reported. With temperature 0 (greedy) it is log_softmax(logits).
"""

from __future__ import annotations

import atexit
import random
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
from torch.nn import functional as F

from .model import KVCache, Transformer
from .precision import autocast
from .tokenizer import PAD_ID


@dataclass(frozen=True)
class SamplingParams:
    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    # Alternatives to report per position (OpenAI `logprobs: k`); 0 reports only the sampled token.
    top_logprobs: int = 0
    ignore_eos: bool = False


@dataclass(eq=False)
class Row:
    """One sample being generated: a prompt, its sampling state and everything it produced so far."""

    index: int
    prompt: list[int]
    params: SamplingParams
    max_new: int
    stops: list[bytes]
    generator: torch.Generator | None
    ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top: list[list[tuple[int, float]]] = field(default_factory=list)
    text: bytearray = field(default_factory=bytearray)
    finish_reason: str | None = None
    stop_reason: str | None = None
    # Byte offsets of the matched stop string in `text`.
    stop_span: tuple[int, int] | None = None
    job: _Job | None = None


def row_generator(seed: int | None, index: int) -> torch.Generator:
    g = torch.Generator()
    if seed is None:
        g.manual_seed(random.SystemRandom().getrandbits(63))
    else:
        g.manual_seed((seed * 0x9E3779B97F4A7C15 + index) % (1 << 63))
    return g


def sample(logits: torch.Tensor, temperature: torch.Tensor, top_p: torch.Tensor, uniform: torch.Tensor):
    """Draws one token per row by inverting the CDF of the top-p truncated, temperature-scaled
    distribution at `uniform` (rows with temperature 0 take the argmax). Returns the tokens and the
    full log-distribution their logprobs are reported under (see the module note).
    """
    greedy = temperature == 0
    scale = torch.where(greedy, torch.ones_like(temperature), temperature)
    logp = F.log_softmax(logits.float() / scale[:, None], dim=-1)
    probs, order = logp.exp().sort(dim=-1, descending=True)
    # Keep the smallest prefix whose mass reaches top_p: a token stays if the mass before it is short.
    keep = (probs.cumsum(-1) - probs) < top_p[:, None]
    cdf = (probs * keep).cumsum(-1)
    pos = torch.searchsorted(cdf, (uniform * cdf[:, -1])[:, None], right=True)
    pos = torch.minimum(pos, keep.sum(-1, keepdim=True) - 1)
    tokens = order.gather(1, pos)[:, 0]
    tokens = torch.where(greedy, logits.argmax(-1), tokens)
    return tokens, logp


def find_stop(text: bytearray, added: int, stops: list[bytes]) -> tuple[int, int, int] | None:
    """The stop string completed by the last `added` bytes that ends first: (stop index, start, end)."""
    best = None
    for i, s in enumerate(stops):
        p = text.find(s, max(0, len(text) - added - len(s) + 1))
        if p >= 0 and (best is None or p + len(s) < best[2]):
            best = (i, p, p + len(s))
    return best


class ModelGate:
    """Generation batches and exclusive work (training, checkpoints) take turns on the model, so a
    sample never mixes weights from before and after an update. Exclusive work waiting stops new
    rows from joining the batch; it runs once the batch drains.
    """

    def __init__(self):
        self._cv = threading.Condition()
        self._busy = False
        self._exclusive_waiting = 0

    @contextmanager
    def exclusive(self):
        with self._cv:
            self._exclusive_waiting += 1
            self._cv.wait_for(lambda: not self._busy)
            self._exclusive_waiting -= 1
            self._busy = True
        try:
            yield
        finally:
            self._release()

    @contextmanager
    def generation(self):
        with self._cv:
            self._cv.wait_for(lambda: not self._busy and not self._exclusive_waiting)
            self._busy = True
        try:
            yield
        finally:
            self._release()

    def exclusive_waiting(self) -> bool:
        return self._exclusive_waiting > 0

    def _release(self):
        with self._cv:
            self._busy = False
            self._cv.notify_all()


class CachedDecoder:
    """The model seen by the sampler: prefill a padded batch, then decode one token per row."""

    def __init__(self, model: Transformer, dtype: str):
        self.model, self.dtype = model, dtype
        self.max_seq_len = model.config.max_seq_len

    def prefill(self, prompts: list[list[int]], capacity: int) -> tuple[KVCache, torch.Tensor]:
        lengths = torch.tensor([len(p) for p in prompts])
        ids = torch.full((len(prompts), int(lengths.max())), PAD_ID, dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, : len(p)] = torch.tensor(p)
        device = self.model.rope_cos.device
        ids, lengths = ids.to(device), lengths.to(device)
        cache = KVCache.empty(self.model.config, len(prompts), capacity, torch.float32, device)
        with autocast(self.dtype, device.type):
            logits = self.model(ids, cache, lengths)
        return cache, logits[torch.arange(len(prompts), device=device), lengths - 1].float()

    def decode(self, cache: KVCache, ids: torch.Tensor) -> torch.Tensor:
        with autocast(self.dtype, ids.device.type):
            return self.model.decode(ids, cache).float()


@dataclass
class _Job:
    prompts: list[list[int]]
    rows: list[Row]
    n: int
    done: threading.Event = field(default_factory=threading.Event)
    left: int = 0
    error: BaseException | None = None


class Sampler:
    def __init__(self, decoder, tokenizer, gate: ModelGate, max_rows: int = 64, prefill_tokens: int = 8192):
        self.decoder, self.tokenizer, self.gate = decoder, tokenizer, gate
        self.max_rows, self.prefill_tokens = max_rows, prefill_tokens
        self._pending: list[_Job] = []
        self._cv = threading.Condition()
        self.generated_tokens = 0
        self.busy_seconds = 0.0
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)
        self._thread.start()
        # A thread that used torch's thread pool must end before the interpreter does, or the
        # runtime's teardown can abort the process.
        atexit.register(self.close)

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        self._thread.join()

    def generate(self, prompts: list[list[int]], params: SamplingParams, n: int = 1) -> list[Row]:
        """Samples `n` completions per prompt; rows come back in order (prompt-major)."""
        stops = [s.encode("utf-8", "replace") for s in params.stop]
        rows = []
        for i, prompt in enumerate(prompts):
            room = self.decoder.max_seq_len - len(prompt)
            if not prompt or room < 1:
                raise ValueError(
                    f"prompt {i} has {len(prompt)} tokens; it needs 1 to {self.decoder.max_seq_len - 1}"
                )
            for j in range(n):
                gen = row_generator(params.seed, i * n + j) if params.temperature > 0 else None
                rows.append(Row(i * n + j, prompt, params, min(params.max_tokens, room), stops, gen))
        job = _Job(prompts, rows, n, left=len(rows))
        for r in rows:
            r.job = job
        with self._cv:
            self._pending.append(job)
            self._cv.notify()
        job.done.wait()
        if job.error is not None:
            raise job.error
        return rows

    def _run(self):
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._pending or self._closed)
                if self._closed:
                    return
            jobs: list[_Job] = []
            try:
                with self.gate.generation(), torch.inference_mode():
                    self._session(jobs)
            except Exception as err:  # noqa: BLE001 - reported to every waiting request
                for job in jobs:
                    if not job.done.is_set():
                        job.error = err
                        job.done.set()

    def _session(self, jobs: list[_Job]):
        """Runs until no row is left, admitting queued requests between steps."""
        rows: list[Row] = []
        cache: KVCache | None = None
        logits = torch.empty(0)
        while True:
            admitted = self._admit(len(rows))
            jobs.extend(admitted)
            if admitted:
                started = time.perf_counter()
                new_rows, new_cache, new_logits = self._prefill(admitted)
                rows += new_rows
                cache = new_cache if cache is None else cache.merge(new_cache)
                logits = torch.cat((logits, new_logits)) if logits.numel() else new_logits
                self.busy_seconds += time.perf_counter() - started
            if not rows:
                return
            started = time.perf_counter()
            tokens = self._sample_step(rows, logits)
            live = [i for i, r in enumerate(rows) if r.finish_reason is None]
            for r in rows:
                if r.finish_reason is not None:
                    r.job.left -= 1
                    if r.job.left == 0:
                        r.job.done.set()
            if len(live) < len(rows):
                index = torch.tensor(live, dtype=torch.long, device=tokens.device)
                rows = [rows[i] for i in live]
                cache, tokens = cache.select(index), tokens.index_select(0, index)
            if rows:
                logits = self.decoder.decode(cache, tokens)
            else:
                cache, logits = None, torch.empty(0)
            self.busy_seconds += time.perf_counter() - started

    def _admit(self, active: int) -> list[_Job]:
        if self.gate.exclusive_waiting():
            return []
        taken = []
        with self._cv:
            while self._pending:
                size = len(self._pending[0].rows)
                if active and active + size > self.max_rows:
                    break
                taken.append(self._pending.pop(0))
                active += size
        return taken

    def _prefill(self, jobs: list[_Job]):
        """Runs each distinct prompt once, in length-sorted chunks, then copies its cache n times."""
        prompts, rows = [], []
        for job in jobs:
            for i, prompt in enumerate(job.prompts):
                prompts.append((prompt, job.rows[i * job.n : (i + 1) * job.n]))
        prompts.sort(key=lambda p: len(p[0]))
        cache, logits = None, []
        start = 0
        while start < len(prompts):
            end = start + 1
            # Attention scores grow with rows x length^2; bound both per chunk.
            while end < len(prompts) and (end - start + 1) * len(prompts[end][0]) <= self.prefill_tokens:
                end += 1
            chunk = prompts[start:end]
            capacity = max(len(p) + r[0].max_new for p, r in chunk)
            part, last = self.decoder.prefill([p for p, _ in chunk], capacity)
            repeat = torch.tensor([len(r) for _, r in chunk])
            index = torch.repeat_interleave(torch.arange(len(chunk)), repeat).to(last.device)
            part, last = part.select(index), last.index_select(0, index)
            cache = part if cache is None else cache.merge(part)
            logits.append(last)
            for _, chunk_rows in chunk:
                rows += chunk_rows
            start = end
        return rows, cache, torch.cat(logits)

    def _sample_step(self, rows: list[Row], logits: torch.Tensor) -> torch.Tensor:
        device = logits.device
        temperature = torch.tensor([r.params.temperature for r in rows], dtype=torch.float32, device=device)
        top_p = torch.tensor([r.params.top_p for r in rows], dtype=torch.float32, device=device)
        uniform = torch.stack(
            [torch.rand((), generator=r.generator) if r.generator else torch.zeros(()) for r in rows]
        ).to(device)
        tokens, logp = sample(logits, temperature, top_p, uniform)
        chosen = logp.gather(1, tokens[:, None])[:, 0].tolist()
        k = max(r.params.top_logprobs for r in rows)
        top = logp.topk(k, dim=-1) if k else None
        for i, (r, t) in enumerate(zip(rows, tokens.tolist())):
            r.ids.append(t)
            r.logprobs.append(chosen[i])
            if r.params.top_logprobs:
                kk = r.params.top_logprobs
                r.top.append(list(zip(top.indices[i, :kk].tolist(), top.values[i, :kk].tolist())))
            added = self.tokenizer.token_bytes(t)
            r.text += added
            hit = find_stop(r.text, len(added), r.stops) if added and r.stops else None
            if hit is not None:
                r.finish_reason, r.stop_reason, r.stop_span = "stop", r.params.stop[hit[0]], hit[1:]
            elif t == self.tokenizer.eos_id and not r.params.ignore_eos:
                r.finish_reason = "stop"
            elif len(r.ids) >= r.max_new:
                r.finish_reason = "length"
        self.generated_tokens += len(rows)
        return tokens
