"""`python -m coa_engine`: serve one model on loopback HTTP.

Once listening, prints one JSON line to stdout: {"event": "listening", "url": ..., "port": ...};
everything else (the log) goes to stderr.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import sys
import threading

from .blas import limit_openmp_spin

# Before torch loads libgomp, which reads its spin count once (blas.py).
limit_openmp_spin()

import torch  # noqa: E402

from .allocator import tune_malloc  # noqa: E402
from .cpus import process_quota, usable_cpus  # noqa: E402
from .drafting import DEFAULT_DRAFT_TOKENS  # noqa: E402
from .model import PRESETS  # noqa: E402
from .server import EngineServer, log  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="coa_engine", description=__doc__)
    src = p.add_mutually_exclusive_group()
    src.add_argument("--preset", choices=sorted(PRESETS), help="a fresh model of this size (default tiny)")
    src.add_argument("--checkpoint", help="a checkpoint folder to load")
    src.add_argument("--hf-model", help="a Hugging Face causal LM (path or name); needs transformers")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port")
    p.add_argument("--tags", help="JSON list of protocol tags (default: the bundled specials.json)")
    p.add_argument("--tokenizer", help="a fresh model's vocabulary: a tokenizer file (the tokenizer.json of `coa distill`)")
    p.add_argument("--dtype", default="auto", choices=["auto", "fp32", "bf16"])
    p.add_argument(
        "--device",
        default=os.environ.get("COA_DEVICE", "auto"),
        choices=["auto", "cpu", "cuda"],
        help="auto: a CUDA GPU when torch sees one (default: $COA_DEVICE, else auto)",
    )
    p.add_argument(
        "--threads",
        type=int,
        help="torch's intra-op threads, and OpenBLAS's where it runs its own pool (default: the CPUs this process may use, at most a cgroup CPU quota's whole CPUs)",
    )
    p.add_argument(
        "--generation-threads",
        type=int,
        help="the same while generating (default: --threads minus one, at least one: the client that "
        "drives generation, an agent runtime and its tools, runs beside it; a lone row, whose client waits "
        "for it, takes all of --threads)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed for a fresh model's weights")
    p.add_argument("--max-seq-len", type=int, help="override a preset's context length")
    p.add_argument("--max-batch", type=int, default=64, help="rows decoded together at most")
    p.add_argument(
        "--max-queue",
        type=int,
        help="rows waiting to join the batch at most; more gets HTTP 503 (default 4 x --max-batch)",
    )
    p.add_argument(
        "--kv-cache-mb",
        type=float,
        help="keys and values in memory at most, running batch and prefix cache together "
        "(default $COA_KV_CACHE_MB, else 2048)",
    )
    p.add_argument(
        "--draft-tokens",
        type=int,
        default=int(os.environ.get("COA_DRAFT_TOKENS", DEFAULT_DRAFT_TOKENS)),
        help="speculative decoding: ids drafted per row and step from earlier text and checked in the same "
        f"step; the ids sampled are the same, in fewer steps (default $COA_DRAFT_TOKENS, else "
        f"{DEFAULT_DRAFT_TOKENS}; 0 turns it off)",
    )
    p.add_argument("--log-requests", action="store_true")
    p.add_argument("--exit-with-stdin", action="store_true", help="exit when stdin closes (the parent died)")
    return p.parse_args(argv)


def build_worker(args: argparse.Namespace):
    tags = json.loads(args.tags) if args.tags else None
    if args.hf_model:
        from .hf import HFWorker

        return HFWorker(args.hf_model, dtype=args.dtype, max_rows=args.max_batch, max_queued_rows=args.max_queue)
    from .worker import Worker

    return Worker(
        preset=args.preset,
        checkpoint_dir=args.checkpoint,
        tags=tags,
        tokenizer_file=args.tokenizer,
        dtype=args.dtype,
        device=args.device,
        seed=args.seed,
        max_seq_len=args.max_seq_len,
        max_rows=args.max_batch,
        kv_cache_mb=args.kv_cache_mb,
        max_queued_rows=args.max_queue,
        threads=args.threads,
        generation_threads=args.generation_threads,
        draft_tokens=args.draft_tokens,
    )


def watch_stdin() -> None:
    def run():
        try:
            # The raw descriptor, not sys.stdin: a thread blocked inside a buffered reader holds its
            # lock, which aborts the interpreter's shutdown.
            while os.read(sys.stdin.fileno(), 65536):
                pass
            log("stdin closed; exiting")
        finally:
            # Also when the log cannot be written: a dead parent took our stderr's reader with it.
            os._exit(0)

    threading.Thread(target=run, name="stdin-watch", daemon=True).start()


def main(argv: list[str] | None = None) -> None:
    # A crash in native code (a signal such as SIGSEGV) prints every thread's Python stack to stderr,
    # which the client quotes in its error: where it died, not only that it did.
    faulthandler.enable()
    args = parse_args(argv)
    # Before the model's first tensor: every later allocation is served under these settings.
    tune_malloc()
    args.threads = args.threads or usable_cpus(process_quota())
    args.generation_threads = args.generation_threads or max(1, args.threads - 1)
    torch.set_num_threads(args.threads)
    if args.exit_with_stdin:
        watch_stdin()
    worker = build_worker(args)
    info = worker.info()
    gflops = ", ".join(f"{k} {v:.0f} GFLOP/s" for k, v in info["matmul_gflops"].items())
    if gflops and info["matmul_remembered"]:
        gflops += f" at {info['matmul_measured_at']}, remembered"
    log(
        f"{info['model']}: {info['params'] / 1e6:.2f}M params, context {info['max_model_len']}, "
        f"{info['device']} {info['dtype']}{f' (measured {gflops})' if gflops else ''}, {info['threads']} threads"
        f"{f' ({g} generating)' if (g := info.get('generation_threads')) else ''}"
        f"{f', CPU quota {q:g}' if (q := info.get('cpu_quota')) else ''}"
    )
    server = EngineServer(worker, args.host, args.port, args.log_requests)
    host, port = server.server_address[:2]
    print(json.dumps({"event": "listening", "url": f"http://{host}:{port}", "port": port}), flush=True)
    log(f"listening on http://{host}:{port}")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        log("interrupted; exiting")
        # Requests still generating get 503 now rather than holding the exit until they finish.
        worker.sampler.close()


if __name__ == "__main__":
    main()
