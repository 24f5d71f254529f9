"""A small Llama-style decoder: RMSNorm, rotary positions, SwiGLU, tied input/output embeddings.

One forward serves training (full causal attention), prefill (the same, writing a KV cache) and
decoding (one new token per row, each row at its own length in the cache).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint


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


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding on the two halves of each head (x: [B, H, T, D]; cos, sin: [B or 1, 1, T, D/2])."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


class KVCache:
    """Keys and values per layer, [rows, heads, capacity, head_dim]; row b holds `lens[b]` positions."""

    def __init__(self, keys: list[torch.Tensor], values: list[torch.Tensor], lens: torch.Tensor):
        self.keys, self.values, self.lens = keys, values, lens

    @classmethod
    def empty(
        cls, config: ModelConfig, rows: int, capacity: int, dtype: torch.dtype, device: torch.device | str = "cpu"
    ) -> KVCache:
        shape = (rows, config.n_heads, capacity, config.head_dim)
        layers = range(config.n_layers)
        return cls(
            [torch.zeros(shape, dtype=dtype, device=device) for _ in layers],
            [torch.zeros(shape, dtype=dtype, device=device) for _ in layers],
            torch.zeros(rows, dtype=torch.long, device=device),
        )

    @property
    def rows(self) -> int:
        return int(self.lens.shape[0])

    @property
    def capacity(self) -> int:
        return int(self.keys[0].shape[2])

    def select(self, index: torch.Tensor) -> KVCache:
        return KVCache(
            [k.index_select(0, index) for k in self.keys],
            [v.index_select(0, index) for v in self.values],
            self.lens.index_select(0, index),
        )

    def merge(self, other: KVCache) -> KVCache:
        """Rows of both caches, padded to the larger capacity."""
        cap = max(self.capacity, other.capacity)

        def grow(t: torch.Tensor) -> torch.Tensor:
            return F.pad(t, (0, 0, 0, cap - t.shape[2])) if t.shape[2] < cap else t

        return KVCache(
            [torch.cat((grow(a), grow(b))) for a, b in zip(self.keys, other.keys)],
            [torch.cat((grow(a), grow(b))) for a, b in zip(self.values, other.values)],
            torch.cat((self.lens, other.lens)),
        )


class Attention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.n_heads, self.head_dim = config.n_heads, config.head_dim
        self.qkv = nn.Linear(config.dim, 3 * config.dim, bias=False)
        self.out = nn.Linear(config.dim, config.dim, bias=False)

    def forward(self, x, cos, sin, bias, layer: int, cache: KVCache | None, decoding: bool):
        """`bias` is added to the attention scores: 0 where a query may look, -inf where not; its
        shape broadcasts to [rows * heads, queries, keys]."""
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        if cache is not None and decoding:
            # Each row writes its one new position at its own length, then reads its whole prefix.
            rows = torch.arange(b, device=x.device)
            cache.keys[layer][rows, :, cache.lens] = k[:, :, 0].to(cache.keys[layer].dtype)
            cache.values[layer][rows, :, cache.lens] = v[:, :, 0].to(cache.values[layer].dtype)
            span = int(cache.lens.max()) + 1
            k = cache.keys[layer][:, :, :span].to(q.dtype)
            v = cache.values[layer][:, :, :span].to(q.dtype)
        elif cache is not None:
            cache.keys[layer][:, :, :t] = k
            cache.values[layer][:, :, :t] = v
        h, span = self.n_heads, k.shape[2]
        if x.is_cuda and span == t and hasattr(F, "scaled_dot_product_attention"):
            # Full causal attention over the whole sequence (training, prefill): the fused kernel,
            # which never stores the T x T scores. `bias` is then exactly the causal mask.
            y = F.scaled_dot_product_attention(q, k.to(q.dtype), v.to(q.dtype), is_causal=True)
            return self.out(y.transpose(1, 2).reshape(b, t, -1))
        # Scale, mask and QK^T in one GEMM call.
        scores = torch.baddbmm(
            bias,
            q.reshape(b * h, t, self.head_dim),
            k.reshape(b * h, span, self.head_dim).transpose(1, 2),
            alpha=1.0 / math.sqrt(self.head_dim),
        )
        y = torch.softmax(scores.float(), dim=-1).type_as(q).view(b, h, t, span) @ v
        return self.out(y.transpose(1, 2).reshape(b, t, -1))


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

    def forward(self, x, cos, sin, bias, layer=0, cache=None, decoding=False):
        x = x + self.attn(self.attn_norm(x), cos, sin, bias, layer, cache, decoding)
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
        self, ids: torch.Tensor, cache: KVCache | None = None, lengths: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Logits for every position of `ids` [B, T], positions 0..T-1.

        With `cache`, also stores keys and values; rows right-padded to T keep `lengths[b]` positions
        (the padding's entries are overwritten by the tokens decoded next, and never attended to).
        """
        t = ids.shape[1]
        if t > self.config.max_seq_len:
            raise ValueError(f"sequence of {t} tokens exceeds the context of {self.config.max_seq_len}")
        cos, sin = self.rope_cos[:t][None, None], self.rope_sin[:t][None, None]
        bias = torch.full((t, t), float("-inf"), device=ids.device).triu(1)
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
        return self.logits(x)

    def decode(self, ids: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """Logits [B, V] for one new token per row (ids: [B]), each at position `cache.lens[b]`."""
        pos = cache.lens
        if int(pos.max()) >= cache.capacity:
            raise ValueError("KV cache is full")
        cos, sin = self.rope_cos[pos][:, None, None], self.rope_sin[pos][:, None, None]
        b, h, span = ids.shape[0], self.config.n_heads, int(pos.max()) + 1
        future = torch.arange(span, device=ids.device)[None, None, :] > pos[:, None, None]
        bias = torch.zeros(b, 1, span, device=ids.device).masked_fill(future, float("-inf")).repeat_interleave(h, dim=0)
        x = self.embed(ids[:, None])
        for i, block in enumerate(self.blocks):
            x = block(x, cos, sin, bias, i, cache, decoding=True)
        cache.lens = pos + 1
        return self.logits(x)[:, 0]

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(self.norm(x), self.embed.weight)
