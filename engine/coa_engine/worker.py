"""One served model and everything around it: tokenizer, sampler, trainer, checkpoints, counters."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

from . import allocator, attention, blas, checkpoint, graph_step
from .cpus import process_quota
from .drafting import DEFAULT_DRAFT_TOKENS
from .model import ModelConfig, Transformer, preset_config
from .precision import DtypeChoice, choose_device, remembered_dtype
from .sampling import CachedDecoder, ModelGate, Sampler
from .spare_cores import SPARE
from .tokenizer import ByteTokenizer, default_tags, tokenizer_from_json
from .train import OptimizerConfig, Trainer


def counters(sampler: Sampler, trainer: Trainer) -> dict:
    """Throughput since start: tokens generated and trained, and the seconds spent on each."""
    gen_s, train_s = sampler.busy_seconds, trainer.seconds_trained
    return {
        "generated_tokens": sampler.generated_tokens,
        # Steps that decoded the running batch: generated tokens per step is how full it ran.
        "decode_steps": sampler.steps,
        "generation_seconds": round(gen_s, 3),
        # Of those, the model thread's on a core: the rest it waited for one (or for the GIL).
        "generation_cpu_seconds": round(sampler.busy_cpu_seconds, 3),
        "admit_seconds": round(sampler.admit_seconds, 3),
        "decode_seconds": round(sampler.decode_seconds, 3),
        # Speculative decoding: drafted ids fed to the model, and those sampling kept (each one a step saved).
        "drafted_tokens": sampler.drafted_tokens,
        "accepted_tokens": sampler.accepted_tokens,
        # Prefix-cache hits whose new ids a decode step fed beside the batch's (their time is decoding's).
        "stepped_prefills": sampler.stepped_prefills,
        # Rows that read the prompt prefix the batch's rows share (a system prompt) from one copy.
        "shared_prefix_rows": sampler.shared_prefix_rows,
        "generation_tokens_per_s": round(sampler.generated_tokens / gen_s, 1) if gen_s else 0,
        "trained_tokens": trainer.tokens_trained,
        "train_seconds": round(train_s, 3),
        "train_tokens_per_s": round(trainer.tokens_trained / train_s, 1) if train_s else 0,
    }


# Keys and values of finished rows kept for later prompts that extend them (`PrefixCache`); per token
# 2 x layers x dim fp32 numbers: micro 2 KiB, tiny 10 KiB, small 32 KiB. $COA_PREFIX_CACHE_MB overrides;
# 0 turns the cache off.
DEFAULT_PREFIX_CACHE_MB = 256
# Keys and values in memory at once: the running batch's (every row at the longest row's length) plus the
# prefix cache, which gives way first. $COA_KV_CACHE_MB overrides. 64 rows of `tiny` at its full 2,048
# positions take 1.25 GiB in fp32; `small` would take 4 GiB, so at most ~30 such rows decode together.
DEFAULT_KV_CACHE_MB = 2048


class Worker:
    backend = "coa"

    def __init__(
        self,
        *,
        preset: str | None = None,
        checkpoint_dir: str | None = None,
        tags: list[str] | None = None,
        tokenizer_file: str | None = None,
        dtype: str = "auto",
        device: str = "auto",
        seed: int = 0,
        max_seq_len: int | None = None,
        max_rows: int = 64,
        prefix_cache_mb: float | None = None,
        kv_cache_mb: float | None = None,
        max_queued_rows: int | None = None,
        threads: int | None = None,
        generation_threads: int | None = None,
        draft_tokens: int = DEFAULT_DRAFT_TOKENS,
    ):
        self.device = choose_device(device)
        # Chosen on the first model's own projections (`_choose_dtype`), then kept for every later load.
        self.requested_dtype = dtype
        self.dtype_choice: DtypeChoice | None = None
        # A checkpoint's tags are checked against these: the protocol's (specials.json, a checked-in
        # copy of src/protocol's list that a test holds equal) unless the caller names others.
        self.expected_tags = tags or default_tags()
        self.gate = ModelGate(threads)
        self.generation_threads = generation_threads
        attention.use_threads(threads)  # generation's too: the kernel is bound by memory, not the core
        self.started = time.time()
        # The HTTP server's open connections against its limit (server.ConnectionLimit), once serving.
        self.connections = None
        # The model is built on the gate's model thread, as all of its work is (ModelGate says why).
        if checkpoint_dir:
            self.gate.run(lambda: self._load(checkpoint_dir, max_seq_len))
        else:
            self.tokenizer = self._fresh_tokenizer(self.expected_tags, tokenizer_file)
            torch.manual_seed(seed)
            self.preset = preset or "tiny"
            config = preset_config(self.preset, self.tokenizer.vocab_size, max_seq_len)
            self._choose_dtype(config)
            self.gate.run(lambda: self._install(Transformer(config).to(self.device)))
            self.checkpoint_dir = None
        if prefix_cache_mb is None:
            prefix_cache_mb = float(os.environ.get("COA_PREFIX_CACHE_MB", DEFAULT_PREFIX_CACHE_MB))
        if kv_cache_mb is None:
            kv_cache_mb = float(os.environ.get("COA_KV_CACHE_MB", DEFAULT_KV_CACHE_MB))
        self.sampler = Sampler(
            CachedDecoder(self.model, self.dtype),
            self.tokenizer,
            self.gate,
            max_rows=max_rows,
            prefix_cache_bytes=int(prefix_cache_mb * 2**20),
            max_kv_bytes=int(kv_cache_mb * 2**20),
            max_queued_rows=max_queued_rows,
            threads=generation_threads,
            draft_tokens=draft_tokens,
        )

    @staticmethod
    def _fresh_tokenizer(tags: list[str], file: str | None) -> ByteTokenizer:
        if file is None:
            return ByteTokenizer(tags)
        try:
            tokenizer = tokenizer_from_json(json.loads(Path(file).read_text()))
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ValueError(f"{file}: not a tokenizer file ({err})") from err
        if tokenizer.tags != tags:
            raise ValueError(f"{file}: its protocol tags differ from this version's; its ids would mean other tokens")
        return tokenizer

    @property
    def model_name(self) -> str:
        return f"coa-{self.preset}"

    @property
    def max_seq_len(self) -> int:
        return self.model.config.max_seq_len

    def _install(self, model: Transformer, trainer: Trainer | None = None) -> None:
        # Callers move the model to self.device first, so the optimizer holds the moved parameters.
        self.model = model.eval()
        # A GPU takes far longer micro-batches than a CPU before memory or latency suffer.
        config = OptimizerConfig(micro_batch_tokens=65536 if self.device == "cuda" else 8192)
        self.trainer = trainer or Trainer(model, self.dtype, config)
        if hasattr(self, "sampler"):
            self.sampler.decoder = CachedDecoder(model, self.dtype)
            self.sampler.tokenizer = self.tokenizer

    def info(self) -> dict:
        t = self.trainer
        return {
            "backend": self.backend,
            "model": self.model_name,
            "preset": self.preset,
            "config": self.model.config.to_json(),
            "params": self.model.num_params(),
            "max_model_len": self.max_seq_len,
            "tokenizer": {"name": self.tokenizer.name, "vocab_size": self.tokenizer.vocab_size},
            "device": self.device,
            "dtype": self.dtype,
            "matmul_gflops": {k: round(v, 1) for k, v in self.dtype_choice.gflops.items()},
            # When those were timed; remembered: at an earlier start on this machine (precision.py).
            "matmul_measured_at": self.dtype_choice.measured_at,
            "matmul_remembered": self.dtype_choice.remembered,
            # Per thread in torch: the handler's own count says nothing; these are what the model
            # thread (training, scoring) and the sampler were given.
            "threads": self.gate.threads or torch.get_num_threads(),
            "generation_threads": self.generation_threads or torch.get_num_threads(),
            # CPUs' worth of time a cgroup allowed this process at start (None: no quota), which bounds
            # the default thread count (`cpus.usable_cpus`).
            "cpu_quota": process_quota(),
            "torch": torch.__version__,
            "malloc": allocator.state(),
            "blas": blas.state(),
            "decode_attention": attention.state(),
            # Native steps of a batch, and those that took every thread while the client's cores idled.
            "spare_cores": SPARE.stats(),
            "cuda_graphs": graph_step.state() if self.device == "cuda" else None,
            "pid": os.getpid(),
            "checkpoint": self.checkpoint_dir,
            "step": t.step,
            "optimizer": t.config.to_json(),
            "has_reference": t.reference is not None,
            "uptime_s": round(time.time() - self.started, 1),
            "counters": counters(self.sampler, t),
            "prefix_cache": self.sampler.prefix_cache.stats(),
            "speculation": self.sampler.speculation_stats(),
            "capacity": self.sampler.stats(),
            **({"connections": self.connections.stats()} if self.connections else {}),
        }

    def save(self, folder: str) -> dict:
        """Call under the gate's exclusive section."""
        t = self.trainer
        tensors = {"model": self.model.state_dict(), "optimizer": t.optimizer.state_dict()}
        if t.reference is not None:
            tensors["reference"] = t.reference.state_dict()
        manifest = {
            "backend": self.backend,
            "preset": self.preset,
            "model": self.model.config.to_json(),
            "tokenizer": self.tokenizer.to_json(),
            "params": self.model.num_params(),
            "step": t.step,
            "optimizer": t.config.to_json(),
            "dtype": self.dtype,
            "saved_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        written = checkpoint.save(folder, manifest, tensors)
        self.checkpoint_dir = str(Path(folder).resolve())
        return {"dir": self.checkpoint_dir, "step": t.step, "files": written["files"]}

    def load(self, folder: str) -> dict:
        """Call under the gate's exclusive section."""
        self._load(folder)
        return {"dir": self.checkpoint_dir, "step": self.trainer.step, "preset": self.preset,
                "params": self.model.num_params()}

    @property
    def dtype(self) -> str | None:
        """The arithmetic chosen (`_choose_dtype`); None before the first model."""
        return self.dtype_choice.dtype if self.dtype_choice is not None else None

    def _choose_dtype(self, config: ModelConfig) -> None:
        """Once per engine, on its first model's own projections (a later load keeps the choice)."""
        if self.dtype_choice is None:
            self.dtype_choice = remembered_dtype(self.requested_dtype, self.device, config.projection_shapes())
            if self.device == "cpu":
                attention.attention_kernel()  # built now (about a second, once per machine), not in a first request

    def _load(self, folder: str, max_seq_len: int | None = None) -> None:
        """`max_seq_len` gives the model another context than it was saved with: rotary positions
        hold no weights, so a base pretrained on short sequences can be fine-tuned on longer ones."""
        manifest, tensors = checkpoint.load(folder)
        if manifest.get("backend", "coa") != self.backend:
            raise ValueError(
                f"{folder}: a {manifest.get('backend')} checkpoint; this engine serves {self.backend}"
            )
        tags = manifest["tokenizer"]["tags"]
        if tags != self.expected_tags:
            raise ValueError(
                f"{folder}: the checkpoint's tokenizer tags differ from the protocol's; "
                "its ids would mean different tokens"
            )
        tokenizer = tokenizer_from_json(manifest["tokenizer"])
        model = Transformer(ModelConfig(**{**manifest["model"], **({"max_seq_len": max_seq_len} if max_seq_len else {})}))
        model.load_state_dict(tensors["model"])
        model.to(self.device)
        self._choose_dtype(model.config)
        trainer = Trainer(model, self.dtype, OptimizerConfig(**manifest.get("optimizer", {})))
        # A released base ships weights only: training from it starts with fresh optimizer moments.
        if "optimizer" in tensors:
            trainer.load_optimizer_state(tensors["optimizer"])
        trainer.step = int(manifest.get("step", 0))
        if "reference" in tensors:
            trainer.reference = Transformer(model.config).eval().requires_grad_(False)
            trainer.reference.load_state_dict(tensors["reference"])
            trainer.reference.to(self.device)
        self.tokenizer, self.preset = tokenizer, manifest.get("preset", "custom")
        self._install(model, trainer)
        self.checkpoint_dir = str(Path(folder).resolve())
