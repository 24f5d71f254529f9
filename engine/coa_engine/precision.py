"""Where and in which arithmetic to run. On a CPU, bf16 autocast where it is fast (AMX, AVX-512
BF16), fp32 otherwise, decided by timing a small matmul in both at start-up, so the choice follows the
hardware rather than a flag list. On a CUDA GPU, bf16 wherever the GPU supports it.
"""

from __future__ import annotations

import contextlib
import time

import torch


def matmul_flops(dtype: torch.dtype, size: int = 256, seconds: float = 0.05) -> float:
    """Measured FLOP/s of a square matmul in `dtype`, after a warm-up (the first bf16 calls of a
    process build their kernels and run up to fifty times slower)."""
    a, b = torch.randn(size, size).to(dtype), torch.randn(size, size).to(dtype)
    for _ in range(5):
        a @ b
    reps, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds or reps < 3:
        a @ b
        reps += 1
    return 2 * size**3 * reps / elapsed


def choose_device(requested: str) -> str:
    """`requested` is "auto" (CUDA when torch sees a GPU), "cpu" or "cuda"."""
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested not in ("cpu", "cuda"):
        raise ValueError(f"device must be auto, cpu or cuda, not {requested!r}")
    if requested == "cuda" and not torch.cuda.is_available():
        raise ValueError("device cuda was asked for, but torch sees no CUDA GPU")
    return requested


def choose_dtype(requested: str, device: str = "cpu") -> tuple[str, dict[str, float]]:
    """`requested` is "auto", "fp32" or "bf16"; returns the choice and the GFLOP/s measured for it."""
    measured: dict[str, float] = {}
    if requested == "auto" and device == "cuda":
        return ("bf16" if torch.cuda.is_bf16_supported() else "fp32"), measured
    if requested == "auto":
        # Best of three alternating rounds, so that a moment of load on a shared machine cannot
        # decide the arithmetic of the whole run.
        measured = {"fp32": 0.0, "bf16": 0.0}
        for _ in range(3):
            for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
                measured[name] = max(measured[name], matmul_flops(dtype) / 1e9)
        # bf16 must win clearly: it also costs accuracy.
        return ("bf16" if measured["bf16"] > 1.2 * measured["fp32"] else "fp32"), measured
    if requested not in ("fp32", "bf16"):
        raise ValueError(f"dtype must be auto, fp32 or bf16, not {requested!r}")
    return requested, measured


def autocast(dtype: str, device_type: str = "cpu"):
    """The context that model code runs in on `device_type` ("cpu" or "cuda")."""
    if dtype == "bf16":
        return torch.autocast(device_type=device_type, dtype=torch.bfloat16)
    return contextlib.nullcontext()
