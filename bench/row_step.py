"""A decode step of a few rows in process: the native step (engine/coa_engine/row_step.c) against the
TorchScript step with the fused attention, alternated, in fp32 or bf16 (bf16 matrices and cache, as a bf16
engine decodes), on THREADS generation threads (torch's count, which the native step takes too; the
fused attention on as many), back to back or with GAP_MS of idle time between steps such as sampling
leaves (issue 18; docs/engine.md, "The native step of a few rows"). A fresh model of each preset; ROWS
rows (each count given, as ROWSxIDS for several new ids a row, a drafted step's) at 100-600 positions,
one new id each unless given; 4 rounds of 50 timed steps per path;
prints best / median ms and the largest logit difference between the paths. In fp32 with the system
OpenBLAS's sgemm, a step of `row_step.GEMM_IDS` ids or more also runs natively with its projections
through `gemv` instead ("native, gemv"; docs/engine.md, "The whole fp32 step in native code").

PYTHONPATH=engine python bench/row_step.py [THREADS [PRESETS [GAP_MS [DTYPE [ROWS]]]]]
  e.g. 1 micro,tiny 0 fp32 1,4,16,32    or    15 small 0 bf16 32,32x5,64x5
"""

import contextlib
import statistics
import sys
import time
from unittest import mock

from coa_engine import allocator, blas

blas.limit_openmp_spin()  # before torch loads libgomp, as `python -m coa_engine` does
allocator.tune_malloc()  # before torch allocates, as the engine does

import torch  # noqa: E402

from coa_engine import attention, row_step  # noqa: E402
from coa_engine import model as model_module  # noqa: E402
from coa_engine.model import DecodeWeights, KVCache, Transformer, preset_config  # noqa: E402
from coa_engine.precision import autocast  # noqa: E402


def path_of(name: str) -> contextlib.ExitStack:
    """The step `name` runs: "native" (for any rows), "native, gemv" (its projections never through
    sgemm), "TorchScript"."""
    stack = contextlib.ExitStack()
    if name == "TorchScript":
        stack.enter_context(mock.patch.object(DecodeWeights, "row_step", lambda self: None))
        return stack
    stack.enter_context(mock.patch.dict(model_module.ROW_STEP_IDS, dict.fromkeys(model_module.ROW_STEP_IDS, 1 << 20)))
    stack.enter_context(mock.patch.object(model_module, "PAIRS_IDS_BESIDE_AMX", 1 << 20))
    if name == "native, gemv":
        stack.enter_context(mock.patch.object(row_step, "GEMM_IDS", 1 << 20))
    return stack


def timed_steps(model, cache, ids, gap: float, name: str, dtype: str) -> tuple[list[float], torch.Tensor]:
    times, start_len = [], cache.lens.clone()
    with torch.no_grad(), autocast(dtype), path_of(name):
        for i in range(51):
            idle = time.perf_counter() + gap
            while time.perf_counter() < idle:
                pass
            start = time.perf_counter()
            logits = model.decode(ids, cache)
            if i:  # the first is a warm-up
                times.append(1e3 * (time.perf_counter() - start))
    cache.lens = start_len
    return times, logits


def main() -> None:
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    presets = sys.argv[2].split(",") if len(sys.argv) > 2 else ["micro", "tiny", "small"]
    gap = float(sys.argv[3]) / 1e3 if len(sys.argv) > 3 else 0.0
    dtype = sys.argv[4] if len(sys.argv) > 4 else "fp32"
    cache_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype]
    shapes = [tuple(map(int, f"{s}x1".split("x")[:2])) for s in sys.argv[5].split(",")] if len(sys.argv) > 5 else [(1, 1)]
    torch.set_num_threads(threads)
    blas.set_blas_threads(threads)  # as generation sets OpenBLAS's own pool
    attention.use_threads(threads)
    kernel = attention.attention_kernel()
    print(f"torch {torch.__version__}, {threads} threads, {gap * 1e3:g} ms between steps")
    if kernel is None:
        print(f"no native kernels here: {attention.state()['reason']}")
        return
    for preset in presets:
        torch.manual_seed(0)
        model = Transformer(preset_config(preset, 281)).eval()
        for rows, width in shapes:
            cache = KVCache.empty(model.config, rows, 600 + 52 * width + 100, cache_dtype)  # 51 steps a path
            with torch.no_grad(), autocast(dtype):
                model(torch.randint(3, 281, (rows, 8)), cache)
            cache.lens = torch.randint(100, 600, (rows,))
            ids = torch.randint(3, 281, (rows,) if width == 1 else (rows, width))
            names = ["native", "TorchScript"]
            if dtype == "fp32" and blas.sgemm() is not None and rows * width >= row_step.GEMM_IDS:
                names.insert(1, "native, gemv")
            times: dict[str, list[float]] = {name: [] for name in names}
            logits = {}
            for _ in range(4):
                for name in times:
                    step_times, logits[name] = timed_steps(model, cache, ids, gap, name, dtype)
                    times[name] += step_times
            diff = (logits["native"].float() - logits["TorchScript"].float()).abs().max().item()
            cells = " | ".join(f"{n} {min(x):.3f} / {statistics.median(x):.3f} ms" for n, x in times.items())
            print(f"{preset} {rows} rows x {width} ids, {dtype}: {cells} | largest logit difference {diff:.2g}", flush=True)


if __name__ == "__main__":
    main()
