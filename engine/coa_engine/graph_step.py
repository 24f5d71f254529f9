"""Decode steps on a CUDA GPU replayed from CUDA graphs: the step's kernels launched in one call.

Why: a `tiny` decode step is a few hundred small kernels, each launched from Python; on an H100 and an
H200 the GPU generated no faster than a CPU (`tiny`: 230-276 tok/s at batch 1, docs/engine.md). A graph
records one step's launches once and replays them for every later step of the same shape.

A graph holds one shape of step: rows, ids per row, the attended width and the cache's tensors (their
addresses and strides, `Transformer.decode` builds the key). Its inputs, the ids and the rows'
positions, are copied into tensors of its own before each replay, and its logits copied out after, so
that the next replay cannot overwrite what the caller still reads.
"""

from __future__ import annotations

import inspect
import os
import sys
from collections import OrderedDict
from typing import Callable, Hashable

import torch

# Graphs kept per model's decode weights, least recently replayed dropped first: a batch changes shape
# when rows join or leave and when its cache grows, and each graph keeps its intermediates' memory.
GRAPHS_KEPT = 16

Step = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


# What this process's graphs did, for /info (`state`): captures, replays, and why they stopped if a
# capture failed (decoding then goes on op by op).
_totals: dict = {"captures": 0, "replays": 0, "failed": None}


def graphs_enabled() -> bool:
    """CUDA graphs for decode steps unless `COA_CUDA_GRAPHS=0` (to compare, or where a driver fails) or
    a capture failed in this process."""
    return os.environ.get("COA_CUDA_GRAPHS", "1") != "0" and _totals["failed"] is None


def state() -> dict:
    """Whether decode steps on a GPU are replayed from graphs, and how often they were (/info)."""
    return {"enabled": graphs_enabled(), **_totals}


def _capture(graph: torch.cuda.CUDAGraph):
    # Only this thread's calls may break the capture ("thread_local", torch >= 2.1): an HTTP handler
    # touching the GPU meanwhile is no error in it.
    if "capture_error_mode" in inspect.signature(torch.cuda.graph).parameters:
        return torch.cuda.graph(graph, capture_error_mode="thread_local")
    return torch.cuda.graph(graph)


class _Graph:
    def __init__(self, step: Step, ids: torch.Tensor, pos: torch.Tensor):
        self.ids, self.pos = ids.clone(), pos.clone()
        # One eager run on a side stream first, as capture requires (lazy initialisation, cuBLAS
        # workspaces): it writes the cache entries the replay writes again, with the same values.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            step(self.ids, self.pos)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with _capture(self.graph):
            self.logits = step(self.ids, self.pos)

    def __call__(self, ids: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        self.ids.copy_(ids)
        self.pos.copy_(pos)
        self.graph.replay()
        return self.logits.clone()


class GraphSteps:
    """The captured decode steps of one model's decode weights (`DecodeWeights.graph_steps`), by shape."""

    def __init__(self, kept: int = GRAPHS_KEPT):
        self.kept = kept
        self._graphs: OrderedDict[Hashable, _Graph] = OrderedDict()
        self._seen: OrderedDict[Hashable, None] = OrderedDict()  # shapes run once, op by op

    def __call__(self, key: Hashable, step: Step, ids: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """The logits of `step(ids, pos)`: replayed from the graph captured for `key`; at the first step
        of a shape, run op by op; at its second, captured. `key` must change with anything `step` reads
        other than `ids` and `pos` whose shape or address may change (the cache's tensors, the widths).

        Why not capture at once: a capture costs about three steps (a warm-up run, the recording, the
        replay), and many shapes occur once (a speculative step's ids per row, a batch between two
        admissions): 6-7 captures of 8-14 ms each in a round of 32 concurrent `tiny` requests on an H200."""
        graph = self._graphs.get(key)
        if graph is None and key not in self._seen:
            self._seen[key] = None
            if len(self._seen) > 4 * self.kept:
                self._seen.popitem(last=False)
            return step(ids, pos)
        if graph is None:
            try:
                graph = _Graph(step, ids, pos)
            except RuntimeError as error:  # a kernel or driver that cannot be captured: op by op from now on
                _totals["failed"] = f"{error.__class__.__name__}: {error}".splitlines()[0]
                print(f"coa-engine: decoding without CUDA graphs ({_totals['failed']})", file=sys.stderr)
                return step(ids, pos)  # writes what the failed attempt may have written, again
            _totals["captures"] += 1
            self._graphs[key] = graph
            if len(self._graphs) > self.kept:
                self._graphs.popitem(last=False)
        else:
            self._graphs.move_to_end(key)
        _totals["replays"] += 1
        return graph(ids, pos)
