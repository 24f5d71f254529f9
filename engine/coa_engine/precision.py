"""Where and in which arithmetic to run. On a CPU, bf16 autocast where it is fast (AMX, AVX-512
BF16), fp32 otherwise, decided by timing the model's own projections in both at start-up, so the choice
follows the hardware and the model rather than a flag list. On a CUDA GPU, bf16 wherever the GPU
supports it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import platform
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import torch
import torch.nn.functional as F

from .attention import cache_root, cpu_flags, cpuinfo_line
from .blas import blas_threads, set_blas_threads

# Rows of the timed projections: a slice of a training micro-batch (8,192 tokens), large enough that
# each product runs the kernels training runs, small enough that a measurement takes milliseconds.
TIMED_ROWS = 512


def linear_flops(dtype: torch.dtype, shapes: list[tuple[int, int]], rows: int = TIMED_ROWS, seconds: float | None = None) -> float:
    """Measured FLOP/s of `[rows, in] x [in, out]` for each (in, out) of `shapes`, as training computes
    them: `F.linear` on fp32 weights, under bf16 autocast for bf16 (so each call's weight cast counts).
    After a warm-up: a process's first bf16 calls build their kernels and run up to fifty times slower.
    Timed for at least `seconds`, by default 0.05 s on TIMED_ROWS rows and as much less as there are
    fewer rows: the first look's (PROBE_ROWS) fp32 then times 6 ms, not 50, of every engine's start."""
    seconds = 0.05 * rows / TIMED_ROWS if seconds is None else seconds
    # Its own generator: a fresh model is initialized after the choice, from the seed alone, whether
    # the choice was timed (in however many rounds) or remembered.
    numbers = torch.Generator().manual_seed(0)
    weights = [torch.randn(n_out, n_in, generator=numbers) * 0.02 for n_in, n_out in shapes]
    inputs = [torch.randn(rows, n_in, generator=numbers) for n_in, _ in shapes]

    def run() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
            for x, w in zip(inputs, weights):
                F.linear(x, w)

    for _ in range(2):
        run()
    # At least one timed run: where one run outlasts `seconds` (bf16 without fast kernels: ~0.3 s for
    # `micro`'s projections, ~0.8 s for `tiny`'s on an AVX2 EPYC), it alone is long enough to time.
    reps, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds or reps < 1:
        run()
        reps += 1
    return 2 * rows * sum(i * o for i, o in shapes) * reps / elapsed


def choose_device(requested: str) -> str:
    """`requested` is "auto" (CUDA when torch sees a GPU), "cpu" or "cuda"."""
    if requested == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if requested not in ("cpu", "cuda"):
        raise ValueError(f"device must be auto, cpu or cuda, not {requested!r}")
    if requested == "cuda" and not torch.cuda.is_available():
        raise ValueError("device cuda was asked for, but torch sees no CUDA GPU")
    return requested


@contextlib.contextmanager
def one_thread():
    """torch and OpenBLAS (whose own thread pool ignores torch's setting) on one thread for the block.

    Which dtype's kernels are faster is a property of one core; timing it on several lets a moment of
    load decide instead: on a 2-core machine a busy core stalls every multi-threaded matmul while one
    thread waits for it. With a busy-loop on the other core, six start-ups on two threads measured bf16
    at 4.5-292 and fp32 at 8-98 GFLOP/s (one chose fp32 at 8.4 against 4.5); on one thread bf16 held
    356-363 in five of six."""
    threads, pool = torch.get_num_threads(), blas_threads()
    torch.set_num_threads(1)
    set_blas_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        if pool is not None:
            set_blas_threads(pool)


# Rounds of timing, alternating the two dtypes: at least MIN_ROUNDS, and more (up to MAX_ROUNDS) while
# either dtype's two best rounds differ by more than STABLE, so that a moment of load (which only ever
# slows a round down) cannot decide the arithmetic of a whole run.
MIN_ROUNDS, MAX_ROUNDS, STABLE = 3, 8, 1.25
# Except that bf16 measured this many times slower than fp32 ends the timing at once: on a CPU without
# bf16 kernels (an AVX2 EPYC: ~1.3 against 45-65 GFLOP/s) each bf16 round costs seconds for a choice
# that is already fp32 (the rounds took 4.9 s of every `micro` engine's start there, 12.2 s of
# `tiny`'s). Ten times is beyond what a moment of load does to a one-thread round (`one_thread`);
# a round stalled less than that is outvoted by more rounds as before.
FAR_SLOWER = 10.0
# Before any round, a first look on this many rows: where bf16 has no fast kernels it is as many times
# slower on few rows as on many, and even one bf16 round on TIMED_ROWS took 1.1 s of a `micro` engine's
# start on that EPYC, 3.1 s of `tiny`'s and 9.2 s of `small`'s (on 64 rows: 0.19, 0.44 and 1.1 s).
# A look that finds bf16 PROBE_FAR_SLOWER times slower decides fp32; twice FAR_SLOWER, because few
# rows leave more room for fixed costs per call (oneDNN's ~18 us a call in bf16 on a Xeon).
PROBE_ROWS, PROBE_FAR_SLOWER = 64, 20.0
DTYPES = (("fp32", torch.float32), ("bf16", torch.bfloat16))


def choose_dtype(
    requested: str,
    device: str = "cpu",
    shapes: list[tuple[int, int]] | None = None,
    measure: Callable[[torch.dtype, list[tuple[int, int]], int], float] = linear_flops,
) -> tuple[str, dict[str, float]]:
    """`requested` is "auto", "fp32" or "bf16"; returns the choice and the best GFLOP/s measured for each
    dtype on `shapes`, the model's projections (default: one 256 x 256 product), on one thread (on
    PROBE_ROWS rows where the first look decided, else on TIMED_ROWS)."""
    measured: dict[str, float] = {}
    if requested == "auto" and device == "cuda":
        return ("bf16" if torch.cuda.is_bf16_supported() else "fp32"), measured
    if requested == "auto":
        shapes = shapes or [(256, 256)]
        rounds: dict[str, list[float]] = {"fp32": [], "bf16": []}
        with one_thread():
            probe = {name: measure(dtype, shapes, PROBE_ROWS) / 1e9 for name, dtype in DTYPES}
            if probe["bf16"] * PROBE_FAR_SLOWER < probe["fp32"]:
                return "fp32", probe
            for n in range(MAX_ROUNDS):
                for name, dtype in DTYPES:
                    rounds[name].append(measure(dtype, shapes, TIMED_ROWS) / 1e9)
                best_two = {k: sorted(v)[-2:] for k, v in rounds.items()}
                if n + 1 >= MIN_ROUNDS and all(hi <= STABLE * lo for lo, hi in best_two.values()):
                    break
                if max(rounds["bf16"]) * FAR_SLOWER < max(rounds["fp32"]):
                    break
        measured = {k: max(v) for k, v in rounds.items()}
        # bf16 must win clearly: it also costs accuracy.
        return ("bf16" if measured["bf16"] > 1.2 * measured["fp32"] else "fp32"), measured
    if requested not in ("fp32", "bf16"):
        raise ValueError(f"dtype must be auto, fp32 or bf16, not {requested!r}")
    return requested, measured


# A choice is remembered (`remembered_dtype`) where one dtype measured at least this many times the
# other's rate (or the first look ruled bf16 out): far beyond what a moment of load does to one-thread
# rounds, so the next start of the same model on the same machine would choose the same. The rounds
# cost 0.43 s of every engine's start on a Zen 5 EPYC (bf16 3.3x fp32); closer calls are timed anew
# at every start.
DECISIVE = 2.0


@dataclasses.dataclass(frozen=True)
class DtypeChoice:
    dtype: str
    # GFLOP/s of the model's projections per dtype, one thread (empty where nothing was timed).
    gflops: dict[str, float]
    # When they were timed (ISO 8601; None where nothing was), and whether at an earlier start.
    measured_at: str | None = None
    remembered: bool = False


def remembered_dtype(
    requested: str,
    device: str = "cpu",
    shapes: list[tuple[int, int]] | None = None,
    path: Path | None = None,
    measure: Callable[[torch.dtype, list[tuple[int, int]], int], float] = linear_flops,
) -> DtypeChoice:
    """`choose_dtype`, with "auto" on a CPU answered from `path` (default: dtype-choices.json in coa's
    cache) where an earlier start measured the same shapes on this CPU model and torch decisively
    (DECISIVE); a new decisive measurement is written there. A missing, broken or unwritable file only
    means timing at start, as without it; deleting it has every start time the dtypes again."""
    if requested != "auto" or device != "cpu":
        return DtypeChoice(*choose_dtype(requested, device, shapes, measure))
    path = path or cache_root() / "dtype-choices.json"
    shapes = shapes or [(256, 256)]
    cpu = cpuinfo_line("model name") or platform.processor()
    identity = [torch.__version__, platform.machine(), cpu, cpu_flags(), [list(s) for s in shapes]]
    key = hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:24]
    try:
        entry = json.loads(path.read_text())[key]
        gflops = {str(k): float(v) for k, v in entry["gflops"].items()}
        if entry["dtype"] in ("fp32", "bf16"):
            return DtypeChoice(entry["dtype"], gflops, str(entry["measured_at"]), remembered=True)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    choice, measured = choose_dtype(requested, device, shapes, measure)
    at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    rates = sorted(measured.values())
    if len(rates) == 2 and rates[1] >= DECISIVE * rates[0]:
        _remember(path, key, {"dtype": choice, "gflops": measured, "measured_at": at})
    return DtypeChoice(choice, measured, at)


def _remember(path: Path, key: str, entry: dict) -> None:
    """Adds `entry` under `key`, replacing the file whole (engines starting together each write a
    complete file; the last one's stands)."""
    try:
        try:
            known = json.loads(path.read_text())
            known = known if isinstance(known, dict) else {}
        except (OSError, ValueError):
            known = {}
        known[key] = entry
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}")
        try:
            partial.write_text(json.dumps(known, indent=1))
            os.replace(partial, path)
        finally:
            partial.unlink(missing_ok=True)
    except OSError:
        pass


# torch.autocast contexts already built, per thread and device type, that are not entered now.
_idle_autocasts = threading.local()


@contextlib.contextmanager
def autocast(dtype: str, device_type: str = "cpu"):
    """The context that model code runs in on `device_type` ("cpu" or "cuda"): bf16 autocast for
    "bf16"; for "fp32" the state as it is; "off" turns autocast off inside (for code that casts for
    itself, as `decode_tokens` does).

    Each thread reuses the `torch.autocast` objects it built (one per level of nesting): building one
    looks for torch_xla on disk (`importlib.util.find_spec` over sys.path), 53 us here against 2 us to
    enter and leave a built one, and the sampler enters this context for every decode step (a `tiny`
    step at batch 1 takes about 1.5 ms). An object is reusable because its `__enter__` saves and its
    `__exit__` restores the autocast state each time."""
    if dtype == "fp32":
        yield
        return
    if dtype not in ("bf16", "off"):
        raise ValueError(f"autocast takes bf16, fp32 or off, not {dtype!r}")
    idle = _idle_autocasts.__dict__.setdefault((device_type, dtype), [])
    context = idle.pop() if idle else torch.autocast(device_type, dtype=torch.bfloat16, enabled=dtype == "bf16")
    with context:
        yield
    idle.append(context)
