"""verl reward function that scores with coa: POSTs each rollout to `coa tools serve`'s /score.

Point verl at it:

    custom_reward_function.path=integrations/verl/coa_reward.py
    custom_reward_function.name=compute_score

and start `coa tools serve --corpus <corpus.jsonl>` (port 8000) first. COA_SCORE_URL overrides where
the scorer listens, COA_SCORE_TIMEOUT (seconds) how long one score may take. Standard library only, so
it runs in any verl environment.
"""

import json
import os
import urllib.error
import urllib.request

SCORE_URL = os.environ.get("COA_SCORE_URL", "http://127.0.0.1:8000/score")
TIMEOUT_S = float(os.environ.get("COA_SCORE_TIMEOUT", "120"))


def _plain(value):
    """verl hands over numpy arrays and scalars (from parquet); JSON needs lists and numbers."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    """The score (0 to 1) of one response; coa takes the response's last <answer> as the prediction."""
    body = {"data_source": data_source, "ground_truth": _plain(ground_truth), "solution_str": solution_str}
    if extra_info:
        body["extra_info"] = _plain(extra_info)
    request = urllib.request.Request(
        SCORE_URL,
        data=json.dumps(body).encode("utf-8"),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            reply = json.load(response)
    except urllib.error.HTTPError as err:
        # A refused request is a bug in the data or the setup; a silent 0 would train on it.
        detail = err.read().decode("utf-8", errors="replace")
        raise RuntimeError(f"coa /score answered {err.code}: {detail}") from err
    return float(reply["score"])
