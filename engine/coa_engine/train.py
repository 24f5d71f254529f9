"""Training steps: supervised fine-tuning and a clipped policy-gradient update, each one AdamW step
over a batch split into micro-batches (gradients accumulate, so the result does not depend on the
split). Position t of a sequence is trained when loss_mask[t] = 1: the model predicts ids[t] from
ids[:t]. Logprobs are taken under log_softmax(logits / temperature), exactly as sampling reports them.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import asdict, dataclass, fields

import torch
from torch.nn import functional as F

from .model import query_blocks
from .precision import autocast
from .tokenizer import PAD_ID

# A micro-batch whose attention scores would hold more than this recomputes its blocks in the
# backward pass instead of storing them. Below it, storing is faster: recomputing costs a third more
# arithmetic, which a CPU pays in full.
ACTIVATION_BUDGET_BYTES = 6 * 2**30


def attention_bytes(config, rows: int, length: int) -> int:
    """What the stored attention scores of a micro-batch take (scores, softmax and its mask, fp32):
    each block of queries stores its scores over the keys up to its last query (`query_blocks`)."""
    entries = sum((last - first) * last for first, last in query_blocks(length))
    return 3 * 4 * rows * config.n_heads * entries * config.n_layers


@dataclass
class OptimizerConfig:
    lr: float = 3e-4
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    # Upper bound on rows x padded length per forward pass.
    micro_batch_tokens: int = 8192

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class Sequence:
    ids: list[int]
    mask: list[int]
    # Aligned with ids; entries where mask is 0 are ignored.
    advantages: list[float] | None = None
    old_logprobs: list[float] | None = None
    ref_logprobs: list[float] | None = None


@dataclass(frozen=True)
class PolicyParams:
    clip_low: float = 0.2
    clip_high: float = 0.2
    agg: str = "token-mean"
    kl_coef: float = 0.0
    temperature: float = 1.0


def micro_batches(lengths: list[int], budget: int) -> list[list[int]]:
    """Indices grouped longest first so that rows x longest length stays within `budget`."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    groups: list[list[int]] = []
    for i in order:
        if groups and (len(groups[-1]) + 1) * lengths[groups[-1][0]] <= budget:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def padded(rows: list[list], fill, device: torch.device | str = "cpu") -> torch.Tensor:
    width = max(len(r) for r in rows)
    dtype = torch.long if isinstance(fill, int) else torch.float32
    return torch.tensor([list(r) + [fill] * (width - len(r)) for r in rows], dtype=dtype, device=device)


def target_logprobs(model, ids: torch.Tensor, temperature: float, dtype: str, at: torch.Tensor | None = None):
    """Logprob of ids[:, 1:] given their prefixes, and the log-distributions they come from. With
    `at` (a bool mask over ids[:, 1:]), only for the targets it marks, flattened ([N] and [N, V]):
    a loss over the model's own tokens then skips the vocabulary projection and softmax of every
    prompt, observation and pad position (most of a trajectory's)."""
    with autocast(dtype, ids.device.type):
        logits = model(ids[:, :-1], at=at)
    logits = logits.float()
    # Dividing by 1 changes no bit but costs a pass over [rows, length, vocab] and its backward.
    logp = F.log_softmax(logits if temperature == 1 else logits / temperature, dim=-1)
    targets = ids[:, 1:] if at is None else ids[:, 1:][at]
    return logp.gather(-1, targets[..., None])[..., 0], logp


# The optimizer's options that choose its implementation, not its arithmetic.
KERNEL_OPTIONS = ("fused", "foreach")


def adamw(groups: list[dict], **options) -> torch.optim.AdamW:
    """AdamW with its fused kernel where this torch has one for the parameters' device (CPUs since
    torch 2.4, CUDA since 2.0): one pass over each parameter's weights, gradient and moments instead of
    a pass per operation. On a 16-core Xeon with AMX (torch 2.11) the foreach form's per-tensor
    operations took ~20 ms of `small`'s 237 ms training step (fused: 6.4 ms). Elsewhere (Debian's torch
    1.13), the foreach form. A fused step leaves the parameters' version counters as they were (torch
    2.11), so `Trainer` counts its updates on the model for `weights_version`."""
    try:
        return torch.optim.AdamW(groups, fused=True, **options)
    except (TypeError, RuntimeError, ValueError):  # no `fused` argument, or none for this device
        return torch.optim.AdamW(groups, foreach=True, **options)


def clip_gradients(grads: list[torch.Tensor], max_norm: float) -> float:
    """Scales `grads` in place so that their global L2 norm is at most `max_norm`, as
    `torch.nn.utils.clip_grad_norm_` does, and returns the norm before scaling.

    Each tensor's sum of squares is a BLAS dot product, where torch's own clipping takes a
    `linalg.vector_norm` per tensor, which is not spread over a CPU's threads: `small`'s gradients on a
    16-core Xeon, 1.2 ms against 10.5 ms (a single core: 11 against 13 ms). The scaling is skipped when
    it would multiply by 1 (torch multiplies anyway, to avoid a device sync this needs for the result)."""
    squares = [
        torch.dot(g.reshape(-1), g.reshape(-1)) if g.dtype == torch.float32 else g.float().pow(2).sum() for g in grads
    ]
    norm = torch.stack(squares).sum().sqrt()
    scale = max_norm / (norm + 1e-6)
    if float(scale) < 1:
        for g in grads:
            g.mul_(scale.to(g.dtype))
    return float(norm)


class Trainer:
    def __init__(self, model, dtype: str, config: OptimizerConfig | None = None):
        self.model, self.dtype = model, dtype
        self.config = config or OptimizerConfig()
        self.device = next(model.parameters()).device
        # The engine's own model's shape; None for a Hugging Face model (`HFCausalLM`), which never
        # recomputes attention blocks in the backward pass (the engine's own attention does).
        self.shape = getattr(model, "config", None)
        decay = [p for p in model.parameters() if p.dim() >= 2]
        rest = [p for p in model.parameters() if p.dim() < 2]
        self.optimizer = adamw(
            [{"params": decay}, {"params": rest, "weight_decay": 0.0}],
            lr=self.config.lr,
            betas=(self.config.beta1, self.config.beta2),
            eps=self.config.eps,
            weight_decay=self.config.weight_decay,
        )
        self.step = 0
        self.reference = None
        self.tokens_trained = 0
        self.seconds_trained = 0.0

    def configure(self, **changes) -> OptimizerConfig:
        known = {f.name for f in fields(OptimizerConfig)}
        for key, value in changes.items():
            if key not in known:
                raise ValueError(f"unknown optimizer setting {key!r}; known: {', '.join(sorted(known))}")
            setattr(self.config, key, value)
        for i, group in enumerate(self.optimizer.param_groups):
            group["lr"] = self.config.lr
            group["betas"] = (self.config.beta1, self.config.beta2)
            group["eps"] = self.config.eps
            group["weight_decay"] = self.config.weight_decay if i == 0 else 0.0
        return self.config

    def load_optimizer_state(self, state: dict) -> None:
        """The moments and step counts of a saved optimizer. The saved groups' choice of kernel (fused
        or foreach) is not restored: it is this torch's (`adamw`), and a checkpoint may come from another."""
        kernels = [{k: g[k] for k in KERNEL_OPTIONS if k in g} for g in self.optimizer.param_groups]
        self.optimizer.load_state_dict(state)
        for group, chosen in zip(self.optimizer.param_groups, kernels):
            for k in KERNEL_OPTIONS:
                group.pop(k, None)
            group.update(chosen)

    def set_reference(self) -> None:
        """Freezes a copy of the current weights as the KL reference."""
        self.reference = copy.deepcopy(self.model).eval().requires_grad_(False)

    def sft(self, seqs: list[Sequence], lr: float | None = None, micro_batch_tokens: int | None = None) -> dict:
        total = self._count_targets(seqs)
        loss_sum = 0.0

        def loss_fn(part: list[Sequence], ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            nonlocal loss_sum
            on = mask > 0
            lp, _ = target_logprobs(self.model, ids, 1.0, self.dtype, on)
            loss = -(lp * mask[on]).sum() / total
            loss_sum += float(loss.detach())
            return loss

        stats = self._update(seqs, loss_fn, lr, micro_batch_tokens)
        return {"loss": loss_sum, "tokens": total, **stats}

    @torch.no_grad()
    def evaluate_sft(self, seqs: list[Sequence], micro_batch_tokens: int | None = None) -> dict:
        total = self._count_targets(seqs)
        loss_sum = 0.0
        self.model.eval()
        for part, ids, mask in self._parts(seqs, micro_batch_tokens):
            on = mask > 0
            lp, _ = target_logprobs(self.model, ids, 1.0, self.dtype, on)
            loss_sum += float(-(lp * mask[on]).sum() / total)
        return {"loss": loss_sum, "tokens": total}

    def policy(
        self,
        seqs: list[Sequence],
        params: PolicyParams,
        lr: float | None = None,
        micro_batch_tokens: int | None = None,
    ) -> dict:
        total = self._count_targets(seqs)
        if params.kl_coef > 0 and self.reference is None and any(s.ref_logprobs is None for s in seqs):
            self.set_reference()
        sums = dict(loss=0.0, pg_loss=0.0, kl=0.0, approx_kl=0.0, clip_frac=0.0, entropy=0.0)

        def loss_fn(part: list[Sequence], ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            # Only the masked tokens (the model's own) are computed: every tensor below is [N].
            on = mask > 0
            lp, logp = target_logprobs(self.model, ids, params.temperature, self.dtype, on)
            marked = mask[on]
            adv = padded([s.advantages[1:] for s in part], 0.0, self.device)[on]
            old = lp.detach()
            if part[0].old_logprobs is not None:
                old = padded([s.old_logprobs[1:] for s in part], 0.0, self.device)[on]
            if params.agg == "token-mean":
                weight = marked / total
            else:
                weight = (mask / (mask.sum(1, keepdim=True).clamp(min=1) * len(seqs)))[on]
            ratio = torch.exp(lp - old)
            surrogate = -adv * ratio
            clipped = -adv * ratio.clamp(1 - params.clip_low, 1 + params.clip_high)
            per_token = torch.maximum(surrogate, clipped)
            sums["pg_loss"] += float((per_token * weight).sum().detach())
            if params.kl_coef > 0:
                ref = self._reference_logprobs(part, ids, params.temperature, on)
                kl = torch.exp(ref - lp) - (ref - lp) - 1  # k3: unbiased, never negative
                per_token = per_token + params.kl_coef * kl
                sums["kl"] += float((kl.detach() * marked).sum() / total)
            loss = (per_token * weight).sum()
            with torch.no_grad():
                sums["loss"] += float(loss)
                d = old - lp
                sums["approx_kl"] += float(((torch.exp(d) - d - 1) * marked).sum() / total)
                sums["clip_frac"] += float(((clipped > surrogate).float() * marked).sum() / total)
                sums["entropy"] += float((-(logp.exp() * logp).sum(-1) * marked).sum() / total)
            return loss

        for s in seqs:
            if s.advantages is None:
                raise ValueError("every sequence needs advantages")
        if len({s.old_logprobs is None for s in seqs}) > 1:
            raise ValueError("give old_logprobs for every sequence or for none")
        stats = self._update(seqs, loss_fn, lr, micro_batch_tokens)
        return {**sums, "tokens": total, **stats}

    @torch.no_grad()
    def score(self, seqs: list[list[int]], temperature: float = 1.0) -> list[list[float]]:
        """Logprob of every token after the first under the current weights."""
        self.model.eval()
        out: list[list[float]] = [[] for _ in seqs]
        for group in micro_batches([len(s) for s in seqs], self.config.micro_batch_tokens):
            ids = padded([seqs[i] for i in group], PAD_ID, self.device)
            lp, _ = target_logprobs(self.model, ids, temperature, self.dtype)
            for row, i in enumerate(group):
                out[i] = lp[row, : len(seqs[i]) - 1].tolist()
        return out

    def _reference_logprobs(
        self, part: list[Sequence], ids: torch.Tensor, temperature: float, on: torch.Tensor
    ) -> torch.Tensor:
        if all(s.ref_logprobs is not None for s in part):
            return padded([s.ref_logprobs[1:] for s in part], 0.0, self.device)[on]
        with torch.no_grad():
            return target_logprobs(self.reference, ids, temperature, self.dtype, on)[0]

    @staticmethod
    def _count_targets(seqs: list[Sequence]) -> int:
        if not seqs:
            raise ValueError("batch is empty")
        total = sum(sum(s.mask[1:]) for s in seqs)
        if total == 0:
            raise ValueError("no token has loss_mask = 1 (position 0 is never a target)")
        return total

    def _parts(self, seqs: list[Sequence], micro_batch_tokens: int | None):
        budget = micro_batch_tokens or self.config.micro_batch_tokens
        for group in micro_batches([len(s.ids) for s in seqs], budget):
            part = [seqs[i] for i in group]
            ids = padded([s.ids for s in part], PAD_ID, self.device)
            mask = padded([s.mask[1:] for s in part], 0.0, self.device)
            yield part, ids, mask

    def _update(self, seqs, loss_fn, lr: float | None, micro_batch_tokens: int | None) -> dict:
        started = time.perf_counter()
        lr = self.config.lr if lr is None else lr
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        try:
            for part, ids, mask in self._parts(seqs, micro_batch_tokens):
                rows, length = ids.shape
                self.model.recompute_blocks = self.shape is not None and (
                    attention_bytes(self.shape, rows, length) > ACTIVATION_BUDGET_BYTES
                )
                loss_fn(part, ids, mask).backward()
        finally:
            self.model.recompute_blocks = False
            self.model.eval()
        grads = [p.grad for p in self.model.parameters() if p.grad is not None]
        grad_norm = clip_gradients(grads, self.config.grad_clip if self.config.grad_clip > 0 else math.inf)
        if not math.isfinite(grad_norm):
            self.optimizer.zero_grad(set_to_none=True)
            raise FloatingPointError(f"gradient norm is {grad_norm}; the update was skipped, weights unchanged")
        self.optimizer.step()
        # The fused AdamW (`adamw`) leaves the parameters' version counters alone: this count is what
        # tells the decode weights and the prefix cache that the weights changed (`weights_version`).
        self.model.updates = getattr(self.model, "updates", 0) + 1
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        elapsed = time.perf_counter() - started
        tokens = sum(len(s.ids) for s in seqs)
        self.tokens_trained += tokens
        self.seconds_trained += elapsed
        return {"grad_norm": grad_norm, "lr": lr, "step": self.step, "tokens_per_s": tokens / elapsed}
