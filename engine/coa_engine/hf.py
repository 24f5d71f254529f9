"""Serve and train a Hugging Face causal LM through the same API (`--hf-model PATH`).

Optional: needs `transformers`, and is meant for a GPU. engine/tests/test_hf.py runs it on a random
Llama where transformers is installed (it first ran on an H100 with transformers 5.17; Debian has no
transformers, so CI skips it). The sampler, trainer and HTTP layer are the same code the built-in model
uses; this file only adapts the model, its KV cache (left-padded rows, merged by padding on the left)
and its tokenizer.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone
from pathlib import Path

import torch
from torch import nn

from . import allocator, checkpoint
from .cpus import process_quota
from .sampling import ModelGate, Sampler
from .train import Trainer
from .worker import counters


def _byte_decoder() -> dict[str, int]:
    """Byte-level BPE (GPT-2, Llama 3, Qwen) writes byte b as one printable character."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    chars, n = {}, 0
    for b in range(256):
        if b in keep:
            chars[chr(b)] = b
        else:
            chars[chr(256 + n)] = b
            n += 1
    return chars


class HFTokenizer:
    def __init__(self, tok):
        self.tok = tok
        self.name = tok.name_or_path
        self.vocab_size = len(tok)
        self.eos_id = tok.eos_token_id
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        self._special = set(tok.all_special_ids)
        self._byte_level = "Ġ" in "".join(list(tok.get_vocab())[:5000])
        self._decoder = _byte_decoder()
        self._cache: dict[int, bytes] = {}

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False)

    def decode(self, ids: list[int]) -> str:
        return self.tok.decode(ids)

    def token_bytes(self, t: int) -> bytes:
        if t not in self._cache:
            piece = self.tok.convert_ids_to_tokens(t)
            if t in self._special:
                out = b""
            elif self._byte_level and all(c in self._decoder for c in piece):
                out = bytes(self._decoder[c] for c in piece)
            elif m := re.fullmatch(r"<0x([0-9A-Fa-f]{2})>", piece):  # SentencePiece byte fallback
                out = bytes([int(m.group(1), 16)])
            else:
                out = piece.replace("\u2581", " ").encode()
            self._cache[t] = out
        return self._cache[t]


class HFCausalLM(nn.Module):
    """The trainer's view: ids -> logits."""

    def __init__(self, hf):
        super().__init__()
        self.hf = hf
        self.recompute_blocks = False

    def forward(self, ids: torch.Tensor, at: torch.Tensor | None = None) -> torch.Tensor:
        """Logits [B, T, V], or [N, V] at the positions `at` marks (`Transformer.forward`'s contract)."""
        logits = self.hf(input_ids=ids).logits
        return logits if at is None else logits[at]

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


def _legacy(past):
    """Per layer (keys, values), whichever cache the model returned: tuples (older transformers), a cache
    with `to_legacy_cache` (4.36 to 4.x), or one of `layers` alone (5.x dropped the conversions)."""
    if hasattr(past, "to_legacy_cache"):
        return past.to_legacy_cache()
    if hasattr(past, "layers"):
        return tuple((layer.keys, layer.values) for layer in past.layers)
    return past


def _as_cache(past):
    """The model's cache object for per-layer (keys, values) (5.x accepts no tuples)."""
    try:
        from transformers import DynamicCache
    except ImportError:
        return past
    if hasattr(DynamicCache, "from_legacy_cache"):
        return DynamicCache.from_legacy_cache(past)
    cache = DynamicCache()
    for layer, (keys, values) in enumerate(past):
        cache.update(keys, values, layer)
    return cache


def _dtype_keyword() -> str:
    """`from_pretrained`'s name for the weights' dtype: `dtype` since 4.56, `torch_dtype` before (an
    unknown keyword there would be set on the config and ignored)."""
    import transformers

    major, minor = (int(x) for x in re.findall(r"\d+", transformers.__version__)[:2])
    return "dtype" if (major, minor) >= (4, 56) else "torch_dtype"


class HFState:
    """Left-padded KV cache rows with their attention mask and next positions."""

    def __init__(self, past, mask: torch.Tensor, next_pos: torch.Tensor):
        self.past, self.mask, self.next_pos = past, mask, next_pos

    def select(self, index: torch.Tensor) -> HFState:
        past = tuple((k.index_select(0, index), v.index_select(0, index)) for k, v in self.past)
        return HFState(past, self.mask.index_select(0, index), self.next_pos.index_select(0, index))

    def compact(self, index: torch.Tensor) -> HFState:
        """The rows `index`, in that order (the sampler's compaction; a left-padded cache is rebuilt)."""
        return self.select(index)

    def merge(self, *others: HFState) -> HFState:
        states = (self, *others)
        width = max(s.mask.shape[1] for s in states)

        def left(t: torch.Tensor, dim: int) -> torch.Tensor:
            missing = width - t.shape[dim]
            if not missing:
                return t
            shape = list(t.shape)
            shape[dim] = missing
            return torch.cat((t.new_zeros(shape), t), dim=dim)

        past = tuple(
            (torch.cat([left(k, 2) for k, _ in layer]), torch.cat([left(v, 2) for _, v in layer]))
            for layer in zip(*(s.past for s in states))
        )
        mask = torch.cat([left(s.mask, 1) for s in states])
        return HFState(past, mask, torch.cat([s.next_pos for s in states]))


class HFDecoder:
    def __init__(self, model: HFCausalLM, pad_id: int, max_seq_len: int):
        self.model, self.pad_id, self.max_seq_len = model, pad_id, max_seq_len
        self.device = next(model.parameters()).device

    def prefill(self, prompts: list[list[int]], capacity: int):
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p) :] = torch.tensor(p)
            mask[i, width - len(p) :] = 1
        ids, mask = ids.to(self.device), mask.to(self.device)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        out = self.model.hf(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True)
        return HFState(_legacy(out.past_key_values), mask, mask.sum(-1)), out.logits[:, -1].float()

    def decode(self, state: HFState, ids: torch.Tensor) -> torch.Tensor:
        state.mask = torch.cat((state.mask, state.mask.new_ones((state.mask.shape[0], 1))), dim=1)
        out = self.model.hf(
            input_ids=ids[:, None].to(self.device),
            attention_mask=state.mask,
            position_ids=state.next_pos[:, None],
            past_key_values=_as_cache(state.past),
            use_cache=True,
        )
        state.past, state.next_pos = _legacy(out.past_key_values), state.next_pos + 1
        return out.logits[:, -1].float()


class HFWorker:
    backend = "hf"

    def __init__(self, path: str, dtype: str = "auto", max_rows: int = 64, max_queued_rows: int | None = None):
        try:
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as err:
            raise SystemExit("--hf-model needs the transformers package (pip install transformers)") from err
        self.path = path
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        bf16 = dtype == "bf16" or (dtype == "auto" and self.device == "cuda" and torch.cuda.is_bf16_supported())
        self.weights_dtype = "bf16" if bf16 else "fp32"
        self.gate = ModelGate()
        # On the gate's model thread, as all of the model's work is (ModelGate says why).
        dtype_arg = {_dtype_keyword(): torch.bfloat16 if bf16 else torch.float32}
        hf = self.gate.run(lambda: AutoModelForCausalLM.from_pretrained(path, **dtype_arg).to(self.device))
        self.model = HFCausalLM(hf).eval()
        self.tokenizer = HFTokenizer(AutoTokenizer.from_pretrained(path))
        self.max_seq_len = int(getattr(hf.config, "max_position_embeddings", 4096))
        # Weights already carry their dtype; no autocast on top.
        self.dtype, self.preset, self.checkpoint_dir = "fp32", None, None
        self.trainer = Trainer(self.model, "fp32")
        decoder = HFDecoder(self.model, self.tokenizer.pad_id, self.max_seq_len)
        # Rows and the queue are bounded; bytes are not (the decoder does not say what a position costs).
        self.sampler = Sampler(decoder, self.tokenizer, self.gate, max_rows=max_rows, max_queued_rows=max_queued_rows)
        self.started = time.time()

    @property
    def model_name(self) -> str:
        return Path(self.path).name or self.path

    def info(self) -> dict:
        return {
            "backend": self.backend,
            "model": self.model_name,
            "preset": None,
            "params": self.model.num_params(),
            "max_model_len": self.max_seq_len,
            "tokenizer": {"name": self.tokenizer.name, "vocab_size": self.tokenizer.vocab_size},
            "device": self.device,
            "dtype": self.weights_dtype,
            "matmul_gflops": {},
            # Nothing timed: the dtype is the checkpoint's or the one asked for.
            "matmul_measured_at": None,
            "matmul_remembered": False,
            "threads": torch.get_num_threads(),
            "cpu_quota": process_quota(),
            "torch": torch.__version__,
            "malloc": allocator.state(),
            "checkpoint": self.checkpoint_dir,
            "step": self.trainer.step,
            "optimizer": self.trainer.config.to_json(),
            "uptime_s": round(time.time() - self.started, 1),
            "counters": counters(self.sampler, self.trainer),
            "capacity": self.sampler.stats(),
        }

    def save(self, folder: str) -> dict:
        manifest = {
            "backend": self.backend,
            "hf_model": self.path,
            "tokenizer": {"name": self.tokenizer.name},
            "params": self.model.num_params(),
            "step": self.trainer.step,
            "optimizer": self.trainer.config.to_json(),
            "saved_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        tensors = {"model": self.model.state_dict(), "optimizer": self.trainer.optimizer.state_dict()}
        written = checkpoint.save(folder, manifest, tensors)
        self.checkpoint_dir = str(Path(folder).resolve())
        return {"dir": self.checkpoint_dir, "step": self.trainer.step, "files": written["files"]}

    def load(self, folder: str) -> dict:
        manifest, tensors = checkpoint.load(folder)
        if manifest.get("backend") != "hf" or manifest.get("hf_model") != self.path:
            raise ValueError(f"{folder}: not a checkpoint of {self.path}")
        self.model.load_state_dict(tensors["model"])
        self.trainer.load_optimizer_state(tensors["optimizer"])
        self.trainer.step = int(manifest.get("step", 0))
        self.checkpoint_dir = str(Path(folder).resolve())
        params = self.model.num_params()
        return {"dir": self.checkpoint_dir, "step": self.trainer.step, "preset": None, "params": params}
