"""Decode steps of an agent evaluation's shape in process, stop 54's two changes and stop 55's each
against the step without it, interleaved (docs/engine.md, "A turn's new ids fed within the decode step",
"The whole fp32 step in native code"): 32 rows at 200-950 positions feeding 1-5 ids (a drafted batch) on
a fresh model, fp32, the fused kernel on the engine's threads.

- prompt: a 33rd row's 121 new ids after 410 cached fed within the step (`last_only`), against the
  step without it followed by that row's own extend.
- shared: every row's first 144 positions read from one copy (`SharedPrefix`), against each row's own;
  four caches in turn, so that each step's keys and values come from memory as an evaluation's do.
- native: the step with both (the prompt and the shared prefix) as one native call, its products by the
  BLAS's sgemm (`RowStep.batches`), against the TorchScript step (where there is sgemm).

Prints best / median ms of each and whether the outputs agree (the shared prefix: bit for bit; the native
step within a few fp32 ulps).

PYTHONPATH=engine python bench/prompt_steps.py [ATTENTION_THREADS [PRESETS [REPEATS]]]   e.g. 2 micro,tiny 100
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
from coa_engine import model as model_module  # noqa: E402
from coa_engine.model import KVCache, SharedPrefix, Transformer, preset_config  # noqa: E402

ROWS, SHARED, NEW, CACHED = 32, 144, 121, 410


def timed(pairs: dict, repeats: int) -> dict[str, list[float]]:
    """Each named call `repeats` times, the names in turn (the order flipped every round)."""
    times: dict[str, list[float]] = {name: [] for name in pairs}
    names = list(pairs)
    for i in range(repeats):
        for name in names if i % 2 else names[::-1]:
            start = time.perf_counter()
            pairs[name](i)
            times[name].append(1e3 * (time.perf_counter() - start))
    return times


def line(preset: str, what: str, times: dict[str, list[float]], agreement: str) -> None:
    cells = " | ".join(f"{n} {min(x):.2f} / {statistics.median(x):.2f} ms" for n, x in times.items())
    print(f"{preset} {what}: {cells} | {agreement}", flush=True)


def main() -> None:
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    presets = sys.argv[2].split(",") if len(sys.argv) > 2 else ["micro", "tiny"]
    repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    torch.set_num_threads(1)  # generation's one thread beside the client, as the engine runs it
    blas.set_blas_threads(1)
    attention.use_threads(threads)
    if attention.attention_kernel() is None:
        print(f"no fused kernel here ({attention.state()}): nothing to compare")
        return
    print(f"torch {torch.__version__}, the fused attention on {threads} threads, {repeats} steps of each")
    g = torch.Generator().manual_seed(0)
    for preset in presets:
        model = Transformer(preset_config(preset, 2048)).eval()
        weights = model.decode_weights()
        lens = torch.randint(200, 950, (ROWS,), generator=g)
        counts = torch.randint(1, 6, (ROWS,), generator=g).tolist()
        caches = []
        for _ in range(4):
            cache = KVCache.empty(model.config, ROWS + 1, 1400, torch.float32)
            for kv in (*cache.keys, *cache.values):
                kv.copy_(torch.randn(kv.shape, generator=g))
                kv[:, :, :SHARED] = kv[0, :, :SHARED]  # every row holds the copy's bits
            caches.append(cache)
        copies = [SharedPrefix.of_row(c, 0, list(range(SHARED))) for c in caches]
        ids = torch.randint(3, 2048, (ROWS + 1, NEW), generator=g)
        batch, prompt = [*counts, 0], [*counts, NEW]
        one = KVCache.empty(model.config, 1, 1400, torch.float32)
        for mine, theirs in zip((*one.keys, *one.values), (*caches[0].keys, *caches[0].values)):
            mine.copy_(theirs[ROWS:])

        def step(i: int, fed: list[int], starts: torch.Tensor, last_only=None, shared=None):
            cache = caches[i % 4]
            cache.lens = starts.clone()
            rows = [SHARED] * ROWS + [0] if shared else None
            return model.decode(ids, cache, weights, fed, last_only, copies[i % 4] if shared else None, rows)

        before, with_prompt = torch.cat([lens, torch.tensor([0])]), torch.cat([lens, torch.tensor([CACHED])])

        def apart(i: int):
            step(i, batch, before)
            one.lens = torch.tensor([CACHED])
            return model.extend(ids[ROWS:], one, CACHED, last=True)

        def within(i: int):
            return step(i, prompt, with_prompt, [False] * ROWS + [True])

        with torch.inference_mode():
            times = timed({"step, then its extend": apart, "within the step": within}, repeats)
            diff = (apart(0)[0] - within(0)[-1]).abs().max().item()
            line(preset, f"{ROWS} rows and a prompt of {NEW} new ids", times, f"its last logits differ by {diff:.2g}")
            own, shared = (lambda i: step(i, batch, before)), (lambda i: step(i, batch, before, shared=True))
            times = timed({"own": own, "shared": shared}, repeats)
            same = torch.equal(own(0), shared(0))
            line(preset, f"{ROWS} rows sharing {SHARED} positions", times, f"identical logits: {same}")
            if weights.row_step() is None or not weights.row_step().batches:
                print(f"{preset}: no native batched step here (fp32 with the system OpenBLAS's sgemm)")
                continue
            torchscript = mock.patch.object(model_module.DecodeWeights, "row_step", lambda self: None)

            def both(i: int):
                return step(i, prompt, with_prompt, [False] * ROWS + [True], shared=True)

            def scripted(i: int):
                with torchscript:
                    return both(i)

            times = timed({"TorchScript": scripted, "native": both}, repeats)
            diff = (scripted(0) - both(0)).abs().max().item()
            line(preset, "both, the step in TorchScript or native code", times, f"logits differ by {diff:.2g}")


if __name__ == "__main__":
    main()
