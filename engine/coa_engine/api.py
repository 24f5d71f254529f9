"""Request bodies in, typed values out; every problem is a BadRequest naming the field."""

from __future__ import annotations

import itertools
import math
import secrets
import time

from .sampling import Row, SamplingParams
from .train import PolicyParams, Sequence


class BadRequest(Exception):
    """A request answered with `status` and `{"error": {"message", "type", "code"?}}`; `retry_after`
    (seconds) goes out as the Retry-After header."""

    def __init__(
        self,
        message: str,
        status: int = 400,
        kind: str = "invalid_request_error",
        code: str | None = None,
        retry_after: float | None = None,
    ):
        super().__init__(message)
        self.status, self.kind, self.code, self.retry_after = status, kind, code, retry_after

    def payload(self) -> dict:
        error = {"message": str(self), "type": self.kind}
        if self.code is not None:
            error["code"] = self.code
        return {"error": error}


_MISSING = object()


def field(body: dict, key: str, kind, default=_MISSING, lo=None, hi=None, where: str = ""):
    """body[key] checked against `kind` (int, float, bool or str) and optional bounds."""
    name = f"{where}{key}"
    value = body.get(key, None)
    if value is None:
        if default is _MISSING:
            raise BadRequest(f"{name} is required")
        return default
    ok = {
        int: isinstance(value, int) and not isinstance(value, bool),
        float: isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value),
        bool: isinstance(value, bool),
        str: isinstance(value, str),
    }[kind]
    if not ok:
        raise BadRequest(f"{name} must be {'a finite number' if kind is float else kind.__name__}, got {value!r}")
    if lo is not None and value < lo or hi is not None and value > hi:
        raise BadRequest(f"{name} must be in [{lo}, {hi}], got {value}")
    return kind(value)


def token_ids(value, name: str, vocab_size: int) -> list[int]:
    if not isinstance(value, list):
        raise BadRequest(f"{name} must be a list of token ids")
    # Checked by builtins first (an agent's prompt is hundreds of ids, on handler threads that share the
    # GIL with the model's: 500 ids 16 us against 47 for the loop); the loop names a bad one.
    if set(map(type, value)) <= {int} and (not value or 0 <= min(value) and max(value) < vocab_size):
        return value
    for i, t in enumerate(value):
        if not isinstance(t, int) or isinstance(t, bool) or not 0 <= t < vocab_size:
            raise BadRequest(f"{name}[{i}] = {t!r} is not a token id in [0, {vocab_size})")
    return value


def numbers(value, name: str) -> list[float]:
    if not isinstance(value, list):
        raise BadRequest(f"{name} must be a list of numbers")
    for i, x in enumerate(value):
        if not isinstance(x, (int, float)) or isinstance(x, bool) or not math.isfinite(x):
            raise BadRequest(f"{name}[{i}] = {x!r} is not a finite number")
    return [float(x) for x in value]


def prompts(value, tokenizer) -> list[list[int]]:
    """OpenAI's prompt forms: a string, a list of ids, or a list of either."""
    if isinstance(value, str) or (isinstance(value, list) and value and set(map(type, value)) <= {int, bool}):
        value = [value]
    if not isinstance(value, list) or not value:
        raise BadRequest("prompt must be a string, a list of token ids, or a non-empty list of those")
    out = []
    for i, p in enumerate(value):
        if isinstance(p, str):
            out.append(tokenizer.encode(p))
        else:
            out.append(token_ids(p, f"prompt[{i}]", tokenizer.vocab_size))
        if not out[-1]:
            raise BadRequest(f"prompt[{i}] is empty; give at least one token (e.g. <bos>, id 1)")
    return out


def stop_strings(value) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(s, str) and s for s in value):
        raise BadRequest("stop must be a non-empty string or a list of them")
    return tuple(value)


UNSUPPORTED = {
    "stream": "streaming is not supported",
    "echo": "echo is not supported",
    "suffix": "suffix is not supported",
}


def completion_request(body: dict, tokenizer, max_seq_len: int):
    for key, why in UNSUPPORTED.items():
        if body.get(key):
            raise BadRequest(why)
    for key in ("presence_penalty", "frequency_penalty"):
        if body.get(key):
            raise BadRequest(f"{key} is not supported")
    if field(body, "best_of", int, 1) != 1:
        raise BadRequest("best_of is not supported")
    logprobs = body.get("logprobs")
    if isinstance(logprobs, bool):  # the chat API's spelling
        logprobs = 0 if logprobs else None
    if logprobs is not None:
        logprobs = field(body, "logprobs", int, lo=0, hi=20)
    params = SamplingParams(
        max_tokens=field(body, "max_tokens", int, 16, lo=1, hi=max_seq_len),
        temperature=field(body, "temperature", float, 1.0, lo=0, hi=100),
        top_p=field(body, "top_p", float, 1.0, lo=1e-6, hi=1),
        stop=stop_strings(body.get("stop")),
        seed=field(body, "seed", int, None),
        top_logprobs=logprobs or 0,
        ignore_eos=field(body, "ignore_eos", bool, False),
    )
    options = {
        "n": field(body, "n", int, 1, lo=1, hi=256),
        "logprobs": logprobs,
        "include_stop": field(body, "include_stop_str_in_output", bool, False),
        "ids_as_strings": field(body, "return_tokens_as_token_ids", bool, False),
    }
    return prompts(body.get("prompt"), tokenizer), params, options


# Completion ids: this process's random prefix and a count, unique without reading the system's random
# source per response (`secrets.token_hex` was ~0.1 ms of each handler's turn with the GIL on a VM).
_ID_PREFIX = secrets.token_hex(6)
_ids = itertools.count()


def completion_response(model: str, prompt_ids: list[list[int]], rows: list[Row], options: dict, tokenizer):
    def token_text(t: int) -> str:
        return f"token_id:{t}" if options["ids_as_strings"] else tokenizer.decode([t])

    choices = []
    for r in rows:
        text = bytes(r.text)
        if r.stop_span is not None:
            text = text[: r.stop_span[1] if options["include_stop"] else r.stop_span[0]]
        logprobs = None
        if options["logprobs"] is not None:
            logprobs = {
                "tokens": [token_text(t) for t in r.ids],
                "token_logprobs": r.logprobs,
                # As in vLLM, the sampled token is always listed, so there may be k + 1 entries.
                "top_logprobs": [
                    {**{token_text(t): lp for t, lp in alts}, token_text(tok): chosen}
                    for alts, tok, chosen in zip(r.top, r.ids, r.logprobs)
                ]
                if r.top
                else None,
            }
        choices.append(
            {
                "index": r.index,
                "text": text.decode("utf-8", "replace"),
                "token_ids": r.ids,
                "prompt_token_ids": prompt_ids[r.index // options["n"]],
                "logprobs": logprobs,
                "finish_reason": r.finish_reason,
                "stop_reason": r.stop_reason,
            }
        )
    completion = sum(len(r.ids) for r in rows)
    prompt = sum(len(p) for p in prompt_ids)
    return {
        "id": f"cmpl-{_ID_PREFIX}{next(_ids):012x}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }


def per_token(item: dict, mask: list[int], name: str, where: str) -> list[float] | None:
    """A per-token array aligned with input_ids, or given only for the loss_mask = 1 positions; a
    single number applies to every position."""
    raw = item.get(name)
    if raw is None:
        return None
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        return [field(item, name, float, where=where)] * len(mask)
    values = numbers(raw, f"{where}{name}")
    if len(values) == len(mask):
        return values
    on = [i for i, m in enumerate(mask) if m]
    if len(values) == len(on):
        full = [0.0] * len(mask)
        for i, v in zip(on, values):
            full[i] = v
        return full
    raise BadRequest(
        f"{where}{name} has {len(values)} entries; give one per input id ({len(mask)}) "
        f"or one per loss_mask = 1 position ({len(on)})"
    )


def sequences(body: dict, vocab_size: int, max_seq_len: int, policy: bool) -> list[Sequence]:
    batch = body.get("batch")
    if not isinstance(batch, list) or not batch:
        raise BadRequest("batch must be a non-empty list of sequences")
    out = []
    for i, item in enumerate(batch):
        where = f"batch[{i}]."
        if not isinstance(item, dict):
            raise BadRequest(f"batch[{i}] must be an object")
        ids = token_ids(item.get("input_ids"), f"{where}input_ids", vocab_size)
        if not 2 <= len(ids) <= max_seq_len:
            raise BadRequest(f"{where}input_ids has {len(ids)} tokens; it needs 2 to {max_seq_len}")
        mask = item.get("loss_mask")
        if not isinstance(mask, list) or len(mask) != len(ids) or any(m not in (0, 1) for m in mask):
            raise BadRequest(f"{where}loss_mask must be {len(ids)} zeros and ones, one per input id")
        if mask[0]:
            raise BadRequest(f"{where}loss_mask[0] is 1, but the first token has no prefix to predict it from")
        mask = [int(m) for m in mask]
        seq = Sequence(ids, mask)
        if policy:
            seq.advantages = per_token(item, mask, "advantages", where)
            if seq.advantages is None:
                raise BadRequest(f"{where}advantages is required")
            seq.old_logprobs = per_token(item, mask, "old_logprobs", where)
            seq.ref_logprobs = per_token(item, mask, "ref_logprobs", where)
        out.append(seq)
    return out


def policy_params(body: dict) -> PolicyParams:
    agg = body.get("agg", "token-mean")
    if agg not in ("token-mean", "seq-mean"):
        raise BadRequest(f"agg must be token-mean or seq-mean, got {agg!r}")
    clip_low = field(body, "clip_low", float, 0.2, lo=0, hi=1)
    return PolicyParams(
        clip_low=clip_low,
        clip_high=field(body, "clip_high", float, clip_low, lo=0, hi=100),
        agg=agg,
        kl_coef=field(body, "kl_coef", float, 0.0, lo=0),
        temperature=field(body, "temperature", float, 1.0, lo=1e-3, hi=100),
    )


OPTIMIZER_FIELDS = {
    "lr": (float, 0, 10),
    "beta1": (float, 0, 1),
    "beta2": (float, 0, 1),
    "eps": (float, 0, 1),
    "weight_decay": (float, 0, 10),
    "grad_clip": (float, 0, None),
    "micro_batch_tokens": (int, 1, None),
}


def optimizer_changes(body: dict) -> dict:
    unknown = set(body) - set(OPTIMIZER_FIELDS) - {"betas"}
    if unknown:
        raise BadRequest(f"unknown optimizer setting(s): {', '.join(sorted(unknown))}")
    changes = {k: field(body, k, kind, None, lo, hi) for k, (kind, lo, hi) in OPTIMIZER_FIELDS.items()}
    betas = body.get("betas")
    if betas is not None:
        if not isinstance(betas, list) or len(betas) != 2:
            raise BadRequest("betas must be [beta1, beta2]")
        changes["beta1"], changes["beta2"] = numbers(betas, "betas")
    return {k: v for k, v in changes.items() if v is not None}


def step_options(body: dict) -> dict:
    return {
        "lr": field(body, "lr", float, None, lo=0, hi=10),
        "micro_batch_tokens": field(body, "micro_batch_tokens", int, None, lo=1),
    }
