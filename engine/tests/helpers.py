"""Shared fixtures: a micro model, the engine's tokenizer, and a worker served over loopback HTTP."""

import json
import platform
import shutil
import threading
import unittest
from contextlib import contextmanager
import urllib.error
import urllib.request

import torch

from coa_engine import attention
from coa_engine.model import Transformer, preset_config
from coa_engine.tokenizer import ByteTokenizer, default_tags

TOKENIZER = ByteTokenizer(default_tags())


def kernel_expected() -> bool:
    """Where the engine's native kernels must build: x86-64 with AVX2 and FMA, and a C compiler (every
    CI machine)."""
    flags = attention.cpu_flags().split()
    return platform.machine() == "x86_64" and "avx2" in flags and "fma" in flags and shutil.which("gcc") is not None


def require_kernels(what: str) -> None:
    """For a test class's setUpClass: skips where the native kernels cannot build, fails where they
    must (`kernel_expected`) and did not."""
    if attention.attention_kernel() is None:
        if kernel_expected():
            raise AssertionError(f"the {what} did not build on an x86-64 CPU with AVX2, FMA and gcc")
        raise unittest.SkipTest(f"no {what} on this machine (not x86-64 with AVX2/FMA, or no gcc)")


def micro_model(seed: int = 0, max_seq_len: int = 256) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(preset_config("micro", TOKENIZER.vocab_size, max_seq_len)).eval()


@contextmanager
def serve(worker):
    """Serves `worker` on a free loopback port for the `with` block, then stops the server and the
    worker's sampler. Yields `call(path, body=None)` -> (status, headers, JSON body), for successes and
    HTTP errors alike."""
    from coa_engine.server import EngineServer

    server = EngineServer(worker, "127.0.0.1", 0)
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()

    def call(path, body=None):
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}{path}",
            data=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=60) as res:
                return res.status, dict(res.headers), json.loads(res.read())
        except urllib.error.HTTPError as err:
            return err.code, dict(err.headers), json.loads(err.read())

    try:
        yield call
    finally:
        server.shutdown()
        server.server_close()
        worker.sampler.close()
