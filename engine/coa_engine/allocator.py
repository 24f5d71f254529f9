"""glibc malloc settings for a process that allocates and frees large tensors thousands of times a second.

By default glibc returns memory to the kernel as soon as the top of a heap holds 128 KiB free, and serves
every allocation above a (self-adjusting) threshold from a fresh `mmap`. torch's CPU tensors come from
malloc, so a decode step or a training step that allocates a few hundred KiB of scores or activations
and frees them again gets new pages each time, and each new page is a page fault. On the virtual
machines this project runs on, those faults cost more than the arithmetic: a `micro` decode step at
eval shapes took 14.7 ms with glibc's defaults and 4.5 ms with these settings, and the bench's `small`
training step ran 20-30% faster in alternated runs (docs/engine.md, "Memory allocation").

The settings keep freed memory in the process for reuse: no trimming of a heap's top, `mmap` only for
single allocations over 32 MiB (glibc's largest threshold, which also switches off its adjustment), and
heaps grown 64 MiB at a time. The cost is a process whose resident size stays near its high-water mark.
Any of them given in glibc's own environment variable (`MALLOC_TRIM_THRESHOLD_`, `MALLOC_TOP_PAD_`,
`MALLOC_MMAP_THRESHOLD_`) is left as given; `COA_ENGINE_MALLOC=glibc` leaves all of them.
"""

from __future__ import annotations

import ctypes
import os

# mallopt parameter numbers from glibc's <malloc.h>.
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3

SETTINGS = {
    # name in /info: (mallopt parameter, glibc's environment variable, value)
    "trim_threshold": (M_TRIM_THRESHOLD, "MALLOC_TRIM_THRESHOLD_", 1 << 30),
    "top_pad": (M_TOP_PAD, "MALLOC_TOP_PAD_", 64 << 20),
    "mmap_threshold": (M_MMAP_THRESHOLD, "MALLOC_MMAP_THRESHOLD_", 32 << 20),
}

_state: dict = {"tuned": False, "reason": "not tuned yet"}


def tune_malloc(env: dict[str, str] | None = None) -> dict:
    """Applies SETTINGS through mallopt, before the model's first allocations. Returns what `state()`
    reports: which settings were applied, and why none were where none were."""
    global _state
    env = os.environ if env is None else env
    if env.get("COA_ENGINE_MALLOC") == "glibc":
        _state = {"tuned": False, "reason": "COA_ENGINE_MALLOC=glibc"}
        return _state
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        _state = {"tuned": False, "reason": "no glibc mallopt in this process (not glibc)"}
        return _state
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    applied, from_env = {}, {}
    for name, (param, variable, value) in SETTINGS.items():
        if variable in env:
            from_env[name] = env[variable]
        elif mallopt(param, value) == 1:
            applied[name] = value
    _state = {"tuned": bool(applied), "applied": applied, "from_env": from_env}
    if not applied:
        _state["reason"] = "every setting came from the environment" if from_env else "mallopt refused them"
    return _state


def huge_pages(env: dict[str, str] | None = None) -> str | None:
    """glibc's `glibc.malloc.hugetlb` tunable as this process was started with it (coa's launcher sets
    it to 1, transparent huge pages: src/model/engine-process.ts), or None. glibc reads tunables only at
    a process's start, so unlike the settings above it cannot be applied here."""
    env = os.environ if env is None else env
    for tunable in env.get("GLIBC_TUNABLES", "").split(":"):
        name, _, value = tunable.partition("=")
        if name == "glibc.malloc.hugetlb":
            return value
    return None


def state() -> dict:
    return {**_state, "hugetlb": huge_pages()}
