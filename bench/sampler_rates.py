"""Generation through the engine's sampler in process, without HTTP: a lone request, n = 32 samples of one
prompt, and 32 concurrent requests (three rounds: the first pays first-time costs), each 128 new ids
at temperature 1 from random prompts, on the engine's device in its chosen dtype, with its threads,
libgomp spin and malloc settings (issue 18; docs/engine.md, "Decode steps from CUDA graphs"). Prints
tok/s, the sampler's decode steps and its decode and admission time, the CUDA graphs captured (on a
GPU) and, for the lone requests, where a step's host time goes: `sample`, `_next_inputs`, the decode
call, `_emit`.

PYTHONPATH=engine python bench/sampler_rates.py [PRESET [DEVICE]]    (default: tiny auto)
  COA_CUDA_GRAPHS=0 for the GPU's op-by-op steps; compare in the same lease, alternated.
"""

import os
import random
import sys
import threading
import time

from coa_engine import allocator, blas

blas.limit_openmp_spin()  # before torch loads libgomp, as `python -m coa_engine` does
allocator.tune_malloc()  # before torch allocates, as the engine does

import torch  # noqa: E402

from coa_engine import graph_step  # noqa: E402
from coa_engine import sampling as sampling_module  # noqa: E402
from coa_engine.sampling import CachedDecoder, Sampler, SamplingParams  # noqa: E402
from coa_engine.worker import Worker  # noqa: E402

PARTS = {}  # host seconds per part of a step, since the last `measure`


def timed(owner, name: str, label: str) -> None:
    real = getattr(owner, name)

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return real(*args, **kwargs)
        finally:
            PARTS[label] = PARTS.get(label, 0.0) + time.perf_counter() - start

    setattr(owner, name, wrapper)


# `_sample_step` calls `sample` through the module's name, and `_next_inputs` and `_emit` through self.
timed(sampling_module, "sample", "sample")
timed(Sampler, "_next_inputs", "_next_inputs")
timed(Sampler, "_emit", "_emit")
timed(CachedDecoder, "decode", "decode call")


def prompt(length: int, seed: int) -> list[int]:
    draw = random.Random(seed)
    return [draw.randrange(256) for _ in range(length)]


def params(seed: int) -> SamplingParams:
    return SamplingParams(max_tokens=128, temperature=1.0, ignore_eos=True, seed=seed)


def main() -> None:
    preset = sys.argv[1] if len(sys.argv) > 1 else "tiny"
    # The engine's threads (`python -m coa_engine`'s defaults): all for torch, one fewer generating.
    threads = len(os.sched_getaffinity(0))
    torch.set_num_threads(threads)
    worker = Worker(
        preset=preset,
        device=sys.argv[2] if len(sys.argv) > 2 else "auto",
        threads=threads,
        generation_threads=max(1, threads - 1),
    )
    sampler = worker.sampler
    graphs = graph_step.state() if worker.device == "cuda" else "not on a CPU"
    print(f"{preset}, {worker.device}, {worker.dtype}, torch {torch.__version__}, CUDA graphs: {graphs}")
    sampler.generate([prompt(32, 0)], SamplingParams(max_tokens=8, seed=0, ignore_eos=True))

    def measure(name: str, run) -> None:
        time.sleep(0.3)  # the last session ends: each measurement starts its own
        PARTS.clear()
        steps, decode, admit = sampler.steps, sampler.decode_seconds, sampler.admit_seconds
        captures = graph_step.state()["captures"]
        start = time.perf_counter()
        tokens = run()
        seconds = time.perf_counter() - start
        steps = sampler.steps - steps
        print(
            f"{name}: {tokens} tokens in {1e3 * seconds:.0f} ms, {tokens / seconds:,.0f} tok/s; {steps} steps, "
            f"decode {1e3 * (sampler.decode_seconds - decode):.0f} ms, admissions "
            f"{1e3 * (sampler.admit_seconds - admit):.0f} ms, graphs captured "
            f"{graph_step.state()['captures'] - captures}",
            flush=True,
        )
        if name.startswith("batch 1"):
            print("  a step's host time, µs: " + ", ".join(f"{k} {1e6 * v / steps:.0f}" for k, v in PARTS.items()))

    def concurrent(round_: int) -> int:
        counts = [0] * 32

        def one(i: int) -> None:
            seed = 32 * round_ + i
            counts[i] = len(sampler.generate([prompt(24 + i, seed)], params(seed))[0].ids)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return sum(counts)

    for seed in (1, 2):
        measure(f"batch 1 (prompt {seed})", lambda: len(sampler.generate([prompt(32, seed)], params(seed))[0].ids))
    measure("n = 32", lambda: sum(len(r.ids) for r in sampler.generate([prompt(32, 3)], params(3), n=32)))
    for round_ in range(3):
        measure(f"32 concurrent, round {round_ + 1}", lambda: concurrent(round_ + 1))
    sampler.close()


if __name__ == "__main__":
    main()
