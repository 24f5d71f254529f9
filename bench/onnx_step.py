"""Issue 18's alternative runtime, measured: one decode step of a fresh engine preset exported to ONNX
(fp32, the keys and values of the past positions in and out), with the engine's own batch-1 greedy
decode of the same model as the reference (ids, logprobs, tokens per second in process, one thread).

python bench/onnx_step.py PRESET OUT.onnx  (PYTHONPATH=engine) prints one JSON line.
"""

import json
import math
import sys
import time

import torch
from torch import nn

from coa_engine.model import Transformer, preset_config, rotate
from coa_engine.sampling import CachedDecoder

PROMPT = list(range(10, 42))
NEW_TOKENS = 64


class DecodeStep(nn.Module):
    """The model's arithmetic for one new token per row at position T = the past's length, as plain
    tensor ops an exporter can trace (the engine's own decode writes a preallocated cache in place)."""

    def __init__(self, model: Transformer):
        super().__init__()
        self.model = model

    def forward(self, ids, past_k, past_v):
        m, c = self.model, self.model.config
        b, t = ids.shape[0], past_k.shape[3]
        cos, sin = m.rope_cos[t : t + 1][None, None], m.rope_sin[t : t + 1][None, None]
        x = m.embed(ids)
        keys, values = [], []
        for i, block in enumerate(m.blocks):
            q, k, v = block.attn.qkv(block.attn_norm(x)).view(b, 1, 3, c.n_heads, c.head_dim).permute(2, 0, 3, 1, 4)
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            k, v = torch.cat([past_k[i], k], 2), torch.cat([past_v[i], v], 2)
            a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(c.head_dim), -1) @ v
            x = x + block.attn.out(a.transpose(1, 2).reshape(b, 1, -1))
            x = x + block.ffn(block.ffn_norm(x))
            keys.append(k)
            values.append(v)
        return torch.log_softmax(m.logits(x)[:, 0], -1), torch.stack(keys), torch.stack(values)


def engine_decode(model: Transformer, dtype: str) -> tuple[list[int], list[float], float]:
    """Greedy ids and logprobs from the engine's decoder, and its best tokens/s of three runs."""
    decoder = CachedDecoder(model, dtype)
    best, ids, logprobs = math.inf, [], []
    with torch.inference_mode():
        for _ in range(3):
            cache, logits = decoder.prefill([PROMPT], len(PROMPT) + NEW_TOKENS)
            ids, logprobs = [], []
            started = time.perf_counter()
            for _ in range(NEW_TOKENS):
                lp = torch.log_softmax(logits, -1)
                token = int(lp.argmax(-1))
                ids.append(token)
                logprobs.append(float(lp[0, token]))
                logits = decoder.decode(cache, torch.tensor([token]))
            best = min(best, time.perf_counter() - started)
    return ids, logprobs, NEW_TOKENS / best


def main() -> None:
    preset, out = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = Transformer(preset_config(preset, 2048, 1024)).eval()
    c = model.config
    past = torch.zeros(c.n_layers, 1, c.n_heads, 3, c.head_dim)
    torch.onnx.export(
        DecodeStep(model),
        (torch.tensor([[5]]), past, past.clone()),
        out,
        input_names=["ids", "past_k", "past_v"],
        output_names=["logp", "present_k", "present_v"],
        dynamic_axes={
            "ids": {0: "rows"},
            "past_k": {1: "rows", 3: "past"},
            "past_v": {1: "rows", 3: "past"},
            "logp": {0: "rows"},
            "present_k": {1: "rows", 3: "length"},
            "present_v": {1: "rows", 3: "length"},
        },
        opset_version=14,
    )
    ids, logprobs, fp32 = engine_decode(model, "fp32")
    _, _, bf16 = engine_decode(model, "bf16")
    print(
        json.dumps(
            {
                "params": model.num_params(),
                "layers": c.n_layers,
                "heads": c.n_heads,
                "head_dim": c.head_dim,
                "prompt": PROMPT,
                "ids": ids,
                "logprobs": logprobs,
                "torch_tokens_per_s": {"fp32": fp32, "bf16": bf16},
            }
        )
    )


if __name__ == "__main__":
    main()
