"""A decode step's attention row by row: each row's new queries over exactly its own cached positions,
as the operator `torch.ops.coa.attend_rows` that the TorchScript step (`model.decode_tokens`) calls.

On a CPU, with an fp32 or a bf16 cache, the operator runs the engine's native kernel (attention.c),
built with the machine's C compiler the first time it is needed, in one shared object with the whole
one-row decode step that calls it (row_step.c, row_step.py). Why a kernel of our own: torch 1.13
(Debian's, the engine's default) has no fused attention and runs a decode step's as one small GEMM per
row and head plus an unvectorized exp; in the demo's evaluation that was most of a step (docs/engine.md,
"Fused decode attention"). Where the kernels cannot be built (no C compiler, no AVX2/FMA, another
architecture) or `COA_ATTENTION_KERNEL=0`, the operator runs the same arithmetic in torch ops
(`attend_rows_torch`), every step is the TorchScript one, and decoding is only slower.

The shared object is cached in `$XDG_CACHE_HOME/coa/kernels` (default `~/.cache/coa/kernels`), named by
a hash of the sources, the compiler's version and flags, and the CPU's flags, so that a cache shared
between machines never loads code built for another CPU.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List

import torch

from . import blas

# The engine's native code, built into one shared object: this attention, and the whole one-row decode
# step that calls it (row_step.c, loaded by row_step.py).
SOURCES = tuple(Path(__file__).with_name(name) for name in ("attention.c", "row_step.c"))
# Included by both (its text is part of the build's key).
HEADERS = (Path(__file__).with_name("bf16.h"),)
# -ffast-math at compile time only: it lets gcc vectorize the softmax's exp (glibc's libmvec) and
# reassociate the sums. Linked with it, gcc would add crtfastmath.o, which flushes denormals for the
# whole process (torch's arithmetic included) when the library loads.
COMPILE_FLAGS = ["-O3", "-march=native", "-ffast-math", "-fopenmp", "-fPIC"]
LINK_FLAGS = ["-shared", "-fopenmp"]


def cache_root() -> Path:
    """coa's cache for this user (XDG_CACHE_HOME, else ~/.cache, then coa): the engine's built kernels
    here, its remembered dtype choices (precision.py)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "coa"


def cache_dir() -> Path:
    return cache_root() / "kernels"


@functools.lru_cache(maxsize=None)
def _cpuinfo() -> tuple[str, ...]:
    """/proc/cpuinfo's lines, read once per process rather than by each of the kernel's key, the AMX
    check and the dtype choice's key (0.23 ms a read on 2 cores; the file grows with the cores). Empty
    without /proc."""
    try:
        return tuple(Path("/proc/cpuinfo").read_text().splitlines())
    except OSError:
        return ()


def cpuinfo_line(prefix: str) -> str | None:
    """The first line of /proc/cpuinfo that starts with `prefix` (the first CPU's), or None."""
    return next((line for line in _cpuinfo() if line.startswith(prefix)), None)


def cpu_flags() -> str:
    return cpuinfo_line("flags") or os.uname().machine


@functools.lru_cache(maxsize=None)
def has_amx() -> bool:
    """Whether this CPU has AMX's bf16 tiles (which oneDNN's bf16 products, TorchScript's, run on)."""
    return "amx_bf16" in cpu_flags().split()


def build(compiler: str | None = None) -> Path:
    """The kernels' shared object, compiled now unless a build for these sources, compiler and CPU is
    cached. Raises OSError or subprocess.CalledProcessError (with the compiler's message) on failure."""
    cc = compiler or os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise OSError("no C compiler (gcc or cc) on PATH")
    version = subprocess.run([cc, "--version"], capture_output=True, text=True, check=True).stdout
    texts = [source.read_text() for source in (*SOURCES, *HEADERS)]
    key = hashlib.sha256("\0".join([*texts, version, *COMPILE_FLAGS, *LINK_FLAGS, cpu_flags()]).encode())
    target = cache_dir() / f"attention-{key.hexdigest()[:16]}.so"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as work:
        objects, lib = [str(Path(work) / f"{source.stem}.o") for source in SOURCES], Path(work) / "attention.so"
        compiles = [[cc, *COMPILE_FLAGS, "-c", str(source), "-o", obj] for source, obj in zip(SOURCES, objects)]
        for command in (*compiles, [cc, *LINK_FLAGS, *objects, "-o", str(lib), "-lm"]):
            result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode != 0:
                raise subprocess.CalledProcessError(result.returncode, command, result.stdout, result.stderr)
        os.replace(lib, target)  # atomic: a concurrent build of the same key writes the same bytes
    return target


# Why the kernel is not in use, once `attention_kernel` has been asked (`state`).
_not_used: str | None = None

# Threads the kernel runs on (`use_threads`); None: torch's count on the calling thread.
_threads: int | None = None


def use_threads(threads: int | None) -> None:
    """Every later kernel call runs on `threads` threads, whatever torch's count on the calling thread.
    The engine gives it all of its CPUs while generation runs torch on one fewer: the attention reads
    the keys and values from memory, and one core's loads leave bandwidth unused (28 rows of `micro`
    at 600-1,300 positions, 2-core AVX2 EPYC: 7.7-9.9 GB/s on one thread, 14.7-16.2 on two), where
    torch's ~200 small ops a step each wait for the core the client holds (docs/engine.md)."""
    global _threads
    _threads = threads


def kernel_threads() -> int:
    """Threads a kernel call runs on now (`use_threads`)."""
    return _threads or torch.get_num_threads()


@functools.lru_cache(maxsize=None)
def attention_kernel() -> ctypes.CDLL | None:
    """The loaded kernel, or None (disabled, or not buildable here: one line on stderr says why)."""
    global _not_used
    if os.environ.get("COA_ATTENTION_KERNEL", "1") == "0":
        _not_used = "off (COA_ATTENTION_KERNEL=0)"
        return None
    try:
        lib = ctypes.CDLL(str(build()))
    except (OSError, subprocess.CalledProcessError) as error:
        lines = (getattr(error, "stderr", None) or str(error) or error.__class__.__name__).strip().splitlines()
        reason = next((line for line in lines if "error" in line), lines[-1])
        _not_used = f"did not build: {reason}"
        print(f"coa-engine: decode attention in torch ops (the fused kernel {_not_used})", file=sys.stderr)
        return None
    _not_used = None
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.coa_attend_rows.restype = ctypes.c_int
    lib.coa_attend_rows.argtypes = [
        ptr, ptr, ptr, ptr, ptr, ptr, *[i64] * 9, ptr, ptr, ptr, i64, ctypes.c_float, ctypes.c_int, ctypes.c_int
    ]
    lib.coa_row_step.restype = ctypes.c_int
    lib.coa_row_step.argtypes = [
        ptr, i64, *[ptr] * 7, i64, *[ptr] * 5, *[i64] * 4, *[ptr] * 3, *[i64] * 6, ctypes.c_float, ptr, i64, ptr,
        *[ctypes.c_int] * 3,
    ]
    lib.coa_row_step_pairs.restype = ctypes.c_int
    lib.coa_row_step_pairs.argtypes = []
    return lib


def state() -> dict:
    """For /info: whether decoding on a CPU runs the fused kernel, on how many threads, and if not, why;
    with it, whether fp32 steps of many ids run natively through the system OpenBLAS's sgemm
    (`RowStep.batches`), and whether bf16 steps multiply in pairs by AVX512-BF16 (row_step.c's
    `gemv_pairs`). Asks nothing of the compiler: an engine that has not decoded on a CPU reports it as
    not loaded."""
    loaded = attention_kernel.cache_info().currsize > 0
    lib = attention_kernel() if loaded else None
    if lib is not None:
        pairs = bool(lib.coa_row_step_pairs())
        return {"fused": True, "threads": kernel_threads(), "sgemm": blas.sgemm() is not None, "bf16_pairs": pairs}
    return {"fused": False, "reason": _not_used if loaded else "not loaded (no decoding on a CPU yet)"}


def attend_rows_torch(
    q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, ends: List[int], counts: List[int], scale: float
) -> torch.Tensor:
    """Attention of each row's new queries over exactly its first `ends[b]` positions of the cache, in
    torch ops. q [N, H, D]: the new positions of row 0, then row 1, ... (`counts[b]` of them, the last
    of its `ends[b]`, causal among themselves); keys and values [B, H, positions, D]; -> [N, H, D].

    The batched path of `model.decode_tokens` reads every row at the longest row's width and runs the
    softmax over it (masked); here a row reads only its own. In fp32 on a CPU the matmuls are the same
    small GEMMs per row and head either way (torch 1.13 loops over the batch), so what is saved is the
    reading and the softmax: `micro`, 25 rows of 300-1,040 positions (69% of the span), 5 ids each,
    one thread, a step took 21.3 ms against 24.9 batched (docs/engine.md)."""
    out: List[torch.Tensor] = []
    first = 0
    for r, end in enumerate(ends):
        t = counts[r]
        causal = torch.full((t, t), float("-inf"), dtype=q.dtype, device=q.device).triu(1)
        bias = torch.cat([torch.zeros(t, end - t, dtype=q.dtype, device=q.device), causal], dim=1)
        # Scaled inside the product, as the trainer's `_attend` (in bf16 the scores round once).
        queries = q[first : first + t].transpose(0, 1)  # [H, t, D]
        scores = torch.baddbmm(bias, queries, keys[r, :, :end].transpose(1, 2), alpha=scale)  # [H, t, end]
        y = torch.matmul(torch.softmax(scores, dim=-1), values[r, :, :end])
        out.append(y.transpose(0, 1))
        first += t
    return torch.cat(out)


def attend_rows_fused(
    q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, ends: List[int], counts: List[int], scale: float,
    shared: tuple[torch.Tensor, torch.Tensor, List[int]] | None = None,
) -> torch.Tensor:
    """`attend_rows_torch` by the kernel (`usable` says when it applies); with `shared` (keys, values,
    positions per row), row b reads its first positions from those keys and values (`attend_rows`)."""
    lib = attention_kernel()
    n, h, d = q.shape
    queries = q.float()  # exact for bf16 queries; the kernel computes in fp32 (an fp32 q is not copied)
    out = torch.empty((n, h, d), dtype=torch.float32)
    lengths, fed = torch.tensor(ends, dtype=torch.int64), torch.tensor(counts, dtype=torch.int64)
    prefix = torch.tensor(shared[2], dtype=torch.int64) if shared is not None and any(shared[2]) else None
    status = lib.coa_attend_rows(
        queries.data_ptr(), keys.data_ptr(), values.data_ptr(), out.data_ptr(), lengths.data_ptr(), fed.data_ptr(),
        len(ends), h, d, queries.stride(0), queries.stride(1), keys.stride(0), keys.stride(1),
        values.stride(0), values.stride(1),
        *((shared[0].data_ptr(), shared[1].data_ptr(), prefix.data_ptr(), shared[0].stride(0))
          if prefix is not None else (None, None, None, 0)),
        scale, kernel_threads(), int(keys.dtype == torch.bfloat16),
    )  # fmt: skip
    if status != 0:
        raise MemoryError("the fused attention could not allocate its buffers")
    return out.to(q.dtype)


def fused_over(keys: torch.Tensor, values: torch.Tensor, dtype: torch.dtype) -> bool:
    """Whether the kernel attends queries of `dtype` over this cache's keys and values: built, all fp32
    or all bf16 on the CPU, the cache's layout (`KVCache`), and a head width of whole AVX2 vectors."""
    d = keys.shape[-1]
    return (
        keys.device.type == "cpu"  # first: a GPU's decode step asks too, and must not build the kernel
        and dtype == keys.dtype == values.dtype
        and dtype in (torch.float32, torch.bfloat16)
        and d % 8 == 0
        and all(kv.stride(3) == 1 and kv.stride(2) == d for kv in (keys, values))
        and attention_kernel() is not None
    )


def usable(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> bool:
    """Whether the kernel takes these tensors (`fused_over`, and queries [N, H, D] on the CPU with
    contiguous heads)."""
    cpu_queries = q.device.type == "cpu" and q.stride(2) == 1 and q.shape[-1] == keys.shape[-1]
    return cpu_queries and fused_over(keys, values, q.dtype)


# Positions a row may read from a shared prefix come in whole blocks of the kernel's keys (BLOCK_KEYS).
SHARED_BLOCK = 16


def shared_prefix_fits(
    shared_keys: torch.Tensor, shared_values: torch.Tensor, keys: torch.Tensor, shared: List[int], before: List[int]
) -> bool:
    """Whether one layer's shared prefix is what the kernel reads (`attend_rows`): keys and values
    [heads, positions, head_dim] of the cache's dtype, each head's positions contiguous, and each row's
    count shared[b] whole `SHARED_BLOCK`s within the prefix and within the before[b] positions it held."""
    sk, sv = shared_keys, shared_values
    return (
        sk.shape == sv.shape == (keys.shape[1], sk.shape[1], keys.shape[3])
        and sk.dtype == sv.dtype == keys.dtype
        and sk.stride() == sv.stride() == (sk.shape[1] * sk.shape[2], sk.shape[2], 1)
        and all(0 <= s <= min(sk.shape[1], held) and s % SHARED_BLOCK == 0 for s, held in zip(shared, before))
    )


def attend_rows(
    q: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    ends: List[int],
    counts: List[int],
    scale: float,
    shared_keys: torch.Tensor | None = None,
    shared_values: torch.Tensor | None = None,
    shared: List[int] | None = None,
) -> torch.Tensor:
    """The operator's implementation: the kernel where it applies, else torch ops. Queries that are not
    the rows' counts, or ends outside the cache's positions, would make the kernel read past its
    inputs: refused, whichever runs.

    With `shared`, row b's first shared[b] positions (whole `SHARED_BLOCK`s of its cached positions) are
    read by the kernel from `shared_keys` and `shared_values` ([heads, positions, head_dim], each head's
    positions contiguous), which the caller holds equal to the row's own: a prompt's prefix common to
    many rows (the system prompt) then comes from the core's caches rather than from memory once a row.
    The same sums in the same order, so the same bits; torch ops read the row's own."""
    positions = min(keys.shape[2], values.shape[2])
    if (
        len(ends) != len(counts)
        or len(ends) > min(keys.shape[0], values.shape[0])
        or sum(counts) != q.shape[0]
        or any(c < 0 or end < c or end > positions for end, c in zip(ends, counts))
    ):
        raise ValueError(
            f"attend_rows: ends {ends} and counts {counts} for {q.shape[0]} queries in {positions} positions"
        )
    if shared is not None and any(shared):
        fits = (
            shared_keys is not None
            and shared_values is not None
            and len(shared) == len(ends)
            and shared_prefix_fits(shared_keys, shared_values, keys, shared, [e - c for e, c in zip(ends, counts)])
        )
        if not fits:
            raise ValueError(f"attend_rows: shared prefixes {shared} do not fit the rows or the shared keys and values")
    if usable(q, keys, values):
        common = (shared_keys, shared_values, shared) if shared is not None else None
        return attend_rows_fused(q, keys, values, ends, counts, scale, common)
    return attend_rows_scripted()(q, keys, values, ends, counts, scale)


@functools.lru_cache(maxsize=None)
def attend_rows_scripted():
    """`attend_rows_torch` compiled by TorchScript: its loop over rows makes ~8 ops per row and layer,
    and in Python each costs more than the op itself (the demo's evaluation decoded 3.5 s slower in
    eager mode than with this loop inside the compiled step, as it was before the kernel)."""
    try:
        return torch.jit.script(attend_rows_torch)
    except Exception:  # noqa: BLE001 - as `model.decode_step`: eager mode is the same arithmetic
        return attend_rows_torch


# An operator rather than a Python call so that the TorchScript step can call it (torch.library, torch
# >= 1.13); its implementation runs in Python, and the kernel in C without the GIL (ctypes).
_library = torch.library.Library("coa", "DEF")
_library.define(
    "attend_rows(Tensor q, Tensor keys, Tensor values, int[] ends, int[] counts, float scale, "
    "Tensor? shared_keys=None, Tensor? shared_values=None, int[]? shared=None) -> Tensor"
)
_library.impl("attend_rows", attend_rows, "CPU")
