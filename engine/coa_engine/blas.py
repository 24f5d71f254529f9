"""OpenBLAS's own thread pool, beside torch's.

Debian's torch (the engine's default) does its matmuls in OpenBLAS built with its own pthreads, and
everything else (elementwise ops, softmax, reductions) on libgomp's OpenMP threads: two pools of
workers for the same cores. Two things follow, both measured on a 2-core AMD EPYC (docs/engine.md,
"Two thread pools"):

- After each parallel region libgomp's workers spin for about 3 ms (300,000 rounds) before they
  sleep, on the cores where OpenBLAS's threads run the matmul that follows. A training step took 25-45%
  longer than with a short spin (`micro`, `tiny` and `small`). `limit_openmp_spin` shortens it, and
  must run before torch loads libgomp, which reads the setting once.
- `torch.set_num_threads` does not reach OpenBLAS's pool, so a generation session at one thread still
  ran its matmuls on two, beside the client that the one-thread default leaves a core for.
  `set_blas_threads` sets that pool along with torch's.

With another BLAS (MKL, or OpenBLAS built for OpenMP, which share libgomp's pool) there is one pool,
and these functions change nothing. This module does not import torch.
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Callable, MutableMapping

# Rounds a libgomp worker spins before it sleeps (libgomp's default is 300,000, about 3 ms): long
# enough for the next elementwise op of a burst to find its workers awake, short next to a matmul.
# Measured alike from 1,000 to 100,000; the default was 25-45% slower (docs/engine.md).
OPENMP_SPIN = 10_000


@functools.lru_cache(maxsize=None)
def system_openblas() -> ctypes.CDLL | None:
    """The system BLAS (what Debian's torch links) when it is OpenBLAS, else None."""
    try:
        blas = ctypes.CDLL("libblas.so.3")
        blas.openblas_get_parallel  # noqa: B018 - the symbol only OpenBLAS has
    except (OSError, AttributeError):  # no system BLAS, or not OpenBLAS
        return None
    return blas


def openblas_pool() -> ctypes.CDLL | None:
    """The system OpenBLAS when it runs its own pthreads pool (`openblas_get_parallel() == 1`), else None."""
    blas = system_openblas()
    return blas if blas is not None and blas.openblas_get_parallel() == 1 else None


def sgemm() -> int | None:
    """The address of the system OpenBLAS's `sgemm_` (Fortran's fp32 matrix product, what Debian's torch
    multiplies fp32 matrices with on a CPU), for native code; None without it."""
    blas = system_openblas()
    return ctypes.cast(blas.sgemm_, ctypes.c_void_p).value if blas is not None else None


def limit_openmp_spin(env: MutableMapping[str, str] | None = None, pool: Callable[[], object] = openblas_pool):
    """Sets GOMP_SPINCOUNT to `OPENMP_SPIN` in `env` (default: this process's environment) where
    OpenBLAS runs its own pool (`pool()` is not None) and neither GOMP_SPINCOUNT nor OMP_WAIT_POLICY is
    set already. Returns the spin count the environment gives libgomp (None: its default)."""
    env = os.environ if env is None else env
    if "GOMP_SPINCOUNT" not in env and "OMP_WAIT_POLICY" not in env and pool() is not None:
        env["GOMP_SPINCOUNT"] = str(OPENMP_SPIN)
    return env.get("GOMP_SPINCOUNT")


def blas_threads() -> int | None:
    """OpenBLAS's pool size, or None where there is no such pool."""
    pool = openblas_pool()
    return pool.openblas_get_num_threads() if pool is not None else None


def set_blas_threads(threads: int) -> None:
    """Sizes OpenBLAS's pool, where there is one and it differs."""
    pool = openblas_pool()
    if pool is not None and pool.openblas_get_num_threads() != threads:
        pool.openblas_set_num_threads(threads)


def state() -> dict:
    """For /info: whether OpenBLAS runs its own pool, and the spin count libgomp was given."""
    return {"openblas_pool": openblas_pool() is not None, "openmp_spin": os.environ.get("GOMP_SPINCOUNT")}
