"""Which arithmetic to run in: bf16 autocast where this CPU does it fast (AMX, AVX-512 BF16), fp32
otherwise. Decided by timing a small matmul in both at start-up, so the choice follows the hardware
rather than a flag list.
"""

from __future__ import annotations

import contextlib
import time

import torch


def matmul_flops(dtype: torch.dtype, size: int = 256, seconds: float = 0.05) -> float:
    """Measured FLOP/s of a square matmul in `dtype`."""
    a, b = torch.randn(size, size).to(dtype), torch.randn(size, size).to(dtype)
    a @ b
    reps, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds or reps < 3:
        a @ b
        reps += 1
    return 2 * size**3 * reps / elapsed


def choose_dtype(requested: str) -> tuple[str, dict[str, float]]:
    """`requested` is "auto", "fp32" or "bf16"; returns the choice and the GFLOP/s measured for it."""
    measured: dict[str, float] = {}
    if requested == "auto":
        measured = {"fp32": matmul_flops(torch.float32) / 1e9, "bf16": matmul_flops(torch.bfloat16) / 1e9}
        # bf16 must win clearly: it also costs accuracy.
        return ("bf16" if measured["bf16"] > 1.2 * measured["fp32"] else "fp32"), measured
    if requested not in ("fp32", "bf16"):
        raise ValueError(f"dtype must be auto, fp32 or bf16, not {requested!r}")
    return requested, measured


def autocast(dtype: str):
    """The context that model code runs in."""
    if dtype == "bf16":
        return torch.autocast(device_type="cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()
