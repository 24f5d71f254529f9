"""Sampling with a KV cache, batched across requests.

Requests queue up; the model's thread (`ModelGate`) runs the batch: it admits new requests between
decode steps into the running batch and decodes one token per row per step, dropping rows as they
finish. A prompt of one row is computed within the next decode steps beside the other rows' ids where
the decoder allows (`CachedDecoder.prefills_in_steps`: the fused kernel on a CPU), from the first
request of a session on, so it takes the same path whenever it comes; elsewhere, and for a prompt of
n samples, the prompt is prefilled once and its cache copied for its rows. Every row draws its
random numbers from its own generator, seeded from the request's seed and the row's index, so a
seeded request gives the same samples whatever else shares the batch (up to last-bit differences of
batched arithmetic).

Logprobs: the logprob of each sampled token under the temperature-scaled model distribution,
log_softmax(logits / T), before top-p truncation. That is the quantity the trainer recomputes
(/train/policy with the same temperature), so with top_p = 1 it is exactly the sampling
distribution. With top_p < 1 the sampled token's probability under the truncated distribution is
higher than reported. With temperature 0 (greedy) it is log_softmax(logits).

Prefix cache: when a row finishes, the keys and values of its prompt and completion are kept (LRU,
bounded in bytes). A later prompt that starts with the same ids (the next turn of an agent episode:
the previous prompt, the completion, then a new observation) copies the longest shared prefix and
computes only the rest. Entries are dropped whenever the weights change.

Speculative decoding (`draft_tokens` > 0): after each step a row's next ids are drafted from earlier
text (drafting.py), and the next step feeds the row's last id and its draft in one decode call (each
row only its own ids where the decoder can: `counts`). The row then samples its positions in order,
drawing its generator's numbers as it would one step at a time, and keeps them while they equal the
draft; the first that differs ends its step.
So a seeded or greedy row gets the ids it gets without drafts (up to last-bit differences of the
multi-id arithmetic, as for batching), with the same logprobs, in fewer steps.

Bounds: at most `max_rows` rows decode at once, and the keys and values of the running batch plus the
prefix cache stay within `max_kv_bytes` (the prefix cache gives way first); a request that would pass
them waits in the queue, which holds at most `max_queued_rows` rows. A request arriving at a full queue
is refused at once (`Refused`, HTTP 503 with Retry-After) rather than growing memory; one that could
never fit the bounds on its own is refused as a bad request (400).
"""

from __future__ import annotations

import atexit
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

import torch
from torch.nn import functional as F

try:  # torch wheels since 2.0 run without numpy; `argmax_rows` then keeps torch's
    import numpy as _numpy
except ImportError:
    _numpy = None

from .blas import set_blas_threads
from .drafting import NgramDrafter, RowContext
from .model import KVCache, SharedPrefix, Transformer, attends_rows_alone, weights_version
from .precision import autocast
from .tokenizer import PAD_ID

T = TypeVar("T")

# Prompt ids one decode step feeds at most (`Sampler._next_inputs`; a longer prompt rides a step alone):
# their scratch in the native step (~15 KB an id for `tiny`, ~34 for `small`) and the wait of the rows
# decoding beside them (~35 us an id for `tiny` on one Zen 5 core) stay bounded.
STEP_PROMPT_IDS = 2048


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


class Refused(Exception):
    """A request the sampler does not take. `status` 503: the queue is full now, try again after
    `retry_after` seconds, or the engine is shutting down; 400: the request alone exceeds a bound and
    can never run. `code` names the cause (queue_full, shutting_down, too_many_rows, kv_too_large)."""

    def __init__(self, message: str, status: int, code: str, retry_after: float | None = None):
        super().__init__(message)
        self.status, self.code, self.retry_after = status, code, retry_after


def shutting_down() -> Refused:
    return Refused("the engine is shutting down", 503, "shutting_down")


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
    # Speculative decoding (`Sampler`, drafting.py): the row's ids for drafting, the drafted ids fed
    # after its last id in the step that produced its current logits, and the positions that step
    # wrote into its cache (0: its logits came from a prefill, which wrote exactly its prompt).
    context: RowContext | None = None
    draft: list[int] = field(default_factory=list)
    fed: int = 0
    # A prompt's ids past its prefix-cache hit, fed within the next decode step (`Sampler._prefill`):
    # the row has no logits until that step gives it its last id's.
    pending: list[int] = field(default_factory=list)
    # Its first positions, read from the batch's shared prefix (`SharedPrefix.adopt`; 0: none).
    shared: int = 0
    # Its generator's numbers drawn ahead in blocks (`uniforms`), and how many of them steps took.
    drawn: list[float] = field(default_factory=list, repr=False)
    taken: int = 0
    # The last byte of each stop string: a stop completed by a token's bytes ends in them, so a token
    # without any of these completes none (`_emit` skips the search for most tokens).
    stop_ends: frozenset[int] = field(init=False, repr=False)

    def __post_init__(self):
        self.stop_ends = frozenset(s[-1] for s in self.stops)

    def uniforms(self, count: int) -> list[float]:
        """The next `count` numbers of the row's generator that no step took yet (zeros for a greedy row,
        which has none); a step takes those it used (`taken`). Drawn `UNIFORM_BLOCK` at a time: a block
        holds the same numbers, in the same order, as that many draws of one (torch's CPU generator
        fills a tensor serially), for one call where a call per row and step cost more than the step's
        sampling arithmetic for 32 rows."""
        if self.generator is None:
            return [0.0] * count
        while len(self.drawn) - self.taken < count:
            fresh = torch.rand(UNIFORM_BLOCK, generator=self.generator).tolist()
            self.drawn, self.taken = self.drawn[self.taken :] + fresh, 0
        return self.drawn[self.taken : self.taken + count]


# Numbers a row draws from its generator at once (`Row.uniforms`).
UNIFORM_BLOCK = 64


def row_generator(seed: int | None, index: int) -> torch.Generator:
    g = torch.Generator()
    if seed is None:
        g.manual_seed(random.SystemRandom().getrandbits(63))
    else:
        g.manual_seed((seed * 0x9E3779B97F4A7C15 + index) % (1 << 63))
    return g


def argmax_rows(logits: torch.Tensor) -> torch.Tensor:
    """Each row's index of its largest value, the first of ties (a NaN counts as largest), as
    `argmax(-1)`. fp32 on a CPU through numpy's, which is vectorized: 33 us for 80 x 2,048 logits where
    torch 1.13's took 350, 0.4 s of the demo's evaluation (docs/engine.md)."""
    if _numpy is not None and logits.device.type == "cpu" and logits.dtype == torch.float32 and logits.dim() == 2:
        return torch.from_numpy(_numpy.ascontiguousarray(logits.detach().numpy()).argmax(-1).astype(_numpy.int64))
    return logits.argmax(-1)


def sample(logits: torch.Tensor, temperature: list[float], top_p: list[float], uniform: list[float]):
    """Draws one token per row by inverting the CDF of the top-p truncated, temperature-scaled
    distribution at `uniform` (rows with temperature 0 take the argmax): over the tokens in vocabulary
    order when no row truncates, else in descending order of probability. Returns the tokens and the
    full log-distribution their logprobs are reported under (see the module note).

    The rows' settings come as Python floats, so that which of these paths runs is decided without
    tensor ops: for a step of one row each op costs more than its arithmetic (a one-row `tiny` step
    spent ~0.13 ms here against ~0.5 ms in the model, docs/engine.md). The arithmetic is that of
    float32 tensors of the same values.
    """
    device = logits.device
    greedy = [t == 0 for t in temperature]
    if all(greedy):
        # Argmax only: no sort, no CDF (the same tokens the general path picks for greedy rows).
        return argmax_rows(logits), F.log_softmax(logits.float(), dim=-1)
    scale = [1.0 if g else t for g, t in zip(greedy, temperature)]
    scaled = logits.float()
    if any(x != 1.0 for x in scale):  # dividing by 1.0 changes no bit: skipped
        scaled = scaled / torch.tensor(scale, dtype=torch.float32, device=device)[:, None]
    logp = F.log_softmax(scaled, dim=-1)
    u = torch.tensor(uniform, dtype=torch.float32, device=device)
    if all(p >= 1 for p in top_p):
        # Nothing to truncate: invert the CDF in vocabulary order. Sorting first only to find the
        # top-p prefix cost 3.3 ms a step for 32 rows of a 2,048-id vocabulary, more than the
        # micro model's own decode step (docs/engine.md).
        cdf = logp.exp().cumsum(-1)
        pos = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True)
        tokens = pos[:, 0].clamp_max(logits.shape[-1] - 1)
    else:
        probs, order = logp.exp().sort(dim=-1, descending=True)
        # Keep the smallest prefix whose mass reaches top_p: a token stays if the mass before it is short.
        p = torch.tensor(top_p, dtype=torch.float32, device=device)
        keep = (probs.cumsum(-1) - probs) < p[:, None]
        cdf = (probs * keep).cumsum(-1)
        pos = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None], right=True)
        pos = torch.minimum(pos, keep.sum(-1, keepdim=True) - 1)
        tokens = order.gather(1, pos)[:, 0]
    if any(greedy):
        tokens = torch.where(torch.tensor(greedy, device=device), argmax_rows(logits), tokens)
    return tokens, logp


def pin_threads(threads: int) -> None:
    """Sets this thread's torch thread count where it differs: setting it costs ~9 ms even to the same
    count (torch rebuilds its thread pools), and the model thread sets it at every turn between
    generation and exclusive work. torch keeps the count per thread, but a thread's first parallel op
    resets it to the count last set by any thread, so `get_num_threads` triggers that reset first.
    OpenBLAS's own pool, which torch's count does not reach, gets the same count (`blas`)."""
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    set_blas_threads(threads)


def find_stop(text: bytearray, added: int, stops: list[bytes]) -> tuple[int, int, int] | None:
    """The stop string completed by the last `added` bytes that ends first: (stop index, start, end)."""
    best = None
    for i, s in enumerate(stops):
        p = text.find(s, max(0, len(text) - added - len(s) + 1))
        if p >= 0 and (best is None or p + len(s) < best[2]):
            best = (i, p, p + len(s))
    return best


class ModelGate:
    """One long-lived thread, "model", runs all of the model's work: generation sessions and exclusive
    work (training, scoring, checkpoints) take turns on it, so a sample never mixes weights from before
    and after an update. Exclusive work waiting stops new rows from joining the batch; it runs once the
    batch drains. `threads`: torch threads for exclusive work (torch keeps the count per thread, and
    each turn sets its own); None leaves torch's default.

    Why one thread: every thread that runs a parallel op keeps a pool of OpenMP threads, and once the
    pools hold more threads than the machine has CPUs, libgomp stops spinning between parallel regions
    and every region pays for waking its threads. A `small` SFT step on a 16-core Xeon took 256-301 ms
    on the thread that built the model and 331-361 ms on a second thread (docs/engine.md). And HTTP
    handlers each get a new thread, on which torch's oneDNN kernels (bf16 GEMMs built per shape, with
    per-thread scratch) failed at random, about once in a thousand training steps."""

    def __init__(self, threads: int | None = None):
        self.threads = threads
        self._cv = threading.Condition()
        self._session = False  # a generation session runs on the model thread
        self._held = False  # exclusive work holds the model
        self._exclusive_waiting = 0
        self._on_release: list[Callable[[], None]] = []
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="model")

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        """Queues `fn` on the model thread (first come, first served) without taking the gate."""
        return self._thread.submit(fn)

    def on_release(self, fn: Callable[[], None]) -> None:
        """Calls `fn` each time exclusive work ends (the sampler then resumes its queue)."""
        self._on_release.append(fn)

    @contextmanager
    def exclusive(self):
        """Holds the model for the block: waits for the running session to drain, and no session
        starts until the block ends."""
        with self._cv:
            self._exclusive_waiting += 1
            self._cv.wait_for(lambda: not self._session and not self._held)
            self._exclusive_waiting -= 1
            self._held = True
        try:
            yield
        finally:
            with self._cv:
                self._held = False
                self._cv.notify_all()
            for fn in self._on_release:
                fn()

    def try_generation(self) -> bool:
        """Starts a generation session unless exclusive work holds the model or waits for it (never
        blocks: the caller runs on the model thread, which exclusive work may be queued behind)."""
        with self._cv:
            if self._held or self._exclusive_waiting:
                return False
            self._session = True
            return True

    def end_generation(self) -> None:
        with self._cv:
            self._session = False
            self._cv.notify_all()

    def run(self, fn: Callable[[], T]) -> T:
        """`fn()` on the model thread, holding the model, with the gate's torch threads."""

        def pinned() -> T:
            if self.threads:
                pin_threads(self.threads)
            return fn()

        with self.exclusive():
            return self.submit(pinned).result()

    def exclusive_waiting(self) -> bool:
        return self._exclusive_waiting > 0


class CachedDecoder:
    """The model seen by the sampler: prefill a padded batch, then decode one token per row."""

    def __init__(self, model: Transformer, dtype: str):
        self.model, self.dtype = model, dtype
        self.max_seq_len = model.config.max_seq_len
        # Under bf16 autocast the attention matmuls cast keys and values to bf16 anyway, so a bf16
        # cache holds exactly the numbers they use, at half the memory and without a cast of the
        # whole cache per layer and step.
        self.cache_dtype = torch.bfloat16 if dtype == "bf16" else torch.float32
        self._weights = None
        c = model.config
        # Keys and values of one position in every layer (what the memory bound counts).
        self.kv_bytes_per_token = 2 * c.n_layers * c.n_heads * c.head_dim * (torch.finfo(self.cache_dtype).bits // 8)

    def prefill(self, prompts: list[list[int]], capacity: int) -> tuple[KVCache, torch.Tensor]:
        lengths = torch.tensor([len(p) for p in prompts])
        ids = torch.full((len(prompts), int(lengths.max())), PAD_ID, dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, : len(p)] = torch.tensor(p)
        device = self.model.rope_cos.device
        ids, lengths = ids.to(device), lengths.to(device)
        cache = KVCache.empty(
            self.model.config, len(prompts), capacity, self.cache_dtype, device, holding=ids.shape[1]
        )
        # Logits of each prompt's last position only (sampling starts there): projecting every position
        # onto the vocabulary was a tenth of a `micro` prefill.
        last = torch.zeros(ids.shape, dtype=torch.bool, device=device)
        last[torch.arange(len(prompts), device=device), lengths - 1] = True
        with autocast(self.dtype, device.type):
            logits = self.model(ids, cache, lengths, at=last)
            # Checked once per admission, not per step: weights change only between generation
            # sessions (training and loads wait for the gate).
            self._weights = self.model.decode_weights()
        return cache, logits.float()

    def decode(
        self,
        cache: KVCache,
        ids: torch.Tensor,
        counts: list[int] | None = None,
        last_only: list[bool] | None = None,
        shared: SharedPrefix | None = None,
        shared_rows: list[int] | None = None,
    ) -> torch.Tensor:
        """Logits of the next ids: [B, V] for ids [B]; for ids [B, T] (drafts) with `counts`, row b's
        first counts[b] ids, [sum(counts), V] row after row, only the last of a row marked in `last_only`;
        rows' first `shared_rows` positions read from `shared` (`Transformer.decode`)."""
        with autocast(self.dtype, ids.device.type):
            return self.model.decode(ids, cache, self._weights, counts, last_only, shared, shared_rows).float()

    def attends_rows_alone(self, cache: KVCache) -> bool:
        """Whether decode steps over `cache` attend each row over its own positions and feed only its
        own ids (the fused kernel): a row may then feed a prompt's new ids within a step without the
        rows beside it feeding padding, and read a prefix the rows share from one copy."""
        return attends_rows_alone(cache, self.cache_dtype)

    def prefills_in_steps(self, cache: KVCache) -> bool:
        """Whether a prompt's ids (those past its prefix-cache hit, or all) may ride a decode step
        (`Sampler._prefill`) rather than be prefilled or extended: where rows
        attend alone, in fp32, or in bf16 where the native step takes any number of ids (AVX512-BF16:
        `RowStep.batches`). Elsewhere a bf16 step of a prompt's ids is TorchScript's, whose oneDNN
        products build a kernel for every new shape (~1 ms each, why bf16 extends are padded to
        `EXTEND_BLOCK`), so those engines still extend."""
        if not self.attends_rows_alone(cache):
            return False
        if self.cache_dtype == torch.float32:
            return True
        step = self._weights.row_step() if self._weights is not None else None
        return step is not None and step.batches

    # The prefix cache works with this decoder (the Hugging Face one has no `extend`), and so does
    # speculative decoding (`decode` takes several ids per row).
    prefix_cache = True
    speculative = True
    # Rows that finish may leave holes in the batch (`Sampler._session`): `decode` feeds no ids for a
    # row whose count is 0.
    holes = True

    def empty_batch(self, capacity: int, holding: int, whole_context: bool = False) -> KVCache:
        """A batch of no rows yet, for a session's first requests to join (`Sampler._session`). With
        `whole_context`, where its rows are attended alone, its growths may take the model's whole
        context (`KVCache.context`)."""
        cache = KVCache.empty(
            self.model.config, 0, capacity, self.cache_dtype, self.model.rope_cos.device, holding=holding
        )
        if whole_context and self.attends_rows_alone(cache):
            cache.context = self.max_seq_len
        return cache

    def begin_session(self) -> tuple:
        """Takes the weights' decode layout for the session's steps and extends and returns their key, which
        changes whenever the weights do (`weights_version`). Once per generation session: weights change
        only between sessions (training and loads wait for the gate); reading every parameter's version
        at each admission and extend was ~30 us a time (about 1,000 times in the demo's evaluation)."""
        with autocast(self.dtype, self.model.rope_cos.device.type):
            self._weights = self.model.decode_weights()
        return (id(self.model), self.dtype, weights_version(self.model))

    def extend(
        self,
        prompt: list[int],
        keys: list[torch.Tensor],
        values: list[torch.Tensor],
        start: int,
        capacity: int,
        into: KVCache | None = None,
    ) -> tuple[KVCache, torch.Tensor]:
        """One row whose first `start` positions' keys and values (per layer, as `KVCache.row` copied
        them, of at least `start` positions) are known: copies them and prefills only `prompt[start:]`,
        into a cache of its own or `into` (a running batch's empty row, `KVCache.row_view`). Returns
        the cache and last logits [1, V]."""
        device = self.model.rope_cos.device
        cache = (
            into
            if into is not None
            else KVCache.empty(self.model.config, 1, capacity, self.cache_dtype, device, holding=len(prompt))
        )
        cache.put_row(0, keys, values, start)
        ids = torch.tensor([prompt[start:]], dtype=torch.long, device=device)
        with autocast(self.dtype, device.type):
            logits = self.model.extend(ids, cache, start, last=True)
        return cache, logits.float()


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix, by bisection over slice comparisons (C speed)."""
    n = min(len(a), len(b))
    if not n or a[0] != b[0]:
        return 0
    if a[:n] == b[:n]:
        return n
    lo, hi = 1, n  # a[:lo] == b[:lo] and a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


@dataclass(eq=False)
class _Entry:
    ids: list[int]
    keys: list[torch.Tensor]  # per layer, as `KVCache.row` copies them (len(ids) positions)
    values: list[torch.Tensor]
    nbytes: int
    # The finished row's drafting context, whose index a prompt continuing it takes (`NgramDrafter.continued`).
    context: RowContext | None = None
    # Its ids' whole blocks as `PrefixCache.blocks` names them.
    blocks: list[int] = field(default_factory=list)
    # The tick it was stored or last reused at (`PrefixCache._tick`): the least recently used has the smallest.
    used: int = 0


class PrefixCache:
    """Keys and values of finished rows (prompt + completion), least recently used first out, at most
    `max_bytes` in all. `lookup` finds the entry sharing the longest prefix with a prompt; reuse needs
    at least `min_tokens` shared ids and leaves the prompt's last id to prefill (its logits start the
    sampling). Not thread-safe: only the model thread touches it.

    Entries are indexed by their ids' whole blocks of `block` ids (`blocks`), so that `lookup` and
    `store` compare ids with the few entries that share the most blocks rather than with every entry:
    every prompt of an agent shares its system prompt with every entry, and scanning them all took
    ~0.4 ms a lookup in the demo's evaluation, growing with the entries."""

    def __init__(self, max_bytes: int, min_tokens: int = 16):
        self.max_bytes, self.min_tokens = max_bytes, min_tokens
        # A reuse needs min_tokens shared ids, so it always shares a whole block.
        self.block = max(1, min(16, min_tokens))
        self._entries: OrderedDict[int, _Entry] = OrderedDict()
        # Entries whose first k blocks are those named `blocks(ids)[k - 1]`; entries whose last whole
        # block it is.
        self._sharing: dict[int, set[int]] = {}
        self._ending: dict[int, set[int]] = {}
        self._ticks = 0  # `_tick`'s count: an entry's key is the tick it was stored at
        self.weights_key = None
        # Running totals, so that `stats` (read by /info on another thread) never iterates the entries.
        self.bytes = self.tokens = 0
        self.hits = self.misses = self.saved_tokens = self.prefill_tokens = self.evictions = self.stored = 0
        self.invalidations = 0

    def check_weights(self, key) -> None:
        if key != self.weights_key:
            if self._entries:
                self.invalidations += 1
            self._entries.clear()
            self._sharing.clear()
            self._ending.clear()
            self.bytes, self.tokens, self.weights_key = 0, 0, key

    def _tick(self) -> int:
        self._ticks += 1
        return self._ticks

    def blocks(self, ids: list[int]) -> list[int]:
        """A name for each whole block of `ids` and all before it: the k-th names ids[:k * block]
        (a chain of hashes; a collision can only make a lookup compare the wrong entries, whose
        shared ids it then counts: never a wrong reuse)."""
        names, name, size = [], 0, self.block
        for start in range(0, len(ids) - size + 1, size):
            name = hash((name, tuple(ids[start : start + size])))
            names.append(name)
        return names

    def lookup(self, prompt: list[int]) -> tuple[_Entry | None, int]:
        # The entries sharing the most whole blocks with the prompt hold every longest match.
        sharing: set[int] = set()
        for name in self.blocks(prompt):
            more = self._sharing.get(name)
            if more is None:
                break
            sharing = more
        best, best_len = None, 0
        # Least recently used first, which wins ties (the order the entries are kept in).
        for key in sorted(sharing, key=lambda k: self._entries[k].used):
            entry = self._entries[key]
            # Only one that also matches at `best_len` can share more, which one id tells.
            if best_len and (
                best_len == len(prompt) or len(entry.ids) <= best_len or entry.ids[best_len] != prompt[best_len]
            ):
                continue
            n = common_prefix(entry.ids, prompt)
            if n > best_len:
                best, best_len = key, n
        reuse = min(best_len, len(prompt) - 1)
        if best is None or reuse < self.min_tokens:
            self.misses += 1
            self.prefill_tokens += len(prompt)
            return None, 0
        self._entries.move_to_end(best)
        self._entries[best].used = self._tick()
        self.hits += 1
        self.saved_tokens += reuse
        self.prefill_tokens += len(prompt) - reuse
        return self._entries[best], reuse

    def store(
        self,
        ids: list[int],
        keys: list[torch.Tensor],
        values: list[torch.Tensor],
        room: int | None = None,
        context: RowContext | None = None,
    ) -> None:
        """Keeps an entry, evicting the least recently used to stay within `max_bytes` and within
        `room` (what the running batch leaves of the engine's memory bound), if given; `context`: the
        row's drafting context, for the prompts that continue it."""
        limit = self.max_bytes if room is None else min(self.max_bytes, room)
        nbytes = sum(t.numel() * t.element_size() for t in (*keys, *values))
        if nbytes > limit or len(ids) < self.min_tokens:
            return
        # An entry the new one extends (the turn it was prefilled from) is now redundant; such an entry's
        # last whole block is one of the new one's.
        blocks = self.blocks(ids)
        ending = {k for name in blocks for k in self._ending.get(name, ())}
        for key in ending:
            e = self._entries[key]
            if len(e.ids) <= len(ids) and ids[len(e.ids) - 1] == e.ids[-1] and ids[: len(e.ids)] == e.ids:
                self._drop(key)
        key = self._tick()
        self._entries[key] = _Entry(ids, keys, values, nbytes, context, blocks, used=key)
        for name in blocks:
            self._sharing.setdefault(name, set()).add(key)
        for name in blocks[-1:]:
            self._ending.setdefault(name, set()).add(key)
        self.bytes += nbytes
        self.tokens += len(ids)
        self.stored += 1
        self.shrink(limit)

    def shrink(self, limit: int) -> None:
        """Evicts least recently used entries until at most `limit` bytes are kept."""
        while self.bytes > max(limit, 0) and self._entries:
            self._drop(next(iter(self._entries)))
            self.evictions += 1

    def _drop(self, key: int) -> None:
        entry = self._entries.pop(key)
        self.bytes -= entry.nbytes
        self.tokens -= len(entry.ids)
        for index, names in ((self._sharing, entry.blocks), (self._ending, entry.blocks[-1:])):
            for name in names:
                keys = index[name]
                keys.discard(key)
                if not keys:
                    del index[name]

    def stats(self) -> dict:
        return {
            "enabled": self.max_bytes > 0,
            "hits": self.hits,
            "misses": self.misses,
            "saved_prefill_tokens": self.saved_tokens,
            "prefill_tokens": self.prefill_tokens,
            "entries": len(self._entries),
            "tokens": self.tokens,
            "bytes": self.bytes,
            "max_bytes": self.max_bytes,
            "stored": self.stored,
            "evictions": self.evictions,
            "invalidations": self.invalidations,
        }


@dataclass
class _Job:
    prompts: list[list[int]]
    rows: list[Row]
    n: int
    # Positions a row's cache needs: its prompt and new tokens, the longest row's.
    capacity: int = 0
    done: threading.Event = field(default_factory=threading.Event)
    left: int = 0
    error: BaseException | None = None


class Sampler:
    def __init__(
        self,
        decoder,
        tokenizer,
        gate: ModelGate,
        max_rows: int = 64,
        prefill_tokens: int = 8192,
        step_prompt_ids: int = STEP_PROMPT_IDS,
        prefix_cache_bytes: int = 0,
        prefix_min_tokens: int = 16,
        max_kv_bytes: int | None = None,
        max_queued_rows: int | None = None,
        retry_after: float = 1.0,
        threads: int | None = None,
        draft_tokens: int = 0,
    ):
        self.decoder, self.tokenizer, self.gate = decoder, tokenizer, gate
        # Speculative decoding (drafts of up to `draft_tokens` ids), where the decoder takes several ids
        # per row in one step.
        speculative = draft_tokens > 0 and getattr(decoder, "speculative", False)
        self.drafter = NgramDrafter(draft_tokens) if speculative else None
        self.max_rows, self.prefill_tokens, self.step_prompt_ids = max_rows, prefill_tokens, step_prompt_ids
        # None: no bound on bytes (a decoder that cannot say what a position costs).
        self.max_kv_bytes = max_kv_bytes
        # At least one full batch, so that a request that fits the batch always fits an empty queue.
        self.max_queued_rows = max(max_rows, 4 * max_rows if max_queued_rows is None else max_queued_rows)
        self.retry_after = retry_after
        # Torch threads of generation sessions (set on the model thread as each starts); None leaves
        # torch's default.
        self.threads = threads
        self.prefix_cache = PrefixCache(prefix_cache_bytes, prefix_min_tokens)
        self._pending: list[_Job] = []
        self._queued_rows = 0
        self._cv = threading.Condition()
        self.generated_tokens = 0
        self.busy_seconds = 0.0
        # Of busy_seconds, those the model thread ran on a core (`time.thread_time`): the rest it waited,
        # for a core that other processes held (a client and its tools on a small machine) or the GIL.
        self.busy_cpu_seconds = 0.0
        # Parts of busy_seconds: admitting requests (prefill, merging into the batch) and the model's
        # decode steps; the rest is sampling, stop checks and dropping finished rows.
        self.admit_seconds = 0.0
        self.decode_seconds = 0.0
        self.compactions = 0  # times the batch was compacted (rows moved into the places finished ones left)
        self.steps = 0  # decode steps run
        self.joins = 0  # requests admitted into a batch that was already decoding
        self.drafted_tokens = 0  # drafted ids fed to the model
        self.accepted_tokens = 0  # of those, ids that sampling then chose (each saved a step)
        self.prefilled_prompts = 0  # distinct prompts prefilled (a prompt shared by n rows or requests: once)
        self.stepped_prefills = 0  # of those, prompts whose ids (past a prefix-cache hit, if any) a decode step fed
        self.shared_prefix_rows = 0  # rows that read a prefix shared by the batch's rows from one copy (`_share`)
        self.refused = 0  # requests refused with 503 (queue full)
        self.rows_in_flight = 0
        self.kv_bytes = 0  # keys and values of the running batch
        self.peak_kv_bytes = 0  # the most the running batch and the prefix cache held together
        self._closed = False
        # A session is queued or running on the gate's model thread; the last one queued.
        self._scheduled, self._last_session = False, None
        gate.on_release(self._kick)
        # The model thread used torch's thread pool; a session still running there must end before the
        # interpreter does, or the runtime's teardown can abort the process.
        atexit.register(self.close)

    def close(self) -> None:
        """Takes no more requests, ends the running session at its next step, refuses what was queued
        or decoding (503, shutting_down), and waits for the session to end."""
        with self._cv:
            self._closed = True
            last, queued = self._last_session, self._pending
            self._pending, self._queued_rows = [], 0
        self._fail(queued, shutting_down())
        if last is not None:
            last.result()

    @staticmethod
    def _fail(jobs: list[_Job], error: BaseException) -> None:
        """Ends every job not done yet with `error`, which `generate` raises to its caller, but for jobs
        whose rows had all finished (told at the next decode step, `_session`): those get their rows."""
        for job in jobs:
            if not job.done.is_set():
                if job.left:
                    job.error = error
                job.done.set()

    def _kv_bytes(self, rows: int, capacity: int) -> int:
        per_token = getattr(self.decoder, "kv_bytes_per_token", None)
        return rows * capacity * per_token if per_token else 0

    def generate(self, prompts: list[list[int]], params: SamplingParams, n: int = 1) -> list[Row]:
        """Samples `n` completions per prompt; rows come back in order (prompt-major). Raises `Refused`
        when the request can never fit the bounds (400) or the queue is full (503)."""
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
        job = _Job(prompts, rows, n, capacity=max(len(r.prompt) + r.max_new for r in rows), left=len(rows))
        if len(rows) > self.max_rows:
            raise Refused(
                f"the request has {len(rows)} rows ({len(prompts)} prompts x n = {n}); this engine decodes at "
                f"most {self.max_rows} rows at once (--max-batch): send fewer prompts or samples per request",
                400, "too_many_rows",
            )
        need = self._kv_bytes(len(rows), job.capacity)
        if self.max_kv_bytes is not None and need > self.max_kv_bytes:
            raise Refused(
                f"the request needs {need / 2**20:.1f} MiB of keys and values ({len(rows)} rows x "
                f"{job.capacity} positions); this engine holds at most {self.max_kv_bytes / 2**20:.1f} MiB "
                "(--kv-cache-mb): lower max_tokens, n or the prompt length",
                400, "kv_too_large",
            )
        for r in rows:
            r.job = job
        with self._cv:
            if self._closed:
                raise shutting_down()
            if self._queued_rows + len(rows) > self.max_queued_rows:
                self.refused += 1
                raise Refused(
                    f"the engine is at capacity: {self._queued_rows} rows wait for the "
                    f"{self.rows_in_flight} decoding (queue limit {self.max_queued_rows} rows, --max-queue); "
                    f"retry after {self.retry_after:g} s",
                    503, "queue_full", self.retry_after,
                )
            self._pending.append(job)
            self._queued_rows += len(rows)
        self._kick()
        job.done.wait()
        if job.error is not None:
            raise job.error
        return rows

    def _kick(self) -> None:
        """Queues a session on the model thread if requests wait and none is queued or running."""
        with self._cv:
            if self._scheduled or self._closed or not self._pending:
                return
            self._scheduled = True
            self._last_session = self.gate.submit(self._run_session)

    def _run_session(self) -> None:
        # Under the queue's lock, so that exclusive work ending now (whose release calls `_kick`, which
        # takes the lock) sees this session unscheduled and queues the next.
        with self._cv:
            if not self.gate.try_generation():
                self._scheduled = False
                return
        jobs: list[_Job] = []
        try:
            if self.threads:
                pin_threads(self.threads)
            with torch.inference_mode():
                self._session(jobs)
        except Exception as err:  # noqa: BLE001 - reported to every waiting request
            self._track([], None)
            self._fail(jobs, err)
        finally:
            self.gate.end_generation()
            with self._cv:
                self._scheduled = False
        self._kick()  # requests that came after the last admission, or that exclusive work held back

    def _session(self, jobs: list[_Job]):
        """Runs until no row is left, admitting queued requests between steps.

        `rows` is aligned with the cache's rows; a row that finishes leaves a hole there (None) where
        the decoder allows (`CachedDecoder.holes`): a hole feeds no ids, decoding reads none of its
        positions (`KVCache.vacate`), and the next admission fills it (`KVCache.merge(into=)`), so
        that no row is copied when others finish. Holes at the end leave the batch; when holes
        outnumber the rows (nobody came to fill them), or without holes, the last rows move into the
        gaps (`KVCache.compact`), copying one row's keys and values each.
        """
        # The weights' decode layout, taken once a session (and the prefix cache emptied if they changed):
        # decode steps use it, where a session's prompts may all ride them, no prefill taking it.
        begin = getattr(self.decoder, "begin_session", None)
        weights = begin() if begin is not None else None
        if self._caching():
            self.prefix_cache.check_weights(weights)
        rows: list[Row | None] = []  # every row still sampling (None: a hole), aligned with the cache's rows
        cache: KVCache | None = None
        shared: SharedPrefix | None = None  # the prompt prefix the batch's rows share (`_share`)
        logits = torch.empty(0)
        leaves_holes = getattr(self.decoder, "holes", False)
        while True:
            if self._closed:  # a shutdown does not wait for long generations to finish
                self._fail(jobs, shutting_down())
                self._track([], None)
                return
            capacity = cache.capacity if isinstance(cache, KVCache) else 0
            active = sum(r is not None for r in rows)
            admitted = self._admit(active, capacity)
            jobs.extend(admitted)
            if admitted:
                started = self._clock()
                if active:
                    self.joins += len(admitted)
                if cache is None:
                    cache = self._empty_batch(admitted)
                if cache is None:
                    new_rows, parts, new_logits = self._prefill(admitted)
                    rows, cache, logits = new_rows, parts[0].merge(*parts[1:]), new_logits
                    into, shared = list(range(len(rows))), None
                else:
                    # The rows they take: holes first, then past the last; room for them before any
                    # extend writes its row in place.
                    joining = sum(len(job.rows) for job in admitted)
                    holes = [i for i, r in enumerate(rows) if r is None]
                    into = holes[:joining] + list(range(len(rows), len(rows) + joining - len(holes)))
                    if isinstance(cache, KVCache):
                        cache.make_room(
                            max(into) + 1,
                            max(len(p) for job in admitted for p in job.prompts),
                            max(job.capacity for job in admitted),
                        )
                    new_rows, parts, new_logits = self._prefill(admitted, cache, into)
                    # Into the holes where there are any; else `into` only appends, all that `merge` does
                    # (and all the Hugging Face state, which never has holes, can).
                    cache = cache.merge(*parts, into=into) if holes else cache.merge(*parts)
                    logits = self._joined_logits(rows, logits, into, new_rows, new_logits)
                    rows += [None] * (max(into) + 1 - len(rows))
                    for i, r in zip(into, new_rows):
                        rows[i] = r
                shared = self._share(rows, cache, into, shared)
                self._track(rows, cache)
                self.admit_seconds += self._busy(started)
            if not rows:
                self._track([], None)
                return
            started = self._clock()
            tokens = self._sample_step(rows, logits, cache)
            finished = [i for i, r in enumerate(rows) if r is not None and r.finish_reason is not None]
            # Requests whose last row finished: told just before the decode step, whose compiled code
            # runs without the GIL, so that their handlers build and send the responses meanwhile
            # rather than hold the GIL while this thread drops their rows (docs/engine.md).
            done = []
            if finished:
                if self._caching():
                    self._store_finished(rows, cache, finished)
                for i in finished:
                    if self.drafter is not None and rows[i].context is not None:
                        self.drafter.learn(rows[i].context, len(rows[i].ids))
                    job = rows[i].job
                    job.left -= 1
                    if job.left == 0:
                        done.append(job)
                    rows[i] = None
                still = [i for i, r in enumerate(rows) if r is not None]
                if not still:
                    for job in done:
                        job.done.set()
                    rows, cache, logits = [], None, torch.empty(0)
                    self._track(rows, cache)
                    self._busy(started)
                    continue
                if leaves_holes and 2 * len(still) >= len(rows):
                    cache = cache.vacate(finished, keep=still[-1] + 1)  # a row not yet fed holds nothing
                    rows, tokens = rows[: cache.rows], tokens[: cache.rows]
                else:
                    rows, cache, tokens = self._compact(rows, cache, tokens, still)
                self._track(rows, cache)
            fed = [0 if r is None else r.fed for r in rows]
            for job in done:
                job.done.set()
            decode_started = time.perf_counter()
            prompting = [r is not None and bool(r.pending) and r.fed > 0 for r in rows]
            # Only what is in use, so that a decoder without these (Hugging Face's) is called as before.
            options = {}
            if shared is not None:
                options.update(shared=shared, shared_rows=[0 if r is None else r.shared for r in rows])
            if any(prompting):
                options["last_only"] = prompting
            if tokens.dim() == 2:  # drafts, prompts: each row feeds its last id and its own draft, or its ids
                logits = self.decoder.decode(cache, tokens, fed, **options)
            elif min(fed) == 0:  # holes feed nothing
                logits = self.decoder.decode(cache, tokens[:, None], fed, **options)
            else:
                logits = self.decoder.decode(cache, tokens, **options)
            for r, prompted in zip(rows, prompting):
                if prompted:  # its logits now those of a prefill's last id (`fed` 0: nothing to take back)
                    r.pending, r.fed = [], 0
            # Rows whose whole prompt this step computed (cold ones held nothing when they joined, `_share`)
            # may now take the batch's shared prefix, or make it.
            if any(prompting):
                placed = [i for i, p in enumerate(prompting) if p and rows[i].shared == 0]
                shared = self._share(rows, cache, placed, shared)
            self.steps += 1
            self.decode_seconds += time.perf_counter() - decode_started
            self._busy(started)

    def _empty_batch(self, jobs: list[_Job]) -> KVCache | None:
        """An empty batch for a session's first requests to join where prompts' ids ride decode steps
        (`CachedDecoder.prefills_in_steps`): a prompt then takes that path whether or not a batch was
        running when it came, so its ids do not depend on the timing of others. Else None: they are
        prefilled together."""
        empty = getattr(self.decoder, "empty_batch", None)
        if empty is None:
            return None
        # The whole context for growths only where the memory bound holds every row at it beside a full
        # prefix cache: else a batch at the context would leave the prefix cache less room than before.
        whole = self.max_kv_bytes is None or (
            self._kv_bytes(self.max_rows, self.decoder.max_seq_len) + self.prefix_cache.max_bytes <= self.max_kv_bytes
        )
        capacity, holding = max(job.capacity for job in jobs), max(len(p) for job in jobs for p in job.prompts)
        cache = empty(capacity, holding, whole_context=whole)
        return cache if self.decoder.prefills_in_steps(cache) else None

    @staticmethod
    def _clock() -> tuple[float, float]:
        """Wall seconds and this thread's CPU seconds now (`_busy`)."""
        return time.perf_counter(), time.thread_time()

    def _busy(self, since: tuple[float, float]) -> float:
        """Adds the wall and CPU seconds since `since` (`_clock`) to the busy totals; returns the wall's."""
        wall = time.perf_counter() - since[0]
        self.busy_seconds += wall
        self.busy_cpu_seconds += time.thread_time() - since[1]
        return wall

    @staticmethod
    def _joined_logits(
        rows: list[Row | None], logits: torch.Tensor, into: list[int], joined: list[Row], new: torch.Tensor | None
    ):
        """The batch's logits (each row's positions in turn, `_sample_step`) with those of the rows
        `joined` at rows `into` (one position each, none for a row whose prompt is pending), in row
        order."""
        if new is None:  # every joining row's prompt is pending
            return logits
        if not into or into[0] >= len(rows):  # all appended: already in order
            return torch.cat((logits, new))
        spans, at = {}, 0
        for i, r in enumerate(rows):
            if r is not None and not r.pending:  # a prompt still waiting for its step has no logits yet
                spans[i] = range(at, at + 1 + len(r.draft))
                at += 1 + len(r.draft)
        for i, r in zip(into, joined):
            if not r.pending:
                spans[i] = range(at, at + 1)
                at += 1
        order = [p for i in sorted(spans) for p in spans[i]]
        return torch.cat((logits, new)).index_select(0, torch.tensor(order, device=logits.device))

    def _share(self, rows: list[Row | None], cache, joined: list[int], shared: SharedPrefix | None):
        """The batch's shared prefix (`SharedPrefix`), made from the rows that just joined at `joined` if
        it has none yet (the longest prefix of their distinct prompts, at least two of them: an agent's
        system prompt), and the part of it each of them takes (`SharedPrefix.adopt`, `Row.shared`); None
        where steps do not attend rows alone. Once a row: when it joins holding positions (a prefill, an
        extend, a prefix-cache hit), else after the step that computed its prompt (`_session`); its
        positions there never change."""
        if not isinstance(cache, KVCache) or not self.decoder.attends_rows_alone(cache):
            return None
        held = cache.lens.tolist()
        joined = [i for i in joined if held[i] > 0]  # a cold prompt's row holds nothing before its step
        if shared is None:
            # Distinct prompts in joining order: the first is row joined[0]'s.
            prompts = list({tuple(rows[i].prompt): rows[i].prompt for i in joined}.values())
            if len(prompts) > 1:
                common = min(common_prefix(prompts[0], p) for p in prompts[1:])
                shared = SharedPrefix.of_row(cache, joined[0], prompts[0][:common])
        if shared is not None:
            for i in joined:
                rows[i].shared = shared.adopt(cache, i, rows[i].prompt)
                self.shared_prefix_rows += rows[i].shared > 0
        return shared

    def _track(self, rows: list[Row | None], cache) -> None:
        """Rows decoding and the bytes of their keys and values (and the peak with the prefix cache)."""
        self.rows_in_flight = sum(r is not None for r in rows)  # finished rows leave the batch at once
        self.kv_bytes = self._kv_bytes(cache.allocated_rows, cache.capacity) if isinstance(cache, KVCache) else 0
        self.peak_kv_bytes = max(self.peak_kv_bytes, self.kv_bytes + self.prefix_cache.bytes)

    def _compact(self, rows: list[Row], cache, per_row: torch.Tensor, keep: list[int]):
        """Only the rows `keep` (indices), of the row list, the cache and a per-row tensor. Kept rows
        before the gaps stay where they are and the last ones fill the gaps, so an in-place cache
        (`KVCache.compact`) copies only the rows that move; `HFState.compact` rebuilds its rows."""
        kept = set(keep)
        tail = iter(i for i in reversed(keep) if i >= len(keep))
        order = [j if j in kept else next(tail) for j in range(len(keep))]
        index = torch.tensor(order, dtype=torch.long, device=per_row.device)
        self.compactions += 1
        return [rows[i] for i in order], cache.compact(index), per_row.index_select(0, index)

    def _admit(self, active: int, capacity: int) -> list[_Job]:
        """Queued requests, first come first served, while the batch stays within `max_rows` rows and
        its keys and values (every row at the longest row's capacity, what the merged cache may grow to)
        within `max_kv_bytes`; the prefix cache is then cut to what they leave. A request that fits
        an empty batch always joins one (`generate` refuses the others)."""
        if self.gate.exclusive_waiting():
            return []
        taken = []
        with self._cv:
            while self._pending:
                job = self._pending[0]
                rows, cap = active + len(job.rows), max(capacity, job.capacity)
                over = rows > self.max_rows or (
                    self.max_kv_bytes is not None and self._kv_bytes(rows, cap) > self.max_kv_bytes
                )
                if over and (active or taken):
                    break
                taken.append(self._pending.pop(0))
                self._queued_rows -= len(job.rows)
                active, capacity = rows, cap
        if taken and self.max_kv_bytes is not None:
            self.prefix_cache.shrink(self.max_kv_bytes - self._kv_bytes(active, capacity))
        return taken

    def stats(self) -> dict:
        """The bounds and what is in use now (read by /info on another thread)."""
        return {
            "max_rows": self.max_rows,
            "rows_in_flight": self.rows_in_flight,
            "queued_rows": self._queued_rows,
            "max_queued_rows": self.max_queued_rows,
            "kv_bytes": self.kv_bytes,
            "max_kv_bytes": self.max_kv_bytes,
            "peak_kv_bytes": self.peak_kv_bytes,
            "refused": self.refused,
            "joins": self.joins,
        }

    def speculation_stats(self) -> dict:
        """Whether drafts are on, their length and what the drafter learned (read by /info on another
        thread); the drafted and accepted ids are counted with the other `counters`."""
        return {
            "enabled": self.drafter is not None,
            "max_draft_tokens": self.drafter.max_tokens if self.drafter is not None else 0,
            "learned_ngrams": self.drafter.learned if self.drafter is not None else 0,
        }

    def _caching(self) -> bool:
        return self.prefix_cache.max_bytes > 0 and getattr(self.decoder, "prefix_cache", False)

    def _store_finished(self, rows: list[Row], cache: KVCache, finished: list[int]) -> None:
        """Keeps the keys and values of the rows that just finished: their prompt and every sampled
        id but the last (which was never fed back)."""
        lens = cache.lens.tolist()
        for i in finished:
            r = rows[i]
            n = lens[i]
            ids = r.prompt + r.ids[:-1]
            assert len(ids) == n, (len(ids), n)
            room = None if self.max_kv_bytes is None else self.max_kv_bytes - self.kv_bytes
            self.prefix_cache.store(ids, *cache.row(i, n), room, r.context)

    def _prefill(self, jobs: list[_Job], batch=None, into: list[int] | None = None):
        """Runs each distinct prompt once, in length-sorted chunks, then copies its cache to each of its
        rows: the n samples of a request, and the rows of other requests admitted with it that send the
        same prompt (an RL group's episodes). Where the decoder can feed a prompt's ids within its decode
        steps (`prefills_in_steps`), a prompt of one row is left to them (`Row.pending`), in the batch's
        row `into[j]` (for the j-th row returned): only its prefix-cache hit, if it has one, is copied
        there now. Else a prompt sharing a long enough prefix with a cached row prefills only the ids
        after it, straight into that row where there is one (a `KVCache` with room made for it). Returns
        the rows, their caches (in row order) and the last logits of those not pending (None if there
        are none)."""
        prompts, rows = [], []
        by_ids: dict[tuple[int, ...], list[Row]] = {}
        for job in jobs:
            for i, prompt in enumerate(job.prompts):
                same = job.rows[i * job.n : (i + 1) * job.n]
                key = tuple(prompt)
                if key in by_ids:
                    by_ids[key].extend(same)
                else:
                    by_ids[key] = list(same)
                    prompts.append((prompt, by_ids[key]))
        self.prefilled_prompts += len(prompts)
        parts, logits, cold = [], [], []
        rides = isinstance(batch, KVCache) and self.decoder.prefills_in_steps(batch)
        for prompt, prompt_rows in prompts:
            entry, start = self.prefix_cache.lookup(prompt) if self._caching() else (None, 0)
            capacity = len(prompt) + max(r.max_new for r in prompt_rows)
            if entry is not None and entry.context is not None and self.drafter is not None:
                for r in prompt_rows:
                    r.context = self.drafter.continued(entry.context, prompt, start)
            if rides and len(prompt_rows) == 1:
                # Its ids join the next step's: one pass over the weights for both, where a prefill or an
                # extend of its own cost a pass and its ops (~2 ms of a `micro` extend's 7; 32 cold `tiny`
                # prompts on one Zen 5 core: 80 ms prefilled, 44 ms in a step).
                target = batch.row_view(into[len(rows)], capacity)
                if entry is not None:
                    target.put_row(0, entry.keys, entry.values, start)
                    target.lens = target.lens.new_full((1,), start)
                prompt_rows[0].pending = prompt[start:]
                self.stepped_prefills += 1
                parts.append(target)
                rows += prompt_rows
                continue
            if entry is None:
                cold.append((prompt, prompt_rows))
                continue
            target = batch.row_view(into[len(rows)], capacity) if isinstance(batch, KVCache) else None
            part, last = self.decoder.extend(prompt, entry.keys, entry.values, start, capacity, into=target)
            part, last = self._repeated(part, last, [len(prompt_rows)])
            parts.append(part)
            logits.append(last)
            rows += prompt_rows
        prompts = cold
        prompts.sort(key=lambda p: len(p[0]))
        start = 0
        while start < len(prompts):
            end = start + 1
            # Attention scores grow with rows x length^2; bound both per chunk.
            while end < len(prompts) and (end - start + 1) * len(prompts[end][0]) <= self.prefill_tokens:
                end += 1
            chunk = prompts[start:end]
            capacity = max(len(p) + max(x.max_new for x in r) for p, r in chunk)
            part, last = self.decoder.prefill([p for p, _ in chunk], capacity)
            part, last = self._repeated(part, last, [len(r) for _, r in chunk])
            parts.append(part)
            logits.append(last)
            for _, chunk_rows in chunk:
                rows += chunk_rows
            start = end
        return rows, parts, torch.cat(logits) if logits else None

    @staticmethod
    def _repeated(part, last: torch.Tensor, counts: list[int]):
        """Each prompt's cache rows and last logits repeated for its `counts` rows (n samples, requests
        sharing it); as they are where each has one: a select copies every row (0.2 s of the demo's
        evaluation, whose turns are one row each)."""
        if all(c == 1 for c in counts):
            return part, last
        index = torch.repeat_interleave(torch.arange(len(counts)), torch.tensor(counts)).to(last.device)
        return part.select(index), last.index_select(0, index)

    def _sample_step(self, slots: list[Row | None], logits: torch.Tensor, cache) -> torch.Tensor:
        """Samples each row's next ids from `logits` (each row's positions in turn: one, or after a step
        that fed drafts 1 + its draft's length; holes, None, have none) and returns the ids to feed
        next, per slot: [B], or [B, T'] with each row's next draft after its last id.

        A row whose last step fed a draft samples its positions in order, each with the next number of
        its own generator, while the sampled id equals the drafted one: the first that differs, or the
        end of the draft, is its last id of this step. Its ids, logprobs and random numbers are those
        of sampling one id per step (the same distribution at each position, the same draws), only in
        fewer steps; its cache keeps the positions fed up to that id.
        """
        device = logits.device
        rows = [r for r in slots if r is not None and not r.pending]  # a pending row has no logits yet
        if not rows:
            return self._next_inputs(slots, cache, device)
        counts = [1 + len(r.draft) for r in rows]  # positions each row may sample

        def per_position(values: list[float]) -> list[float]:
            return [v for v, c in zip(values, counts) for _ in range(c)]

        temperature = per_position([r.params.temperature for r in rows])
        top_p = per_position([r.params.top_p for r in rows])
        # Python floats, not a tensor per row: a greedy row draws nothing, and the per-row tensors and
        # their stack cost more than the draws (the float32 values are the same either way). A row with
        # a draft reads a number for every position it may sample and takes only those it used.
        draws = []
        for r, c in zip(rows, counts):
            draws += r.uniforms(c)
        tokens, logp = sample(logits, temperature, top_p, draws)
        chosen = logp.gather(1, tokens[:, None])[:, 0].tolist()
        k = max(r.params.top_logprobs for r in rows)
        # The alternatives as lists once for all rows, rather than two tensor slices per row and step.
        top = logp.topk(k, dim=-1) if k else None
        top_ids, top_logps = (top.indices.tolist(), top.values.tolist()) if top is not None else ([], [])
        tokens = tokens.tolist()
        at, excess, emitted = 0, [], 0
        for r, c in zip(rows, counts):
            n, kk = 0, r.params.top_logprobs
            for j in range(at, at + c):
                self._emit(r, tokens[j], chosen[j], list(zip(top_ids[j][:kk], top_logps[j][:kk])) if kk else None)
                n += 1
                if r.finish_reason is not None or n == c or tokens[j] != r.draft[n - 1]:
                    break
            r.taken += n
            if c > 1:
                self.accepted_tokens += n - 1
            excess.append(max(0, r.fed - n))
            at += c
            emitted += n
        if any(excess):
            each = iter(excess)
            back = [0 if r is None or r.pending else next(each) for r in slots]
            cache.lens = cache.lens - torch.tensor(back, dtype=cache.lens.dtype, device=cache.lens.device)
        self.generated_tokens += emitted
        return self._next_inputs(slots, cache, device)

    def _emit(self, r: Row, t: int, logprob: float, top: list[tuple[int, float]] | None) -> None:
        """Appends one sampled id to its row and decides whether the row is finished."""
        r.ids.append(t)
        r.logprobs.append(logprob)
        if top is not None:
            r.top.append(top)
        if r.context is not None:
            r.context.ids.append(t)
        added = self.tokenizer.token_bytes(t)
        r.text += added
        hit = find_stop(r.text, len(added), r.stops) if not r.stop_ends.isdisjoint(added) else None
        if hit is not None:
            r.finish_reason, r.stop_reason, r.stop_span = "stop", r.params.stop[hit[0]], hit[1:]
        elif t == self.tokenizer.eos_id and not r.params.ignore_eos:
            r.finish_reason = "stop"
        elif len(r.ids) >= r.max_new:
            r.finish_reason = "length"

    def _next_inputs(self, slots: list[Row | None], cache, device: torch.device) -> torch.Tensor:
        """Each row's last id, then its draft where the drafter has one, or a pending prompt's ids: [B]
        or [B, the most a row feeds] (shorter rows padded; `decode` feeds each row's own, `Row.fed`; a
        hole's are padding). A draft never reaches past the row's budget of new ids nor the step past
        the cache's capacity. Pending prompts ride in row order while their ids fit `step_prompt_ids`
        (the first always); the rest feed nothing (`fed` 0) and ride a later step."""
        rows = [r for r in slots if r is not None]
        room = cache.capacity - int(cache.lens.max()) - 1 if self.drafter is not None else 0
        for r in rows:
            r.draft = []
            if room > 0 and r.finish_reason is None and not r.pending:
                if r.context is None:
                    r.context = RowContext(r.prompt + r.ids)
                r.draft = self.drafter.propose(r.context, min(room, r.max_new - len(r.ids) - 1))
        left = self.step_prompt_ids  # prompt ids this step may still feed
        for r in rows:
            if not r.pending:
                r.fed = 1 + len(r.draft)
                continue
            r.fed = len(r.pending) if left == self.step_prompt_ids or len(r.pending) <= left else 0
            left -= r.fed
        inputs = [[PAD_ID] if r is None or not r.fed else r.pending or [r.ids[-1], *r.draft] for r in slots]
        width = max(map(len, inputs))
        if width == 1:
            return torch.tensor([fed[0] for fed in inputs], dtype=torch.long, device=device)
        self.drafted_tokens += sum(len(r.draft) for r in rows)
        padded = [fed + [fed[0]] * (width - len(fed)) for fed in inputs]
        return torch.tensor(padded, dtype=torch.long, device=device)
