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
and these functions change nothing. Which BLAS torch calls is read from its CPU library's ELF header
(`torch_links_system_blas`): a machine may have the system OpenBLAS installed beside a torch that never
calls it (a pip wheel, whose BLAS is MKL), where a shortened spin only costs. On a 16-core AMX Xeon with
torch 2.11 from pip and Ubuntu's OpenBLAS, the spin shortened to 10,000 took a lone `tiny` request from
2,069-2,139 to 1,301-1,951 tok/s through the server (docs/engine.md). This module does not import torch.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
import struct
from collections.abc import Callable, MutableMapping

# Rounds a libgomp worker spins before it sleeps (libgomp's default is 300,000, about 3 ms): long
# enough for the next elementwise op of a burst to find its workers awake, short next to a matmul.
# Measured alike from 1,000 to 100,000; the default was 25-45% slower (docs/engine.md).
OPENMP_SPIN = 10_000


# The system BLAS's name, as a library that links it records it.
SYSTEM_BLAS = "libblas.so.3"


def elf_needed(path: str | os.PathLike) -> list[str]:
    """The libraries an ELF64 little-endian shared object names as needed (its DT_NEEDED entries), read
    from its program headers and dynamic section without loading it. ValueError if it is not one."""
    with open(path, "rb") as f:
        header = f.read(64)
        if len(header) < 64 or header[:4] != b"\x7fELF" or header[4] != 2 or header[5] != 1:
            raise ValueError(f"{path}: not a 64-bit little-endian ELF file")
        (phoff,) = struct.unpack_from("<Q", header, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", header, 0x36)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
        # (type, offset, address, size in the file) of each segment
        segments = [struct.unpack_from("<I4xQQ8xQ", table, i * phentsize) for i in range(phnum)]
        dynamic = next((s for s in segments if s[0] == 2), None)  # PT_DYNAMIC
        if dynamic is None:
            return []
        f.seek(dynamic[1])
        raw = f.read(dynamic[3])
        entries = [struct.unpack_from("<qQ", raw, i) for i in range(0, len(raw) - 15, 16)]
        strtab = next((value for tag, value in entries if tag == 5), None)  # DT_STRTAB, an address
        # The address as a file offset, through the loaded segment (PT_LOAD) that holds it.
        at = None
        for kind, off, addr, size in segments:
            if kind == 1 and strtab is not None and addr <= strtab < addr + size:
                at = off + strtab - addr
        if at is None:
            raise ValueError(f"{path}: its string table lies in no loaded segment")
        names = []
        for tag, value in entries:
            if tag == 0:  # DT_NULL ends the array
                break
            if tag == 1:  # DT_NEEDED: an offset into the string table
                f.seek(at + value)
                names.append(f.read(256).split(b"\0", 1)[0].decode())
        return names


@functools.lru_cache(maxsize=None)
def torch_links_system_blas() -> bool:
    """Whether torch's CPU library (torch/lib/libtorch_cpu.so, found without importing torch) needs the
    system BLAS: Debian's torch does; a pip wheel brings its own (MKL on x86-64). False where it cannot
    be told."""
    spec = importlib.util.find_spec("torch")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        try:
            return SYSTEM_BLAS in elf_needed(os.path.join(folder, "lib", "libtorch_cpu.so"))
        except (OSError, ValueError, struct.error):
            continue
    return False


@functools.lru_cache(maxsize=None)
def system_openblas() -> ctypes.CDLL | None:
    """The system BLAS when torch calls it (`torch_links_system_blas`: Debian's torch) and it is OpenBLAS,
    else None."""
    if not torch_links_system_blas():
        return None
    try:
        blas = ctypes.CDLL(SYSTEM_BLAS)
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
