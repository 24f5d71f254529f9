"""Whole decode steps in process, the fused attention kernel (engine/coa_engine/attention.c) against the
engine's torch-ops attention, alternated, in fp32 and bf16 (issue 18; docs/engine.md, "The fused
attention over bf16 caches"). A fresh model of each preset, a cache of random keys and values with rows
at 300-1,000 positions, 4 rounds of 5 timed steps per path; prints best / median ms and the largest
logit difference between the paths. In fp32 the kernel's steps are the native step of the whole model
(row_step.c: a row's, and with the system OpenBLAS's sgemm every step; `bench/row_step.py` and
`bench/prompt_steps.py` time it against the TorchScript step with the kernel).

PYTHONPATH=engine python bench/decode_steps.py [THREADS [PRESETS]]   e.g. 15 micro,tiny
"""

import statistics
import sys
import time
from unittest import mock

from coa_engine import allocator, blas

blas.limit_openmp_spin()  # before torch loads libgomp, as `python -m coa_engine` does
allocator.tune_malloc()  # before torch allocates, as the engine does

import torch  # noqa: E402

from coa_engine import attention  # noqa: E402
from coa_engine.model import KVCache, Transformer, preset_config  # noqa: E402
from coa_engine.precision import autocast  # noqa: E402

SHAPES = ((32, 1), (25, 5), (1, 1))  # rows x new ids a row: a batch, a drafted batch, batch 1


def timed_steps(model, cache, lens, ids, dtype, kernel) -> tuple[list[float], torch.Tensor]:
    times = []
    with torch.no_grad(), autocast(dtype), mock.patch.object(attention, "attention_kernel", lambda: kernel):
        for i in range(6):
            cache.lens = lens.clone()
            start = time.perf_counter()
            logits = model.decode(ids, cache)
            if i:  # the first is a warm-up
                times.append(1e3 * (time.perf_counter() - start))
    return times, logits.float()


def main() -> None:
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    presets = sys.argv[2].split(",") if len(sys.argv) > 2 else ["micro", "tiny"]
    torch.set_num_threads(threads)
    kernel = attention.attention_kernel()
    print(f"torch {torch.__version__}, {threads} threads, fused kernel {'built' if kernel else attention.state()}")
    if kernel is None:
        return
    g = torch.Generator().manual_seed(0)
    for preset in presets:
        model = Transformer(preset_config(preset, 512)).eval()
        for dtype in ("bf16", "fp32"):
            cache_dtype = torch.bfloat16 if dtype == "bf16" else torch.float32
            for rows, t in SHAPES:
                lens = torch.randint(300, 1000, (rows,), generator=g)
                cache = KVCache.empty(model.config, rows, 1100, cache_dtype)
                for k, v in zip(cache.keys, cache.values):
                    k.copy_(torch.randn(k.shape, generator=g))
                    v.copy_(torch.randn(v.shape, generator=g))
                ids = torch.randint(3, 500, (rows, t) if t > 1 else (rows,), generator=g)
                times = {"kernel": [], "torch ops": []}
                logits = {}
                for _ in range(4):
                    for name, loaded in (("kernel", kernel), ("torch ops", None)):
                        step_times, logits[name] = timed_steps(model, cache, lens, ids, dtype, loaded)
                        times[name] += step_times
                diff = (logits["kernel"] - logits["torch ops"]).abs().max().item()
                cells = " | ".join(f"{n} {min(x):.2f} / {statistics.median(x):.2f} ms" for n, x in times.items())
                print(f"{preset} {dtype} {rows} rows x {t} ids: {cells} | largest logit difference {diff:.2g}", flush=True)


if __name__ == "__main__":
    main()
