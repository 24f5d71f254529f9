"""A small Llama-style decoder: RMSNorm, rotary positions, SwiGLU, tied input/output embeddings.

One forward serves training (full causal attention) and prefill (the same, writing a KV cache);
`extend` prefills only the new end of a prompt whose start is already cached (a prefix-cache hit), and
`decode` takes one new token per row, each row at its own length in the cache, with the same
arithmetic laid out for single rows (`DecodeWeights`) and compiled by TorchScript (`decode_tokens`).
"""

from __future__ import annotations

import contextlib
import functools
import math
import sys
from dataclasses import asdict, dataclass
from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from . import attention

try:  # torch >= 2.3
    from torch.nn.attention import SDPBackend, sdpa_kernel

    # Causal attention over a whole sequence on a GPU (training, prefill) by these kernels, not cuDNN's:
    # an H200 (torch 2.11) took 45-73 ms at the first call of each sequence length up to 64, against
    # 0.05-0.2 ms from 65 on, so that each new prompt length cost a request ~60 ms (docs/engine.md).
    CAUSAL_ATTENTION_KERNELS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
except ImportError:  # older torch: no cuDNN attention to leave out
    sdpa_kernel = None
from .graph_step import GraphSteps, graphs_enabled
from .precision import autocast
from .row_step import RowStep


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    dim: int
    n_layers: int
    n_heads: int
    hidden_dim: int
    max_seq_len: int
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    def to_json(self) -> dict:
        return asdict(self)

    def projection_shapes(self) -> list[tuple[int, int]]:
        """(in, out) of each matmul a block and the output make: where a training step's FLOPs go."""
        d = self.dim
        return [(d, 3 * d), (d, d), (d, 2 * self.hidden_dim), (self.hidden_dim, d), (d, self.vocab_size)]


# Shapes without the vocabulary, which the tokenizer decides. Parameter counts with the 281-token
# byte vocabulary: micro 0.46M, tiny 4.3M, small 25.8M.
PRESETS: dict[str, dict] = {
    "micro": dict(dim=128, n_layers=2, n_heads=4, hidden_dim=384, max_seq_len=1024),
    "tiny": dict(dim=256, n_layers=5, n_heads=4, hidden_dim=768, max_seq_len=2048),
    "small": dict(dim=512, n_layers=8, n_heads=8, hidden_dim=1408, max_seq_len=2048),
}


def preset_config(name: str, vocab_size: int, max_seq_len: int | None = None) -> ModelConfig:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    shape = dict(PRESETS[name])
    if max_seq_len is not None:
        shape["max_seq_len"] = max_seq_len
    return ModelConfig(vocab_size=vocab_size, **shape)


# Queries per block of causal attention (`Attention`): measured on a 2-core Xeon for `micro` at 2,048
# positions, training attention ran 2.8x faster in blocks of 128 or 256 than over the whole matrix,
# and 64 was slower again (more, smaller GEMMs).
QUERY_BLOCK = 256


def query_blocks(length: int, size: int | None = None) -> list[tuple[int, int]]:
    """The [first, last) query ranges causal attention over `length` positions is computed in, `size`
    queries each (default QUERY_BLOCK)."""
    size = size or QUERY_BLOCK
    return [(first, min(length, first + size)) for first in range(0, length, size)]


# A prefix-cache hit (`Transformer.extend`) prefills its new ids padded to a multiple of EXTEND_BLOCK,
# in blocks of that many queries, each over the keys up to a multiple of EXTEND_BLOCK (masked past each
# query's position), so that its GEMM shapes repeat across requests. In bf16 oneDNN builds a kernel for
# every new shape, about 1 ms each, and agent turns extend by every length over every prefix length:
# through the sampler (`CachedDecoder.extend`, `micro`, 20-250 new ids after 400-1,400 cached, random)
# an extend took 9.1-9.6 ms before and 7.6-7.9 ms in these blocks (docs/engine.md).
EXTEND_BLOCK = 64

# Without the fused kernel (`attention`), a speculative decode step (several new ids per row) in fp32
# on a CPU attends row by row in torch ops over exactly each row's positions once the rows fill at
# most this share of the batch's span: the batched path reads keys and values, and runs the softmax,
# at the longest row's width for every row, which in an evaluation was twice what the rows held
# (docs/engine.md). Row by row in torch ops costs a few small ops per row and layer, so with rows of
# nearly one length the batched path stays faster. With the kernel every fp32 step on a CPU goes row
# by row, and so does every bf16 step over a bf16 cache.
ROW_ATTENTION_FILL = 0.85


def matmul_dtype(device: torch.device) -> torch.dtype:
    """The dtype autocast gives matmuls on `device` now (fp32 without autocast). Attention masks are
    built in it: 0 and -inf are exact in bf16, and a mask already in it is not cast again by every
    block's `baddbmm` under autocast."""
    if hasattr(torch, "get_autocast_dtype"):  # torch >= 2.4, where the per-device calls are deprecated
        if torch.is_autocast_enabled(device.type):
            return torch.get_autocast_dtype(device.type)
    elif device.type == "cpu" and torch.is_autocast_cpu_enabled():
        return torch.get_autocast_cpu_dtype()
    elif device.type == "cuda" and torch.is_autocast_enabled():
        return torch.get_autocast_gpu_dtype()
    return torch.float32


def round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).type_as(x) * weight


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding on the two halves of each head (x: [B, H, T, D]; cos, sin: [B or 1, 1, T, D/2])."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


# Ids a decode step may feed (all rows together) and still run as one native call
# (`DecodeWeights.row_step`), per dtype: each id multiplies by every weight once more from the core's
# L2, where the TorchScript step's GEMMs share each load among all ids but pay ~200 ops' dispatch. One
# id a row, one thread (docs/engine.md): fp32 on the 2-core AVX2 EPYC, native faster up to ~24 rows
# (16: `micro` 2.1 against 2.9 ms, `tiny` 11.9 against 14.1), about even at 32; bf16 on a 16-core AMX
# Xeon, whose TorchScript GEMMs run on AMX tiles, native faster at 4 rows (`tiny` 2.0 against 3.4 ms,
# `small` about even), slower at 8 for `small` (22.3 against 16.0): 5, a lone row's drafted step (its id
# and four drafted ones). In fp32 with the system OpenBLAS's sgemm, and in bf16 with AVX512-BF16 and no AMX
# (`gemv_pairs` in row_step.c), the native step takes any number of ids (`RowStep.batches`,
# `row_step.GEMM_IDS`): the limit holds only without them.
ROW_STEP_IDS = {torch.float32: 16, torch.bfloat16: 5}
# The same limit for bf16 steps in pairs on a CPU with AMX, whose TorchScript GEMMs run on AMX tiles. A
# 16-core AMX Xeon, 15 threads (docs/engine.md, "Batches in pairs on AMX too"): native faster up to 64 ids
# (`tiny` 32 rows 2.4 against 13.0 ms, 64 rows 4.1 against 7.1; `small` 32 rows 8.1 against 10.2, 64 rows
# about even), TorchScript from 160 on for `small` (23.7 against 16.9 ms) and 320 for `tiny`.
PAIRS_IDS_BESIDE_AMX = 64

# Positions a cache allocates beyond what its rows hold, so that it grows once per this many decode
# steps rather than holding every row's whole budget of new tokens from the start (`KVCache.reserve`).
GROW_POSITIONS = 64


def grown_positions(held: int, needed: int, capacity: int, context: int | None = None) -> int:
    """Positions to allocate when `needed` passes the `held` allocated: `GROW_POSITIONS` beyond it, and
    at least half again what was held, so that a batch whose rows decode from a few hundred positions to
    a few thousand grows a few times rather than every 64 steps (each growth copies every row); the whole
    `capacity` where that would leave less than `GROW_POSITIONS` below it, whose growth would follow
    within as many steps (32 requests of 128 new ids grew 88 -> 153 -> 183 positions, each growth new
    memory: 30-100 ms of page faults a round on a VM; docs/engine.md). With `context` (the model's, where
    a larger allocation costs decode steps no reads: `KVCache.context`), all of it once a growth reaches
    half of it: rows that join later with longer prompts raise the capacity toward it, and each raise
    was another growth (an agent evaluation grew 1,194 -> 1,529 -> 2,041 -> 2,048 positions, 0.34 s)."""
    grown = max(needed + GROW_POSITIONS, held + held // 2)
    if context is not None and 2 * grown >= context:
        return max(capacity, context)
    return capacity if capacity - grown < GROW_POSITIONS else grown


class KVCache:
    """Keys and values per layer, both [rows, heads, positions, head_dim]; row b holds `lens[b]` positions.

    A row and head's values are one contiguous block, as its keys are: the fused attention
    (attention.c) reads a step's keys and values from memory as two streams per row and head, where
    values laid out with positions last (for torch's bf16 matmuls, before that kernel) were head_dim
    short streams: 1.7-1.8x slower for 32 rows of 24-184 positions on an AVX2 EPYC, about as fast for
    rows of ~1,000 (docs/engine.md, "Values laid out as keys").

    `keys` and `values` are views of the first `rows` rows of a larger allocation, so that rows
    joining (`merge`) or leaving (`compact`) copy only those rows: with agent turns starting and
    ending every few steps, copying the whole batch each time took about a fifth of an evaluation's
    sampler time (docs/engine.md). The allocation grows only when the rows needed pass it, to exactly
    what is needed then, so it never holds more rows than the batch has held.

    `capacity` is the most positions a row may reach (its prompt and every new token it may sample);
    the allocation holds fewer, `positions`, and grows as rows decode (`reserve`, `grown_positions`).
    Decoding in torch ops read every allocated position of every row (in bf16 it still reads the
    allocation while it is at most twice the span), so a cache sized for an agent turn's whole budget
    of new tokens (512, when a turn uses about 100) read twice what the rows held.
    """

    def __init__(self, keys: list[torch.Tensor], values: list[torch.Tensor], lens: torch.Tensor, capacity: int):
        self._keys, self._values, self.lens = keys, values, lens
        self.capacity = capacity
        # The model's context, where decode steps read only each row's own positions (a batch whose rows
        # the fused kernel attends: `CachedDecoder.empty_batch`): growths may take all of it
        # (`grown_positions`). None elsewhere: torch's attention reads the whole allocation.
        self.context: int | None = None
        self._view(int(lens.shape[0]))

    def _view(self, rows: int) -> None:
        self.keys = [k[:rows] for k in self._keys]
        self.values = [v[:rows] for v in self._values]

    @classmethod
    def empty(
        cls,
        config: ModelConfig,
        rows: int,
        capacity: int,
        dtype: torch.dtype,
        device: torch.device | str = "cpu",
        holding: int | None = None,
    ) -> KVCache:
        """Room for `rows` rows of up to `capacity` positions. With `holding`, the most positions a row
        holds now (a prefill's longest prompt), only those are allocated, with room beyond them as
        `grown_positions` leaves it; without it, all `capacity`."""
        positions = capacity if holding is None else grown_positions(0, holding, capacity)
        h, hd, layers = config.n_heads, config.head_dim, range(config.n_layers)
        return cls(
            [torch.zeros((rows, h, positions, hd), dtype=dtype, device=device) for _ in layers],
            [torch.zeros((rows, h, positions, hd), dtype=dtype, device=device) for _ in layers],
            torch.zeros(rows, dtype=torch.long, device=device),
            capacity,
        )

    @property
    def rows(self) -> int:
        return int(self.lens.shape[0])

    @property
    def positions(self) -> int:
        """Positions allocated per row (at most `capacity`)."""
        return int(self._keys[0].shape[2])

    @property
    def allocated_rows(self) -> int:
        return int(self._keys[0].shape[0])

    def reserve(self, positions: int) -> None:
        """Makes at least `positions` (at most `capacity`) positions allocated, growing as
        `grown_positions` says; the rows' keys and values are copied once per growth."""
        if positions <= self.positions:
            return
        if positions > self.capacity:
            raise ValueError("KV cache is full")
        self.make_room(self.allocated_rows, positions, self.capacity)

    def _reallocate(self, rows: int, positions: int) -> None:
        """Moves the rows held into a new allocation of `rows` rows and `positions` positions."""
        held_rows, held = self.rows, self.positions

        def grown(t: torch.Tensor) -> torch.Tensor:
            shape = list(t.shape)
            shape[0], shape[2] = rows, positions
            # Zeros only where nothing is copied: zero-filling all of it first wrote the held part
            # twice (an evaluation's 36 growths of ~50 MB took 1.1 s).
            out = t.new_empty(shape)
            out[:held_rows, :, :held].copy_(t[:held_rows, :, :held])
            out[:held_rows, :, held:].zero_()
            out[held_rows:].zero_()
            return out

        self._keys = [grown(k) for k in self._keys]
        self._values = [grown(v) for v in self._values]
        self._view(held_rows)

    def select(self, index: torch.Tensor) -> KVCache:
        """A new cache of the rows `index` (repeats allowed)."""
        return KVCache(
            [k.index_select(0, index) for k in self.keys],
            [v.index_select(0, index) for v in self.values],
            self.lens.index_select(0, index),
            self.capacity,
        )

    def compact(self, order: torch.Tensor) -> KVCache:
        """Keeps the rows `order` in that order, in place: row j becomes row order[j]. Only rows that
        move are copied, so an `order` that leaves kept rows where they are and fills the gaps from
        the end (as `Sampler` builds it) copies the fewest, and in such an order only the positions
        each moved row holds (the rest is never attended)."""
        moves = [(j, i) for j, i in enumerate(order.tolist()) if i != j]
        if not {j for j, _ in moves} & {i for _, i in moves}:
            # No moved row is read after it is written (the sampler's case): each row copied straight
            # into its place, without gathering the moved rows into a temporary first (0.31 -> 0.06 ms
            # for one `micro` row of 1,400 positions), and only the positions it holds: the rest of
            # the allocation is never attended (in the demo's evaluation rows held about half of it).
            held = self.lens.tolist()
            for j, i in moves:
                for t in (*self._keys, *self._values):
                    t[j, :, : held[i]].copy_(t[i, :, : held[i]])
        else:
            moved = torch.tensor([j for j, _ in moves], device=order.device)
            source = torch.tensor([i for _, i in moves], device=order.device)
            for t in (*self._keys, *self._values):
                t.index_copy_(0, moved, t.index_select(0, source))
        self.lens = self.lens.index_select(0, order)
        self._view(len(order))
        return self

    def make_room(self, rows: int, positions: int, capacity: int) -> None:
        """Makes at least `rows` rows and `positions` positions allocated (growing once, by
        `grown_positions`, and never to fewer rows than allocated), for rows up to `capacity`: as rows
        decode (`reserve`), and before rows join (`merge`, or an extend writing straight into a row,
        `row_view`)."""
        self.capacity = max(self.capacity, capacity)
        held = self.positions
        if positions > held:
            # Room to grow into, as `reserve` leaves: rows join with prompts longer than the batch's
            # every few steps, and each growth copies the whole batch.
            held = grown_positions(held, positions, self.capacity, self.context)
            # Past the rows' capacity (toward `context`): counted against the memory bound as theirs.
            self.capacity = max(self.capacity, held)
        if rows > self.allocated_rows or held > self.positions:
            # Never fewer rows than allocated: a batch that shrank grows back within a few steps, and
            # each growth copies it and touches fresh memory (page faults: 25-200 ms on a VM).
            self._reallocate(max(rows, self.allocated_rows), held)

    def row_view(self, i: int, capacity: int) -> KVCache:
        """A one-row cache over row i's memory (empty, length 0), for an extend to write into directly
        (`CachedDecoder.extend`); `merge(into=[i])` then copies nothing. Room for it first:
        `make_room`."""
        past_rows = self.rows <= i < self.allocated_rows
        if not past_rows and not (0 <= i < self.rows and int(self.lens[i]) == 0):
            raise ValueError(f"row_view: row {i} is neither empty nor allocated past the rows held")
        one = slice(i, i + 1)
        return KVCache(
            [k[one] for k in self._keys], [v[one] for v in self._values], self.lens.new_zeros(1), capacity
        )

    def merge(self, *others: KVCache, into: list[int] | None = None) -> KVCache:
        """Appends the rows of `others` in place (returns self), or with `into` writes them, in order,
        into those rows: empty ones (`vacate`) or past the last, growing the allocation once if needed.
        A row already in its place (an extend into `row_view`) is not copied. Positions past a row's
        length may hold an earlier row's (finite) numbers, never attended."""
        rows, added = self.rows, sum(o.rows for o in others)
        slots = list(range(rows, rows + added)) if into is None else into
        inside = [i for i in slots if i < rows]
        if len(slots) != added or len(set(slots)) != added or min(slots, default=0) < 0 or (
            inside and bool(self.lens[inside].any())
        ):
            raise ValueError(f"merge: {added} rows into rows {slots}, which must be distinct and empty")
        needed = max(rows, max(slots, default=rows - 1) + 1)
        held = max([0, *(int(o.lens.max()) for o in others)])
        self.make_room(needed, held, max([self.capacity, *(o.capacity for o in others)]))
        lens = torch.cat((self.lens, self.lens.new_zeros(needed - rows)))
        at = 0
        for other in others:
            n, into_rows = int(other.lens.max()), slots[at : at + other.rows]  # only the positions they hold
            # One copy per tensor where the rows go side by side (appended), else one per row.
            first = into_rows[0]
            if into_rows == list(range(first, first + other.rows)):
                moves = [(slice(first, first + other.rows), slice(None))]
            else:
                moves = [(slot, j) for j, slot in enumerate(into_rows)]
            for mine, theirs in zip((*self._keys, *self._values), (*other.keys, *other.values)):
                for slot, j in moves:
                    if mine[slot].data_ptr() != theirs[j].data_ptr():
                        mine[slot, :, :n] = theirs[j, :, :n]
            lens[into_rows] = other.lens
            at += other.rows
        self.lens = lens
        self._view(needed)
        return self

    def vacate(self, rows: list[int], keep: int | None = None) -> KVCache:
        """Empties `rows` in place (returns self): length 0, so that decoding reads none of their
        positions, every other row where it was; the view then ends at row `keep` (default: after the
        last row holding positions; a caller's row may hold none yet, a prompt a later step computes),
        the empty rows past it leaving. `merge(into=)` fills them again without moving any row
        (`Sampler`)."""
        lens = self.lens.clone()
        lens[rows] = 0
        if keep is None:
            held = lens.nonzero()
            keep = int(held[-1]) + 1 if held.numel() else 0
        self.lens = lens[:keep]
        self._view(keep)
        return self

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor, start: int = 0) -> None:
        """Every row's keys and values ([rows, heads, t, head_dim] each) at positions start..start+t."""
        t = k.shape[2]
        self.keys[layer][:, :, start : start + t] = k
        self.values[layer][:, :, start : start + t] = v

    def attended(self, layer: int, end: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values of positions 0..end, both [rows, heads, end, head_dim] (views)."""
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]

    def row(self, i: int, n: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Copies of row i's first n positions, per layer, [heads, n, head_dim] (for `put_row`)."""
        return [k[i, :, :n].clone() for k in self.keys], [v[i, :, :n].clone() for v in self.values]

    def put_row(self, i: int, keys: list[torch.Tensor], values: list[torch.Tensor], n: int) -> None:
        """Writes the first n positions that `row` copied (of at least n) into row i."""
        for layer, (k, v) in enumerate(zip(keys, values)):
            self.keys[layer][i, :, :n] = k[:, :n]
            self.values[layer][i, :, :n] = v[:, :n]


class SharedPrefix:
    """The keys and values of a prompt prefix that many rows of a batch share (an agent's system prompt,
    the first ~150 ids of every turn in the demo's evaluation), one copy [heads, positions, head_dim] per
    layer, which each such row also holds (`adopt`). The fused attention reads a row's first positions
    from it instead of the row's own copy (`attention.attend_rows`): read by every row of a step, it
    stays in the core's caches where each row's own came from memory (32 rows sharing 144 of ~580
    positions: a `tiny` decode step 44 -> 41 ms median, the same bits; `bench/prompt_steps.py`)."""

    # Fewer shared positions than this are not worth a copy and the checks.
    MIN_POSITIONS = 64

    def __init__(self, ids: list[int], keys: list[torch.Tensor], values: list[torch.Tensor]):
        self.ids, self.keys, self.values = ids, keys, values

    @classmethod
    def of_row(cls, cache: KVCache, row: int, ids: list[int]) -> SharedPrefix | None:
        """Row `row`'s first positions, as many whole `attention.SHARED_BLOCK`s as `ids` (its prompt's
        prefix common to the rows) covers within what the row holds, or None if that is fewer than
        `MIN_POSITIONS`. (A prefix-cache hit whose new ids ride the next step holds only its hit yet;
        positions past it are not computed, and a copy of them would reach every row that adopts it.)"""
        n = min(len(ids), int(cache.lens[row])) // attention.SHARED_BLOCK * attention.SHARED_BLOCK
        if n < cls.MIN_POSITIONS:
            return None
        keys, values = cache.row(row, n)
        return cls(list(ids[:n]), keys, values)  # copies, each contiguous

    def adopt(self, cache: KVCache, row: int, prompt: list[int]) -> int:
        """The positions row `row` reads from here: as many whole `attention.SHARED_BLOCK`s as its prompt
        shares with these ids, within what the row holds, if at least `MIN_POSITIONS`, after its own keys
        and values there are overwritten with these (a prefix computed by another path, a batched
        prefill or an extend, may differ in the last bits: the row then holds the batch's copy, as a
        prefix-cache hit holds another request's); else 0."""
        n = min(len(self.ids), len(prompt), int(cache.lens[row]))
        same = next((i for i in range(n) if prompt[i] != self.ids[i]), n)
        n = same // attention.SHARED_BLOCK * attention.SHARED_BLOCK
        if n < self.MIN_POSITIONS:
            return 0
        cache.put_row(row, self.keys, self.values, n)
        return n


class Attention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.n_heads, self.head_dim = config.n_heads, config.head_dim
        self.qkv = nn.Linear(config.dim, 3 * config.dim, bias=False)
        self.out = nn.Linear(config.dim, config.dim, bias=False)

    def forward(self, x, cos, sin, bias, layer: int, cache: KVCache | None, start: int = 0):
        """`bias` is added to the attention scores: 0 where a query may look, -inf where not (at least
        causal: no query sees a key after its own position); its shape broadcasts to
        [rows * heads, queries, keys]. With a cache and `start` > 0, the `t` new
        positions start at `start` and also attend to the `start` cached ones (a prefix-cache hit)."""
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        if cache is not None:
            cache.write(layer, k, v, start)
        extending = cache is not None and start > 0
        if extending and bias is None:
            # The decode step's fused kernel (`Transformer.extend` chose it): each row's t new queries
            # over its start + t positions, causal among themselves, no mask needed. The queries [N, H,
            # D] cast as autocast casts a matmul's input (the rotation made bf16 queries fp32).
            keys, values = cache.keys[layer], cache.values[layer]
            queries = q.transpose(1, 2).reshape(b * t, self.n_heads, self.head_dim).to(keys.dtype)
            scale = 1.0 / math.sqrt(self.head_dim)
            y = torch.ops.coa.attend_rows(queries, keys, values, [start + t] * b, [t] * b, scale)
            return self.out(y.view(b, t, -1))
        if extending:
            # Keys up to a multiple of EXTEND_BLOCK past the new ids (`bias` masks what lies beyond
            # each query; what the allocation holds there is finite), so that the shapes repeat.
            width = min(cache.positions, round_up(start + t, EXTEND_BLOCK))
            k, v = (kv.to(q.dtype) for kv in cache.attended(layer, width))
            blocks = [
                (first, last, min(width, round_up(start + last, EXTEND_BLOCK)))
                for first, last in query_blocks(t, EXTEND_BLOCK)
            ]
        span = k.shape[2]
        if x.is_cuda and span == t and hasattr(F, "scaled_dot_product_attention"):
            # Full causal attention over the whole sequence (training, prefill): the fused kernel,
            # which never stores the T x T scores. `bias` is then exactly the causal mask.
            with sdpa_kernel(CAUSAL_ATTENTION_KERNELS) if sdpa_kernel else contextlib.nullcontext():
                y = F.scaled_dot_product_attention(q, k.to(q.dtype), v.to(q.dtype), is_causal=True)
            return self.out(y.transpose(1, 2).reshape(b, t, -1))
        # Causal attention in blocks of queries, each over only the keys it may see: the masked half
        # of the score matrix is never computed, cast or stored, and each block's scores stay in
        # cache. Every row's arithmetic is the one it had over the whole matrix.
        ys = []
        if extending:
            for first, last, seen in blocks:
                qb, kb, vb = q[:, :, first:last], k[:, :, :seen], v[:, :, :seen]
                ys.append(self._attend(qb, kb, vb, bias[..., first:last, :seen], copy=False))
        else:
            # Split into blocks, each block's keys and values joined from the blocks up to it: the
            # backward pass then adds block-sized gradients and joins them once, where slicing
            # (`k[:, :, :last]`) made every block's gradient a zero-filled copy of the whole q, k
            # and v (fill_, copy_ and add over [rows, heads, T, head_dim]: ~12% of a `micro` policy
            # step at 300-1,500 positions, docs/engine.md). Bit for bit the same gradients.
            qs, ks, vs = (z.split(QUERY_BLOCK, dim=2) for z in (q, k, v))
            for i, (first, last) in enumerate(query_blocks(t)):
                keys, values = (z[0] if i == 0 else torch.cat(z[: i + 1], dim=2) for z in (ks, vs))
                ys.append(self._attend(qs[i], keys, values, bias[..., first:last, :last]))
        y = ys[0] if len(ys) == 1 else torch.cat(ys, dim=2)
        return self.out(y.transpose(1, 2).reshape(b, t, -1))

    def _attend(self, q, k, v, bias, copy: bool = True):
        b, h, t, hd = q.shape
        span = k.shape[2]
        # Every GEMM operand dense: the copies are small next to the scores, and the kernels run
        # faster on them than on the blocks' strided slices (micro 8x1024: 599 -> 570 ms a step).
        # Not for an extend (`copy` False): its keys and values, read from the cache, are long next to
        # its 64 queries, and copying them again for every block cost more than it saved (micro, 20-250
        # new ids after 400-1,400 cached, bf16, four alternated runs: 10.1-10.5 -> 9.1-9.6 ms an extend).
        q3 = q.reshape(b * h, t, hd).contiguous()
        k3, v3 = k.reshape(b * h, span, hd), v.reshape(b * h, span, hd)
        if copy:
            k3, v3 = k3.contiguous(), v3.contiguous()
        # Scale, mask and QK^T in one GEMM call.
        scores = torch.baddbmm(bias, q3, k3.transpose(1, 2), alpha=1.0 / math.sqrt(hd))
        # In the scores' own dtype: torch's bf16 softmax computes in fp32 inside and rounds once, so
        # its output equals softmax-in-fp32-then-cast bit for bit, without the two casts each way
        # (5x faster forward and backward on micro's shapes; the gradient differs within bf16 rounding).
        return torch.bmm(torch.softmax(scores, dim=-1), v3).view(b, h, t, hd)


class FeedForward(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.gate_up = nn.Linear(config.dim, 2 * config.hidden_dim, bias=False)
        self.down = nn.Linear(config.hidden_dim, config.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)


class Block(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.attn_norm = RMSNorm(config.dim, config.norm_eps)
        self.attn = Attention(config)
        self.ffn_norm = RMSNorm(config.dim, config.norm_eps)
        self.ffn = FeedForward(config)

    def forward(self, x, cos, sin, bias, layer=0, cache=None, start=0):
        x = x + self.attn(self.attn_norm(x), cos, sin, bias, layer, cache, start)
        return x + self.ffn(self.ffn_norm(x))


class Transformer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.dim)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.norm = RMSNorm(config.dim, config.norm_eps)
        # Recompute each block in the backward pass instead of storing its activations; the trainer
        # turns this on for long sequences, where attention scores dominate memory.
        self.recompute_blocks = False
        inv_freq = 1.0 / config.rope_theta ** (torch.arange(0, config.head_dim, 2).float() / config.head_dim)
        angles = torch.outer(torch.arange(config.max_seq_len).float(), inv_freq)
        self.register_buffer("rope_cos", angles.cos(), persistent=False)
        self.register_buffer("rope_sin", angles.sin(), persistent=False)
        self.apply(self._init)
        for block in self.blocks:
            # Residual branches start small so the stream's scale does not grow with depth.
            for w in (block.attn.out.weight, block.ffn.down.weight):
                nn.init.normal_(w, std=0.02 / math.sqrt(2 * config.n_layers))

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def forward(
        self,
        ids: torch.Tensor,
        cache: KVCache | None = None,
        lengths: torch.Tensor | None = None,
        at: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Logits for every position of `ids` [B, T], positions 0..T-1; with `at` (a bool mask [B, T]),
        only for the positions it marks, [N, V] in row-major order.

        With `cache`, also stores keys and values; rows right-padded to T keep `lengths[b]` positions
        (the padding's entries are overwritten by the tokens decoded next, and never attended to).
        """
        t = ids.shape[1]
        if t > self.config.max_seq_len:
            raise ValueError(f"sequence of {t} tokens exceeds the context of {self.config.max_seq_len}")
        cos, sin = self.rope_cos[:t][None, None], self.rope_sin[:t][None, None]
        bias = torch.full((t, t), float("-inf"), dtype=matmul_dtype(ids.device), device=ids.device).triu(1)
        if cache is not None:
            cache.reserve(t)
        x = self.embed(ids)
        for i, block in enumerate(self.blocks):
            if self.recompute_blocks and self.training:
                x = checkpoint(block, x, cos, sin, bias)
            else:
                x = block(x, cos, sin, bias, i, cache)
        if cache is not None:
            cache.lens = (
                lengths if lengths is not None else torch.full((ids.shape[0],), t, dtype=torch.long, device=ids.device)
            )
        return self.logits(x if at is None else x[at])

    def extend(self, ids: torch.Tensor, cache: KVCache, start: int, last: bool = False) -> torch.Tensor:
        """Logits [B, T, V] for `ids` [B, T] at positions start..start+T-1, attending to the `start`
        positions already in `cache` (a prefix-cache hit): the prefill of only a prompt's new tokens.
        With `last`, only the last position's, [B, V] (what sampling starts from).

        In bf16 the ids are padded to a multiple of EXTEND_BLOCK where the cache has room (oneDNN's
        kernels are built per shape): the padding's keys and values land past the rows' lengths, where
        the tokens decoded next overwrite them, and no real position attends to them (they come after
        it). In fp32 (OpenBLAS: nothing built per shape) the padding was only more work. On a CPU the
        attention is the decode step's fused kernel (`attention.fused_over`): torch's (GEMMs per head,
        an unvectorized softmax, the mask) took about half of a `micro` extend (docs/engine.md)."""
        t = ids.shape[1]
        if start + t > cache.capacity:
            raise ValueError("KV cache is too small for the extended prompt")
        room = min(cache.capacity, self.config.max_seq_len) - start
        dtype = matmul_dtype(ids.device)
        padded = min(round_up(t, EXTEND_BLOCK if dtype != torch.float32 else 1), room)
        cache.reserve(start + padded)
        cos, sin = (r[start : start + padded][None, None] for r in (self.rope_cos, self.rope_sin))
        # -inf on every key after a query's position, over all the positions the cache holds; none for the
        # kernel, whose loops stop at each query's position (`Attention.forward` takes None as the sign).
        bias = (
            None
            if attends_rows_alone(cache, dtype)
            else torch.full((padded, cache.positions), float("-inf"), dtype=dtype, device=ids.device).triu(start + 1)
        )
        x = self.embed(F.pad(ids, (0, padded - t), value=0))
        for i, block in enumerate(self.blocks):
            x = block(x, cos, sin, bias, i, cache, start=start)
        cache.lens = torch.full((ids.shape[0],), start + t, dtype=torch.long, device=ids.device)
        return self.logits(x[:, t - 1] if last else x[:, :t])

    def decode(
        self,
        ids: torch.Tensor,
        cache: KVCache,
        weights: DecodeWeights | None = None,
        counts: List[int] | None = None,
        last_only: List[bool] | None = None,
        shared: SharedPrefix | None = None,
        shared_rows: List[int] | None = None,
    ) -> torch.Tensor:
        """Logits [B, V] for one new token per row (ids: [B]), each at position `cache.lens[b]`; or, for
        ids [B, T], logits [B, T, V] for T consecutive new tokens per row at `cache.lens[b]` onwards
        (a speculative step checks a drafted continuation this way: `Sampler`). Every row's `lens`
        advances by T; a caller that keeps fewer sets `lens` back (the rest is overwritten later).
        With `counts`, row b feeds only its first counts[b] ids of the T (drafts of other lengths; the
        rest is padding; 0 for an empty row, a hole in the sampler's batch): logits [sum(counts), V] of
        those positions, row after row, and `lens` advances by `counts`. With `last_only`, a row marked
        True gets only its last position's logits (a prompt's new ids fed within a step: `Sampler`).
        With `shared` and `shared_rows`, row b's first shared_rows[b] positions equal `shared`'s (the
        caller's promise: `SharedPrefix.adopt`), and the fused attention reads them there.
        `weights`: `decode_weights()` taken since the last change of the weights (default: checked now).

        The same arithmetic as `forward` (casts, rotation, masked softmax), arranged for a few tokens per
        row: 2-D activations, every projection a plain matmul against a transposed, contiguous copy of
        its weight, already cast to the autocast dtype (`DecodeWeights`), or for a single token on a CPU
        a matrix-vector product (`RowWeights`), and the per-step index and mask tensors built once for
        all layers rather than per layer. The step itself is `decode_tokens`, compiled by TorchScript; a
        step that feeds at most `ROW_STEP_IDS` ids (batch 1, a few rows, the last rows of a batch), where
        the fused attention runs, is one call of native code instead (`DecodeWeights.row_step`,
        row_step.py), and every step there in fp32 with the BLAS's sgemm or in bf16 with AVX512-BF16.
        """
        single = ids.dim() == 1
        ids = ids.reshape(ids.shape[0], -1)
        pos = cache.lens
        b, t = ids.shape
        fed = counts or [t] * b
        if len(fed) != b or min(fed) < 0 or not 1 <= max(fed) <= t:
            raise ValueError(f"decode: counts {counts} for {b} rows of {t} ids")
        fed_per_row = torch.tensor(counts, dtype=pos.dtype, device=pos.device) if counts else None
        after = pos + (t if fed_per_row is None else fed_per_row)  # each row's length after this step
        ragged = min(fed) < t  # some row feeds fewer than T ids
        w = weights or self.decode_weights()
        ends: Optional[List[int]] = None
        fp32 = w.dtype == torch.float32
        # Row by row (`attention`): with the fused kernel always (fp32, or bf16 over a bf16 cache: the
        # engine's), each row over its own positions and feeding only its own ids; in torch ops only
        # for an fp32 speculative step of rows that leave enough of the span unread.
        fused = attends_rows_alone(cache, w.dtype)
        # The positions the step reaches: with the kernel each row's own (a row feeding a prompt's ids
        # beside rows feeding one or five need not widen them), else every row's T ids.
        span = int(after.max()) if fused else int(pos.max()) + t
        cache.reserve(span)
        if ids.device.type == "cpu" and (fp32 or w.dtype == torch.bfloat16):
            if fused or (fp32 and t > 1 and b > 1):
                row_ends = after.tolist()
                if fused or sum(row_ends) <= ROW_ATTENTION_FILL * b * span:
                    ends = row_ends
        # Ids each row feeds: its own with the kernel, all T (padding included) on the batched path.
        rows_fed = fed if ends is not None else [t] * b
        # Positions whose logits are returned, of the sum(fed) a step yields (each row's, or its last).
        returned: Optional[List[int]] = None
        if last_only is not None and any(last_only):
            returned, first = [], 0
            for c, last in zip(fed, last_only):
                returned.extend(range(first + c - 1, first + c) if last else range(first, first + c))
                first += c
        # Beside the fused attention the whole step in native code, if built: a step of few ids (holes feed
        # none, `ROW_STEP_IDS`; in pairs beside AMX, `PAIRS_IDS_BESIDE_AMX`), or any step in fp32 with the
        # BLAS's sgemm or bf16 in AVX512-BF16 pairs (`RowStep.batches`).
        step = w.row_step() if fused else None
        if step is not None and not step.batches:
            most = PAIRS_IDS_BESIDE_AMX if step.pairs else ROW_STEP_IDS.get(w.dtype, 0)
            step = step if sum(rows_fed) <= most else None
        # On a GPU (decode weights there have graphs), where `ends` is always None.
        graphs = w.graph_steps() if ends is None and graphs_enabled() else None
        # With `ends` the step's flat positions are the rows' own: the selected ones alone meet the output
        # matrix (a prompt's ~100 ids would cost it a hundred rows of logits), and the kernel reads the
        # shared prefix; the other paths select after and read each row's own.
        inside = ends is not None
        kept = torch.tensor(returned, device=ids.device) if inside and returned and step is None else None
        select = torch.tensor(returned, device=ids.device) if returned and not inside else None
        sharing = inside and shared is not None and shared_rows is not None and any(shared_rows)
        common = (shared.keys, shared.values, shared_rows) if sharing else None

        def tokens(fn, step_ids, step_pos, uniform: Optional[int], width: int, weights, kept=None, common=None):
            # `decode_tokens` (or its TorchScript, `fn`) casts every matmul's inputs as autocast would.
            # Autocast stays off there: under it TorchScript casts on its own (its one-row bf16 logits
            # then differed from eager mode's).
            with autocast("off", ids.device.type):
                return fn(
                    step_ids, step_pos, rows_fed, span, uniform, width, self.embed.weight, self.rope_cos,
                    self.rope_sin, weights.layers, weights.norms, self.norm.eps, weights.output, weights.dtype,
                    weights.vector, cache.keys, cache.values, self.config.n_heads, ends, kept, common,
                )  # fmt: skip

        if step is not None:
            feeding = [i for i, c in enumerate(rows_fed) if c]
            id_rows = ids.tolist()
            fed_ids = [id_rows[r][: rows_fed[r]] for r in feeding]
            starts = [ends[r] - rows_fed[r] for r in feeding]  # `ends`: each row's length after the step
            prefix = (shared.keys, shared.values, [shared_rows[r] for r in feeding]) if common else None
            logits = step(feeding, fed_ids, starts, cache.keys, cache.values, returned, prefix)
        elif graphs is not None:
            # Replayed from a CUDA graph (graph_step.py), recorded from `decode_tokens` itself: every row
            # feeds its T ids (as the batched path does) over the whole allocation, masked past each id's
            # position, so that a shape holds while the rows decode, until the cache grows or rows join.
            width, tensors = cache.positions, (*cache.keys, *cache.values)
            key = (b, t, width, w.dtype, tuple(kv.stride(0) for kv in tensors), tuple(kv.data_ptr() for kv in tensors))
            logits = graphs(key, lambda i, p: tokens(decode_tokens, i, p, None, width, w), ids, pos)
        else:
            # All rows at one position (batch 1, n samples of one prompt): plain slices instead of
            # scattered writes.
            uniform = span - t if not ragged and (b == 1 or bool((pos == pos[0]).all())) else None
            # Keys attended: the first `span` positions, a slice of the cache. In bf16 the attention
            # matmuls copy a slice to contiguous memory first (the whole span, per layer and step), so
            # while the allocation is at most twice the span they read all of it instead, masking the
            # positions not yet written (exactly zero weight after the softmax).
            width = cache.positions if w.dtype != torch.float32 and cache.positions <= 2 * span else span
            logits = tokens(decode_step(), ids, pos, uniform, width, w.for_rows(sum(rows_fed)), kept, common)
        cache.lens = after
        if fed_per_row is None and select is None:
            return logits if single else logits.view(b, t, -1)
        if ends is None and ragged:  # the batched path fed every row's T ids: keep the rows' own
            keep = torch.arange(t, device=ids.device)[None] < fed_per_row[:, None]
            logits = logits[keep.reshape(-1)]
        return logits if select is None else logits.index_select(0, select)

    def decode_weights(self) -> DecodeWeights:
        """The decode layout of the current weights, for the autocast dtype in effect. Rebuilt when the
        weights change (`weights_version`) or the dtype does."""
        device = self.embed.weight.device
        dtype = matmul_dtype(device)
        key = (dtype, device, weights_version(self))
        cached = getattr(self, "_decode_weights", None)
        if cached is None or cached.key != key:
            cached = DecodeWeights(self, dtype, key)
            # Not a submodule or buffer: never saved, never trained, never moved by .to().
            object.__setattr__(self, "_decode_weights", cached)
        return cached

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(self.norm(x), self.embed.weight)


def weights_version(model: nn.Module) -> tuple:
    """Changes whenever the model's weights do: an in-place update bumps a parameter's version counter,
    a load into new storage changes its address, and an optimizer step that writes the parameters
    without bumping their counters (AdamW's fused kernel, seen with torch 2.11) counts in
    `model.updates`, which the trainer advances at every step."""
    return (getattr(model, "updates", 0), tuple((p._version, p.data_ptr()) for p in model.parameters()))


def project(x: torch.Tensor, weight: torch.Tensor, dtype: torch.dtype, vector: bool) -> torch.Tensor:
    """Rows x [N, in] times a decode weight, in the arithmetic of a matmul in `dtype`: an [in, out]
    matrix in `dtype` (`DecodeWeights`), or with `vector`, for one row, an [in, out] fp32 matrix of
    `dtype`-rounded values (`RowWeights`), the input and output rounded to `dtype` around `torch.mv`
    (of the transposed view: OpenBLAS's non-transposed matrix-vector kernel, `RowWeights`)."""
    if vector:
        return torch.mv(weight.t(), x[0].to(dtype).float()).to(dtype)[None]
    return x.to(dtype) @ weight


def attends_rows_alone(cache: KVCache, dtype: torch.dtype) -> bool:
    """Whether a decode step over `cache` in `dtype` attends each row over its own positions in the
    fused kernel (`attention.fused_over`, on a CPU), where each row feeds only its own ids: a row may
    feed a prompt's new ids within the step (`Sampler`) without widening the others, and read a prefix
    the rows share from one copy (`SharedPrefix`)."""
    return attention.fused_over(cache.keys[0], cache.values[0], dtype)


def decode_tokens(
    ids: torch.Tensor,
    pos: torch.Tensor,
    counts: List[int],
    span: int,
    uniform: Optional[int],
    width: int,
    embed: torch.Tensor,
    rope_cos: torch.Tensor,
    rope_sin: torch.Tensor,
    layers: List[Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]],
    norms: List[torch.Tensor],
    eps: float,
    output: torch.Tensor,
    dtype: torch.dtype,
    vector: bool,
    keys: List[torch.Tensor],
    values: List[torch.Tensor],
    heads: int,
    ends: Optional[List[int]],
    select: Optional[torch.Tensor] = None,
    shared: Optional[Tuple[List[torch.Tensor], List[torch.Tensor], List[int]]] = None,
) -> torch.Tensor:
    """The step of `Transformer.decode` (see there) from the new ids [B, T] of rows whose first new
    position is `pos` [B], row b feeding its first `counts[b]` ids, to logits [sum(counts), V] of those
    positions, row after row: rotation, cache writes (slices at `uniform` when every row is at one
    position, else scattered), attention over the first `width` positions of the cache (those past a
    row's own masked; every row feeds all T ids there) or, with `ends` (each row's positions after this
    step), row by row over exactly each row's own (`torch.ops.coa.attend_rows`: the fused kernel, or
    torch ops), and every matmul's inputs cast to `dtype` as autocast casts them. With `select`, only
    those of the N flat positions get logits (a prompt fed within the step needs its last one's). With
    `shared` (per layer the keys and values of a prefix rows hold alike, and each row's positions read
    from them: `SharedPrefix`) and `ends`, the kernel reads those positions there.

    Written for TorchScript (`decode_step`): one call replaces the ~200 Python-dispatched ops of a
    `tiny` step in eager mode, with the same kernels in the same order, so the same bits. Positions
    are flat ([N, ...], N = sum(counts)) so that rows may feed drafts of different lengths without
    padding: in an evaluation 21% of the positions fed had been padding (docs/engine.md)."""
    b, t = ids.shape[0], ids.shape[1]
    at = pos[:, None] + torch.arange(t, device=ids.device)  # [B, T]: each new token's position
    rows = torch.arange(b, device=ids.device)[:, None].expand(b, t)
    if min(counts) < t:  # each row's own ids only: [N] flat, row after row
        keep = torch.arange(t, device=ids.device)[None] < torch.tensor(counts, device=ids.device)[:, None]
        flat_ids, rows, at = ids[keep], rows[keep], at[keep]
    else:  # reshapes only: no mask, which would wait for a GPU
        flat_ids, rows, at = ids.reshape(b * t), rows.reshape(b * t), at.reshape(b * t)
    n = flat_ids.shape[0]
    cos, sin = rope_cos[at][:, None, None], rope_sin[at][:, None, None]  # [N, 1, 1, D/2]
    if ends is not None or (uniform is not None and width == span and t == 1):
        bias = torch.zeros((), dtype=dtype, device=ids.device)  # every row sees its whole prefix
    else:
        future = torch.arange(width, device=ids.device)[None, None, :] > at.view(b, t)[:, :, None]
        bias = torch.zeros(b, t, width, dtype=dtype, device=ids.device).masked_fill(future, float("-inf"))
        # Each row's mask for its every head; not `repeat_interleave`, which copies its count to the GPU
        # (a host copy, which a CUDA graph's capture refuses).
        bias = bias[:, None].expand(b, heads, t, width).reshape(b * heads, t, width)
    x = F.embedding(flat_ids, embed)
    hd = x.shape[-1] // heads
    scale = 1.0 / math.sqrt(hd)
    for i in range(len(layers)):
        lw = layers[i]
        # [N, 3, H, D]: queries, keys and values of every new token
        qkv = project(rms_norm(x, norms[2 * i], eps), lw[0], dtype, vector).view(n, 3, heads, hd)
        qk = rotate(qkv[:, :2], cos, sin)  # queries and keys in one rotation
        q, k, v = qk[:, 0], qk[:, 1], qkv[:, 2]  # [N, H, D]
        cached_keys, cached_values = keys[i], values[i]
        if uniform is not None:
            cached_keys[:, :, uniform : uniform + t] = k.view(b, t, heads, hd).transpose(1, 2)
            cached_values[:, :, uniform : uniform + t] = v.view(b, t, heads, hd).transpose(1, 2)
        else:
            cached_keys[rows, :, at] = k.to(cached_keys.dtype)
            cached_values[rows, :, at] = v.to(cached_values.dtype)
        # In the scores' dtype: torch's bf16 softmax computes in fp32 and rounds once, the bits of an
        # fp32 softmax cast back, without the two casts (as `Attention._attend` does). `dot_products`
        # (fp32 on a CPU without the fused kernel) only for one new id per row: with a draft's several
        # ids (a speculative step) each query makes its own products, and the batched matmul wins
        # (docs/engine.md).
        if ends is not None and shared is not None:
            y = torch.ops.coa.attend_rows(
                q.to(dtype), cached_keys, cached_values, ends, counts, scale, shared[0][i], shared[1][i], shared[2]
            )
        elif ends is not None:
            y = torch.ops.coa.attend_rows(q.to(dtype), cached_keys, cached_values, ends, counts, scale)
        else:
            k = cached_keys[:, :, :width].to(dtype).reshape(b * heads, width, hd)
            v = cached_values[:, :, :width].to(dtype).reshape(b * heads, width, hd)
            qh = q.view(b, t, heads, hd).transpose(1, 2).reshape(b * heads, t, hd).to(dtype)
            if dtype == torch.float32 and ids.device.type == "cpu" and t == 1:
                scores = dot_products(qh, k) * scale + bias
                y = dot_products(torch.softmax(scores, dim=-1), v.transpose(1, 2))  # [B * H, T, D]
            else:
                scores = torch.baddbmm(bias, qh, k.transpose(1, 2), alpha=scale)
                y = torch.softmax(scores, dim=-1) @ v  # [B * H, T, D]
            y = y.view(b, heads, t, hd).transpose(1, 2)
        x = x + project(y.reshape(n, heads * hd), lw[1], dtype, vector)
        gate, up = project(rms_norm(x, norms[2 * i + 1], eps), lw[2], dtype, vector).chunk(2, dim=-1)
        x = x + project(F.silu(gate) * up, lw[3], dtype, vector)
    if select is not None:
        x = x.index_select(0, select)
    return project(rms_norm(x, norms[-1], eps), output, dtype, vector)


def dot_products(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """[N, T, K] and [N, M, K] -> [N, T, M]: each x row's dot product with each y row, per batch entry,
    as products and a sum over contiguous memory, a chunk of batch entries at a time.

    A decode step's attention on a CPU in fp32, one query per row and head: torch 1.13 runs a batched
    matmul of one query per row and head as one small GEMM per row and head (OpenBLAS), which on an
    AVX2 AMD EPYC moved keys and values at ~3.5 GB/s, 80% of a 32-row `tiny` step. Here, 128 rows x
    heads at 150 positions, one thread: 0.57 / 0.53 ms for the scores / values against 0.97 / 2.08.
    With several queries per row (a speculative step's drafts) the products multiply by the queries
    and the GEMMs win: at 1,000 positions, 5 queries, 1.9x slower than `bmm` (docs/engine.md).
    """
    n, t, m, k = x.shape[0], x.shape[1], y.shape[1], x.shape[2]
    chunk = max(1, (1 << 18) // (t * m * k))  # products a chunk holds: 1 MiB of fp32, about a core's L2
    parts: List[torch.Tensor] = []
    for i in range(0, n, chunk):
        parts.append((x[i : i + chunk, :, None] * y[i : i + chunk, None]).sum(-1))
    return parts[0] if len(parts) == 1 else torch.cat(parts)


@functools.lru_cache(maxsize=None)
def decode_step():
    """`decode_tokens` compiled by TorchScript, at the first decode step (about 0.1 s): a `tiny` step
    of one row took 0.84 ms against 0.99-1.20 ms in eager mode (fp32, one thread), with identical
    logits (docs/engine.md). Where TorchScript is missing or refuses the function, eager mode: the same
    arithmetic, slower."""
    try:
        return torch.jit.script(decode_tokens)
    except Exception as error:  # noqa: BLE001 - any compiler failure leaves the eager function
        print(f"coa-engine: decoding without TorchScript ({error.__class__.__name__}: {error})", file=sys.stderr)
        return decode_tokens


class DecodeWeights:
    """Each projection as a contiguous [in, out] matrix in the matmul dtype. On this project's CPUs
    (torch 1.13 with OpenBLAS) `F.linear` on one row is up to 100x slower for some shapes (tiny's
    256 -> 1536 gate_up: ~300 us against ~15 us for the same product with the transposed copy), and
    under bf16 autocast every `F.linear` call re-casts its whole fp32 weight. A copy of the weights
    (fp32: 4 bytes per parameter; bf16: 2) buys both back for decoding. Training and prefill keep
    `F.linear` on the parameters themselves.
    """

    def __init__(self, model: Transformer, dtype: torch.dtype, key):
        self.key, self.dtype = key, dtype
        # The [out, in] parameters, each block's in decode's order, then the output projection.
        params = [(b.attn.qkv.weight, b.attn.out.weight, b.ffn.gate_up.weight, b.ffn.down.weight) for b in model.blocks]
        # The norms' weights as they are (parameters, not copies), each block's two then the last: in
        # both layouts, gathered once per change of the weights rather than at every step.
        self.norms = [n.weight for b in model.blocks for n in (b.attn_norm, b.ffn_norm)] + [model.norm.weight]
        self._rows = None
        self._row_step: RowStep | bool | None = None
        self._graph_steps: GraphSteps | bool | None = None
        # What the native step reads besides the matrices (`row_step`).
        self._model_parts = (model.embed.weight, (model.rope_cos, model.rope_sin), model.config)
        with torch.no_grad():

            def t(weight: torch.Tensor) -> torch.Tensor:
                return weight.detach().t().to(dtype).contiguous()

            self.layers = [tuple(t(w) for w in ws) for ws in params]
            self.output = t(model.embed.weight)

    vector = False  # `project`'s matmul

    def for_rows(self, rows: int) -> DecodeWeights | RowWeights:
        """The weights a decode step of `rows` rows projects with: `RowWeights` for one row on a CPU."""
        if rows != 1 or self.output.device.type != "cpu":
            return self
        if self._rows is None:  # built at the first single-row step: its memory only where it is used
            self._rows = RowWeights(self.layers, self.output, self.dtype, self.norms)
        return self._rows

    def row_step(self) -> RowStep | None:
        """The native decode step of a few rows over these weights (row_step.py), built at its first use:
        fp32 or bf16 on a CPU where the engine's kernels build; else None."""
        if self._row_step is None:
            embed, rope, config = self._model_parts
            kernels = attention.attention_kernel() is not None
            native = self.dtype in (torch.float32, torch.bfloat16) and embed.device.type == "cpu" and kernels
            heads, eps = config.n_heads, config.norm_eps
            self._row_step = RowStep(self.layers, self.output, self.norms, embed, rope, heads, eps) if native else False
        return self._row_step or None

    def graph_steps(self) -> GraphSteps | None:
        """The CUDA graphs of decode steps over these weights (graph_step.py), on a GPU unless
        `COA_CUDA_GRAPHS=0`; else None."""
        if self._graph_steps is None:
            self._graph_steps = GraphSteps() if self.output.is_cuda and graphs_enabled() else False
        return self._graph_steps or None


class RowWeights:
    """A single row's projections as matrix-vector products (`torch.mv`) on [in, out] fp32 matrices.

    For one row, OpenBLAS's matrix-vector kernel is 3-5x faster than its matrix product (fp32, one
    thread: tiny's 256 -> 1536 in 16 us against 76 us) and than oneDNN's bf16 product (36 us), and
    torch has no fast bf16 matrix-vector product on a CPU. The matrices are `DecodeWeights`' own
    [in, out] ones: in fp32 the same tensors (no copy); under bf16 fp32 copies of those bf16 values (4
    bytes per parameter), and each product rounds its input to bf16 and its output back to bf16: the
    arithmetic of a bf16 matmul (exact products, fp32 sums, bf16 result), up to the order of the sums
    (measured: 8 of 97,280 outputs one bf16 step apart). A `tiny` decode step at batch 1, one thread,
    in one process: fp32 2.1 -> 1.1 ms, bf16 1.9 -> 1.6 ms (docs/engine.md). `project` multiplies by
    their transposed view, OpenBLAS's non-transposed kernel: on a 2-core AVX2 EPYC a `tiny` step 5.3
    -> 4.4 ms and `small` 16.2 -> 13.1 ms against [out, in] matrices (docs/engine.md).
    """

    vector = True  # `project`'s matrix-vector product

    def __init__(
        self, layers: list[tuple[torch.Tensor, ...]], output: torch.Tensor, dtype: torch.dtype, norms: list[torch.Tensor]
    ):
        """`layers` and `output`: `DecodeWeights`' [in, out] matrices in `dtype`."""
        self.dtype, self.norms = dtype, norms
        self.layers = [tuple(w.float() for w in ws) for ws in layers]  # the same tensors when in fp32
        self.output = output.float()
