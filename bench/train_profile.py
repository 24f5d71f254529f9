"""Where a training step's time goes: `Trainer.sft` on random ids in the shape `npm run bench -- engine`
trains each preset with (`small` 4x512, `tiny` 8x512, `micro` 8x256), in process on every core as the
engine's model thread runs it; prints the step's times, then torch.profiler's table of three steps by
operator and by operator and input shapes (docs/engine.md, "The fused attention over bf16 caches").

PYTHONPATH=engine python bench/train_profile.py PRESET DTYPE   e.g. small bf16
"""

import os
import sys
import time

from coa_engine import allocator, blas

blas.limit_openmp_spin()  # before torch loads libgomp, as `python -m coa_engine` does
allocator.tune_malloc()  # before torch allocates, as the engine does

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from coa_engine.model import Transformer, preset_config  # noqa: E402
from coa_engine.sampling import pin_threads  # noqa: E402
from coa_engine.train import Sequence, Trainer  # noqa: E402

SHAPES = {"micro": (8, 256), "tiny": (8, 512), "small": (4, 512)}  # bench/engine.ts's TRAIN


def main() -> None:
    preset, dtype = sys.argv[1], sys.argv[2]
    rows, length = SHAPES[preset]
    torch.manual_seed(0)
    trainer = Trainer(Transformer(preset_config(preset, 281)), dtype)  # the bench's byte vocabulary
    pin_threads(os.cpu_count() or 1)
    g = torch.Generator().manual_seed(1)
    seqs = [
        Sequence(ids=torch.randint(3, 281, (length,), generator=g).tolist(), mask=[0] + [1] * (length - 1))
        for _ in range(rows)
    ]

    def step() -> float:
        start = time.perf_counter()
        trainer.sft(seqs, micro_batch_tokens=rows * length)
        return 1e3 * (time.perf_counter() - start)

    for _ in range(3):  # warm-up: first shapes, allocator
        step()
    times = sorted(step() for _ in range(6))
    print(f"{preset} {rows}x{length} {dtype}, torch {torch.__version__}, {torch.get_num_threads()} threads: "
          f"step {times[0]:.1f} ms best, {times[len(times) // 2]:.1f} median", flush=True)  # fmt: skip
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(3):
            step()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=28))
    by_shape = prof.key_averages(group_by_input_shape=True)
    print(by_shape.table(sort_by="self_cpu_time_total", row_limit=22, max_name_column_width=28, max_shapes_column_width=70))


if __name__ == "__main__":
    main()
