"""Issue 18's alternative runtime, measured: a fresh engine preset written as a GGUF file (llama.cpp's
format, architecture "llama", fp32 tensors) for node-llama-cpp, with the engine's own batch-1 greedy
decode of the same model as the reference (ids, logprobs, tokens per second in process, one thread).

python bench/gguf_export.py PRESET OUT.gguf  (PYTHONPATH=engine) prints one JSON line.

The mapping: the fused qkv and gate_up projections split into llama's q, k, v and gate, up; the output
projection left out (llama.cpp then reads the tied embedding, as this model does); the rows of q and k
permuted within each head, because llama.cpp rotates adjacent pairs of a head's dimensions where this
model rotates its two halves (the same rotation once the dimensions are reordered: dot products of
queries and keys permuted alike are unchanged). The vocabulary is placeholder pieces: the bench feeds
and reads token ids only.
"""

import json
import struct
import sys
import time

import torch

from coa_engine.model import Transformer, preset_config
from coa_engine.sampling import CachedDecoder
from onnx_step import PROMPT, engine_decode

# The concurrent round of `npm run bench -- engine`: 32 prompts of 24 + i ids, 128 new tokens each
# (handed to bench/llama-cpp.ts in the reference, so both runtimes decode the same batch).
BATCH_PROMPTS = [[3 + (j * 7 + i) % 250 for j in range(24 + i)] for i in range(32)]
BATCH_TOKENS = 128

GGUF_MAGIC, GGUF_VERSION, ALIGNMENT = b"GGUF", 3, 32
# GGUF value types used here, and its tensor types F32 and BF16.
UINT32, INT32, FLOAT32, STRING, ARRAY = 4, 5, 6, 8, 9
TENSOR_F32, TENSOR_BF16 = 0, 30


def string(s: str) -> bytes:
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def value(kind: int, v) -> bytes:
    if kind == STRING:
        return string(v)
    if kind == ARRAY:
        inner, items = v
        body = b"".join(value(inner, x) for x in items)
        return struct.pack("<IQ", inner, len(items)) + body
    return struct.pack({UINT32: "<I", INT32: "<i", FLOAT32: "<f"}[kind], v)


def halves_to_pairs(w: torch.Tensor, heads: int) -> torch.Tensor:
    """Rows [heads * head_dim, in] reordered within each head: 0, h, 1, h+1, ... (h = head_dim / 2)."""
    out, inner = w.shape
    hd = out // heads
    return w.view(heads, 2, hd // 2, inner).transpose(1, 2).reshape(out, inner)


def tensors(model: Transformer) -> list[tuple[str, torch.Tensor]]:
    c, d = model.config, model.config.dim
    out = [("token_embd.weight", model.embed.weight), ("output_norm.weight", model.norm.weight)]
    for i, b in enumerate(model.blocks):
        q, k, v = b.attn.qkv.weight.split(d)
        gate, up = b.ffn.gate_up.weight.chunk(2)
        out += [
            (f"blk.{i}.attn_norm.weight", b.attn_norm.weight),
            (f"blk.{i}.attn_q.weight", halves_to_pairs(q, c.n_heads)),
            (f"blk.{i}.attn_k.weight", halves_to_pairs(k, c.n_heads)),
            (f"blk.{i}.attn_v.weight", v),
            (f"blk.{i}.attn_output.weight", b.attn.out.weight),
            (f"blk.{i}.ffn_norm.weight", b.ffn_norm.weight),
            (f"blk.{i}.ffn_gate.weight", gate),
            (f"blk.{i}.ffn_up.weight", up),
            (f"blk.{i}.ffn_down.weight", b.ffn.down.weight),
        ]
    return [(name, t.detach().float().contiguous()) for name, t in out]


def write_gguf(model: Transformer, path: str, bf16: bool = False) -> None:
    """With `bf16`, the matrices in bf16 (the engine's bf16 arithmetic rounds them so too); norms fp32."""
    c = model.config
    # llama.cpp's SentencePiece vocabulary needs its 256 byte pieces; ids 0-2 are control (pad, bos,
    # eos), 3-258 the bytes (type 6), the rest normal (type 1) pieces nobody reads.
    pieces = ["<pad>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    pieces += [f"<t{i}>" for i in range(len(pieces), c.vocab_size)]
    kinds = [3, 3, 3] + [6] * 256 + [1] * (c.vocab_size - 259)
    meta = [
        ("general.architecture", STRING, "llama"),
        ("general.alignment", UINT32, ALIGNMENT),
        ("llama.context_length", UINT32, c.max_seq_len),
        ("llama.embedding_length", UINT32, c.dim),
        ("llama.block_count", UINT32, c.n_layers),
        ("llama.feed_forward_length", UINT32, c.hidden_dim),
        ("llama.rope.dimension_count", UINT32, c.head_dim),
        ("llama.rope.freq_base", FLOAT32, c.rope_theta),
        ("llama.attention.head_count", UINT32, c.n_heads),
        ("llama.attention.head_count_kv", UINT32, c.n_heads),
        ("llama.attention.layer_norm_rms_epsilon", FLOAT32, c.norm_eps),
        ("llama.vocab_size", UINT32, c.vocab_size),
        ("tokenizer.ggml.model", STRING, "llama"),
        ("tokenizer.ggml.tokens", ARRAY, (STRING, pieces)),
        ("tokenizer.ggml.scores", ARRAY, (FLOAT32, [0.0] * c.vocab_size)),
        ("tokenizer.ggml.token_type", ARRAY, (INT32, kinds)),
        ("tokenizer.ggml.bos_token_id", UINT32, 1),
        ("tokenizer.ggml.eos_token_id", UINT32, 2),
        ("tokenizer.ggml.padding_token_id", UINT32, 0),
        ("general.name", STRING, "coa"),
    ]
    parts = tensors(model)
    header = GGUF_MAGIC + struct.pack("<IQQ", GGUF_VERSION, len(parts), len(meta))
    header += b"".join(string(k) + struct.pack("<I", kind) + value(kind, v) for k, kind, v in meta)
    offset, infos = 0, []
    parts = [(name, t.bfloat16() if bf16 and t.dim() == 2 else t) for name, t in parts]
    for name, t in parts:
        dims = list(reversed(t.shape))  # GGUF lists the fastest-varying dimension first
        kind = TENSOR_BF16 if t.dtype == torch.bfloat16 else TENSOR_F32
        infos.append(string(name) + struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, kind, offset))
        offset += -(-t.numel() * t.element_size() // ALIGNMENT) * ALIGNMENT
    with open(path, "wb") as f:
        f.write(header + b"".join(infos))
        f.write(b"\0" * (-f.tell() % ALIGNMENT))
        for _, t in parts:
            data = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()
            f.write(data + b"\0" * (-len(data) % ALIGNMENT))


def engine_batch_rate(model: Transformer, dtype: str) -> float:
    """Tokens per second of the engine's decoder on BATCH_PROMPTS at once (in process, one thread),
    best of three: what an engine batch of that many concurrent requests computes, without HTTP."""
    decoder, best = CachedDecoder(model, dtype), 0.0
    capacity = max(map(len, BATCH_PROMPTS)) + BATCH_TOKENS
    with torch.inference_mode():
        for _ in range(3):
            started = time.perf_counter()
            cache, logits = decoder.prefill(BATCH_PROMPTS, capacity)
            for _ in range(BATCH_TOKENS):
                logits = decoder.decode(cache, logits.argmax(-1))
            best = max(best, len(BATCH_PROMPTS) * BATCH_TOKENS / (time.perf_counter() - started))
    return best


def main() -> None:
    preset, out = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = Transformer(preset_config(preset, 2048, 1024)).eval()
    write_gguf(model, out)
    write_gguf(model, out.replace(".gguf", "-bf16.gguf"), bf16=True)
    ids, logprobs, fp32 = engine_decode(model, "fp32")
    bf16_ids, bf16_logprobs, bf16 = engine_decode(model, "bf16")
    print(
        json.dumps(
            {
                "params": model.num_params(),
                "prompt": PROMPT,
                "ids": {"fp32": ids, "bf16": bf16_ids},
                "logprobs": {"fp32": logprobs, "bf16": bf16_logprobs},
                "torch_tokens_per_s": {"fp32": fp32, "bf16": bf16},
                "torch_batch_tokens_per_s": {d: engine_batch_rate(model, d) for d in ("fp32", "bf16")},
                "batch_prompts": BATCH_PROMPTS,
                "batch_tokens": BATCH_TOKENS,
            }
        )
    )


if __name__ == "__main__":
    main()
