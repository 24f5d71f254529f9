"""A decode step of a few rows (each its next id, or a speculative step's last id and draft) on a CPU, in
fp32 or bf16, as one call of the engine's native code (row_step.c, built with attention.c by
`attention.build`), and any step beside the fused attention in fp32 where torch's BLAS is the system
OpenBLAS (its projections by that BLAS's sgemm) or in bf16 on a CPU with AVX512-BF16 (by dot products of
pairs that share each load of the weights among several ids: row_step.c's `gemv_pairs`; beside AMX,
steps of up to `model.PAIRS_IDS_BESIDE_AMX` ids).

Batch-1 decoding (a lone request, an agent's turn while nothing else runs) was bound by dispatch, not
by reading the weights: a `tiny` step took 2.2-2.8 ms through TorchScript on a 2-core AVX2 EPYC, of
which reading 17 MB of weights needs about 1 (docs/engine.md). `Transformer.decode` takes this path for
a step that feeds at most `model.ROW_STEP_IDS` ids wherever the fused attention runs, and with sgemm
or AVX512-BF16 (`RowStep.batches`) every step there: the TorchScript step's ~200 small ops cost about a
quarter of an evaluation's batched fp32 step (docs/engine.md, "The whole fp32 step in native code"), and
a batch's bf16 step of `tiny` on a Zen 5 EPYC took 3-4x the native one ("bf16 steps in pairs"). Every
other step, and GPUs, run `decode_tokens`.
"""

from __future__ import annotations

import ctypes

import torch
import torch.nn.functional as F

from . import attention, blas
from .spare_cores import SPARE

# Columns per block of a packed matrix (BLOCK in row_step.c).
BLOCK = 64

# Ids from which a step's projections run through sgemm rather than `gemv` (where there is sgemm; the
# output matrix's, selected ids): each id multiplies by every packed block once more from the core's L2,
# where the BLAS's panels share each load among all ids (and pack the whole matrix first).
GEMM_IDS = 16


def packed(weight: torch.Tensor, pairs: bool = False) -> torch.Tensor:
    """An [in, out] matrix as [blocks, in, BLOCK]: each block of BLOCK columns one contiguous stream, the
    last padded with zeros (row_step.c's `gemv` reads it so). With `pairs` (bf16 where the kernels use
    AVX512-BF16: `gemv_pairs`) as [blocks, in / 2, BLOCK, 2], each column's two rows side by side (an odd
    `in` padded with a row of zeros)."""
    rows, columns = weight.shape
    blocks = -(-columns // BLOCK)
    if not pairs:
        return F.pad(weight, (0, blocks * BLOCK - columns)).view(rows, blocks, BLOCK).transpose(0, 1).contiguous()
    even = F.pad(weight, (0, blocks * BLOCK - columns, 0, rows % 2))
    return even.view(-1, 2, blocks, BLOCK).permute(2, 0, 3, 1).contiguous()


def pointers(tensors: list[torch.Tensor]) -> ctypes.Array:
    return (ctypes.c_void_p * len(tensors))(*[t.data_ptr() for t in tensors])


class RowStep:
    """One model's weights laid out for `coa_row_step`, built once per change of the weights (with
    `DecodeWeights`): its matrices packed in the decode dtype (a copy: 4 bytes a parameter in fp32, 2 in
    bf16), its norms, embedding and rotary tables as they are. Holds every tensor it points the kernel
    at."""

    def __init__(
        self,
        layers: list[tuple[torch.Tensor, ...]],
        output: torch.Tensor,
        norms: list[torch.Tensor],
        embed: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor],
        heads: int,
        eps: float,
    ):
        """`layers` and `output`: the decode layout's [in, out] matrices (`DecodeWeights`), all fp32 or all
        bf16: the step's arithmetic, and the cache's dtype it then takes."""
        self.dtype = output.dtype
        kernel = attention.attention_kernel()
        # bf16 matrices in pairs of rows where the kernels use AVX512-BF16 (`coa_row_step_pairs`).
        self.pairs = self.dtype == torch.bfloat16 and kernel is not None and bool(kernel.coa_row_step_pairs())
        with torch.no_grad():
            self.matrices = [packed(w, self.pairs) for ws in layers for w in ws] + [packed(output, self.pairs)]
            self.tensors = [t.detach().contiguous() for t in (*norms, embed, *rope)]
        self.norms, (self.embed, self.cos, self.sin) = self.tensors[: len(norms)], self.tensors[len(norms) :]
        self._matrices, self._norms = pointers(self.matrices), pointers(self.norms)
        # Steps of any number of ids: the same matrices unpacked, for sgemm (fp32; the decode layout's
        # own tensors, not copies).
        self._sgemm = blas.sgemm() if self.dtype == torch.float32 else None
        self.plain = [w for ws in layers for w in ws] + [output] if self._sgemm else []
        self._plain = pointers(self.plain) if self._sgemm else None
        self.layers, self.heads, self.eps = len(layers), heads, eps
        self.dim, self.vocab = int(embed.shape[1]), int(embed.shape[0])
        self.hidden = int(layers[0][3].shape[0])  # down: [hidden, dim]

    @property
    def batches(self) -> bool:
        """Whether this step takes any number of ids (fp32 with sgemm; bf16 in pairs without AMX), not
        only a few (`model.ROW_STEP_IDS`; in pairs beside AMX, `model.PAIRS_IDS_BESIDE_AMX`): AMX's tiles
        run TorchScript's bf16 products, which win from 160 ids of `small`, 320 of `tiny` (docs/engine.md,
        "Batches in pairs on AMX too")."""
        return self._sgemm is not None or (self.pairs and not attention.has_amx())

    # Threads: generation's (torch's count on the model thread, `--generation-threads`), not all of the
    # fused attention's: an OpenMP step whose second thread shares a core with the client waits for it
    # at every barrier (a `tiny` step with one core kept busy, 2 threads: median 4.8-5.8 ms, worse than
    # TorchScript; 1 thread: 1.7-2.2 ms; docs/engine.md). A lone row takes the fused attention's (all of
    # `--threads`): nothing else is decoding, so its client is waiting for it rather than running beside
    # it (a lone `tiny` request on 2 cores: 404-416 tok/s on one thread, 624-1,061 on two). So does a
    # batch while the cores beyond generation's are idle (`spare_cores`: a server whose clients wait for
    # it, or run elsewhere): 32 `tiny` requests' decoding on a 2-core Zen 5, 0.36-0.45 -> 0.22-0.33 s.
    # With sgemm the products run on the BLAS's pool (sized to generation's, `blas.set_blas_threads`)
    # and the attention on the fused attention's threads, whose calls of 16 MiB or more a batch reaches.
    def __call__(
        self,
        rows: list[int],
        ids: list[list[int]],
        starts: list[int],
        keys: list[torch.Tensor],
        values: list[torch.Tensor],
        select: list[int] | None = None,
        shared: tuple[list[torch.Tensor], list[torch.Tensor], list[int]] | None = None,
    ) -> torch.Tensor:
        """Logits [sum of len(ids[i]), vocab], row after row, of cache row rows[i] feeding ids[i] from
        position starts[i] on (one new id, a speculative step's last id and its draft, or a prompt's new
        ids), in a cache whose layers' keys and values are `keys` and `values` ([rows, heads, positions,
        head_dim] in the step's dtype, each head's positions contiguous, every layer laid out alike:
        `KVCache`); the ids' keys and values are written there and each row's positions before them read.
        With `select`, only the logits of those flat positions (of the sum of len(ids[i])), in its order.
        With `shared` (per layer the keys and values of a prefix [heads, positions, head_dim], and per
        row the positions it reads there: `SharedPrefix`), row i's first shared[2][i] positions come from
        there. Logits in fp32, holding the step dtype's values (a bf16 step's are exact in fp32): the
        sampler takes fp32, and casting to bf16 and back copied them twice a step (0.15 s of the demo's
        evaluation)."""
        d = self.dim // self.heads
        end = min(self.cos.shape[0], keys[0].shape[2], values[0].shape[2])
        flat = [i for ids_ in ids for i in ids_]
        fits = (
            len(rows) == len(ids) == len(starts) >= 1
            and all(kv.stride(3) == 1 and kv.stride(2) == d for kv in (keys[0], values[0]))
            and keys[0].dtype == values[0].dtype == self.dtype
            and all(a < b for a, b in zip(rows, rows[1:]))  # each row once
            and 0 <= rows[0]
            and rows[-1] < min(keys[0].shape[0], values[0].shape[0])
            and all(ids_ and 0 <= start and start + len(ids_) <= end for ids_, start in zip(ids, starts))
            and 0 <= min(flat) <= max(flat) < self.vocab  # builtins: a batch feeds hundreds of ids
            and (select is None or (select and 0 <= min(select) <= max(select) < len(flat)))
            and (shared is None or self._fits_shared(shared, keys[0], starts))
        )
        if not fits:
            where = f"rows {rows} feeding {ids} from positions {starts} of a {keys[0].dtype} cache"
            raise ValueError(f"row step: {where} do not fit the model ({self.dtype}) or the cache")
        longs = ctypes.c_int64 * len(rows)
        logits = torch.empty((len(flat) if select is None else len(select), self.vocab))
        prefix = (None, None, None, 0)
        if shared is not None:
            prefix = (pointers(shared[0]), pointers(shared[1]), longs(*shared[2]), shared[0][0].stride(0))
        chosen = (None, 0) if select is None else ((ctypes.c_int64 * len(select))(*select), len(select))
        threads = torch.get_num_threads()
        if attention.kernel_threads() > threads and (len(rows) == 1 or SPARE.idle()):  # (above)
            threads = attention.kernel_threads()
        status = attention.attention_kernel().coa_row_step(
            (ctypes.c_int64 * len(flat))(*flat), len(rows), longs(*rows), longs(*map(len, ids)), longs(*starts),
            self.embed.data_ptr(), self._matrices, self._plain, self._sgemm, GEMM_IDS, self._norms, self.cos.data_ptr(),
            self.sin.data_ptr(), pointers(keys), pointers(values), keys[0].stride(0), keys[0].stride(1),
            values[0].stride(0), values[0].stride(1), *prefix, self.layers, self.dim, self.heads, self.hidden,
            self.vocab, self.eps, *chosen, logits.data_ptr(), threads, attention.kernel_threads(),
            int(self.dtype == torch.bfloat16),
        )  # fmt: skip
        if status != 0:
            raise MemoryError("the native decode step could not allocate its buffers")
        return logits

    def _fits_shared(self, shared, keys: torch.Tensor, starts: list[int]) -> bool:
        """Whether a shared prefix fits the cache and rows as the kernel reads it: each layer's as the
        fused attention takes it (`attention.shared_prefix_fits`), all of one shape (the kernel takes one
        head stride for every layer)."""
        sk, sv, counts = shared
        return (
            len(sk) == len(sv) == self.layers
            and len(counts) == len(starts)
            and all(
                k.shape == sk[0].shape and attention.shared_prefix_fits(k, v, keys, counts, starts)
                for k, v in zip(sk, sv)
            )
        )
