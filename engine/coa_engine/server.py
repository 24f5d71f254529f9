"""The loopback HTTP API. Handlers run on their own threads; generation goes through the sampler's
batch, and everything that changes or reads the weights as a whole (training, checkpoints,
scoring) runs in the gate's exclusive section, between generation batches.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
import socket
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

from . import api
from .api import BadRequest
from .sampling import Refused
from .worker import Worker

# Generous for a training mini-batch (~70 JSON bytes per policy token: about 900k tokens), small enough
# that one hostile request cannot fill host memory with parsed Python objects.
MAX_BODY_BYTES = 64 * 1024 * 1024
# A connection that sends nothing for this long (idle between requests, or stalled inside one) is
# closed: without it every idle keep-alive or stalled client held a handler thread for good. Clients
# drop idle connections sooner (undici, behind Node's fetch and coa's JsonHttp, after 4 s; httpx
# after 5 s).
IDLE_TIMEOUT_S = 60.0
# Connections open at once beyond what generation can use (each completion holds one while its rows
# decode or wait in the queue), for /info, training and the like; past them a connection is refused.
SPARE_CONNECTIONS = 64
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
WILDCARDS = frozenset({"0.0.0.0", "::", "[::]"})
HOST_HEADER = re.compile(r"^(\[[^\]]+\]|[^:]+)(?::(\d+))?$")


def host_allowed(bind_host: str, port: int, header: str | None) -> bool:
    """Whether a Host header names the address the server is bound as. A DNS-rebinding page reaches a
    loopback server under its own domain name, so only the loopback names, the explicit bind host and
    (bound to every address) IP literals, which a page cannot rebind, pass. Mirrors src/server/host-check.ts.
    """
    m = HOST_HEADER.match((header or "").strip().lower())
    if not m or int(m.group(2) or 80) != port:  # browsers leave out the default port
        return False
    name = m.group(1)
    if name in LOOPBACK_NAMES:
        return True
    if bind_host in WILDCARDS:
        try:
            ipaddress.ip_address(name.strip("[]"))
            return True
        except ValueError:
            return False
    bind = bind_host.lower()
    return name in (bind, f"[{bind}]")


class ConnectionLimit:
    """Open connections, each on its own handler thread, counted against a limit."""

    def __init__(self, limit: int):
        self.limit, self.open, self.peak, self.refused = limit, 0, 0, 0
        self._lock = threading.Lock()

    def acquire(self) -> bool:
        with self._lock:
            if self.open >= self.limit:
                self.refused += 1
                return False
            self.open += 1
            self.peak = max(self.peak, self.open)
            return True

    def release(self) -> None:
        with self._lock:
            self.open -= 1

    def stats(self) -> dict:
        return {"open": self.open, "peak": self.peak, "limit": self.limit, "refused": self.refused}


def connection_limit(worker: Worker) -> int:
    """What generation can hold (the sampler's rows and queue, a connection each at most) and spares."""
    return worker.sampler.max_rows + worker.sampler.max_queued_rows + SPARE_CONNECTIONS


def refuse_connection(sock: socket.socket, limit: ConnectionLimit) -> None:
    """Answers a connection over the limit with a 503 without a handler thread, then reads what the
    client already sent (without waiting for more) so that closing does not reset the reply away."""
    refusal = BadRequest(
        f"the engine has {limit.limit} connections open, its limit (--max-batch and --max-queue rows and "
        f"{SPARE_CONNECTIONS} more); retry after 1 s",
        503,
        "overloaded_error",
        "too_many_connections",
        retry_after=1,
    )
    body = json.dumps(refusal.payload()).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nRetry-After: {refusal.retry_after}\r\nConnection: close\r\n\r\n"
    )
    try:
        sock.settimeout(1.0)
        sock.sendall(head.encode() + body)
        sock.setblocking(False)
        for _ in range(64):  # at most 4 MiB of an early request
            if not sock.recv(65536):
                break
    except OSError:  # BlockingIOError: nothing more has arrived; or the client is gone
        pass


def completions(w: Worker, body: dict) -> dict:
    prompt_ids, params, options = api.completion_request(body, w.tokenizer, w.max_seq_len)
    for i, p in enumerate(prompt_ids):
        if len(p) >= w.max_seq_len:
            raise BadRequest(
                f"prompt[{i}] has {len(p)} tokens; this model's maximum context length is {w.max_seq_len} tokens"
            )
    try:
        rows = w.sampler.generate(prompt_ids, params, options["n"])
    except Refused as err:
        # 503: full now (Retry-After says when to come back); 400: over a bound on its own.
        kind = "overloaded_error" if err.status == 503 else "invalid_request_error"
        raise BadRequest(str(err), err.status, kind, err.code, err.retry_after) from err
    return api.completion_response(w.model_name, prompt_ids, rows, options, w.tokenizer)


def tokenize(w: Worker, body: dict) -> dict:
    ids = w.tokenizer.encode(api.field(body, "prompt", str))
    return {"tokens": ids, "count": len(ids), "max_model_len": w.max_seq_len}


def detokenize(w: Worker, body: dict) -> dict:
    return {"prompt": w.tokenizer.decode(api.token_ids(body.get("tokens"), "tokens", w.tokenizer.vocab_size))}


def refused_as_bad_request(route):
    """The trainer refuses some batches only once it sees them whole (e.g. nothing to learn)."""

    def handle(w: Worker, body: dict) -> dict:
        try:
            return route(w, body)
        except ValueError as err:
            raise BadRequest(str(err)) from err

    return handle


@refused_as_bad_request
def train_sft(w: Worker, body: dict) -> dict:
    seqs = api.sequences(body, w.tokenizer.vocab_size, w.max_seq_len, policy=False)
    return w.gate.run(lambda: w.trainer.sft(seqs, **api.step_options(body)))


@refused_as_bad_request
def eval_sft(w: Worker, body: dict) -> dict:
    seqs = api.sequences(body, w.tokenizer.vocab_size, w.max_seq_len, policy=False)
    return w.gate.run(lambda: w.trainer.evaluate_sft(seqs, api.step_options(body)["micro_batch_tokens"]))


@refused_as_bad_request
def train_policy(w: Worker, body: dict) -> dict:
    seqs = api.sequences(body, w.tokenizer.vocab_size, w.max_seq_len, policy=True)
    params = api.policy_params(body)
    return w.gate.run(lambda: w.trainer.policy(seqs, params, **api.step_options(body)))


@refused_as_bad_request
def train_config(w: Worker, body: dict) -> dict:
    changes = api.optimizer_changes(body)
    return w.gate.run(lambda: w.trainer.configure(**changes).to_json())


def train_reference(w: Worker, body: dict) -> dict:
    def reference() -> dict:
        w.trainer.set_reference()
        return {"step": w.trainer.step}

    return w.gate.run(reference)


def score(w: Worker, body: dict) -> dict:
    """Logprob of each token given its prefix, aligned with the ids (null for the first)."""
    seqs = body.get("sequences")
    if not isinstance(seqs, list) or not seqs:
        raise BadRequest("sequences must be a non-empty list of token id lists")
    ids = [api.token_ids(s, f"sequences[{i}]", w.tokenizer.vocab_size) for i, s in enumerate(seqs)]
    for i, s in enumerate(ids):
        if not 2 <= len(s) <= w.max_seq_len:
            raise BadRequest(f"sequences[{i}] has {len(s)} tokens; it needs 2 to {w.max_seq_len}")
    temperature = api.field(body, "temperature", float, 1.0, lo=1e-3, hi=100)
    return w.gate.run(lambda: {"logprobs": [[None, *lp] for lp in w.trainer.score(ids, temperature)]})


def checkpoint_save(w: Worker, body: dict) -> dict:
    folder = api.field(body, "dir", str)
    return w.gate.run(lambda: w.save(folder))


def checkpoint_load(w: Worker, body: dict) -> dict:
    folder = api.field(body, "dir", str)
    try:
        return w.gate.run(lambda: w.load(folder))
    except (FileNotFoundError, ValueError) as err:
        raise BadRequest(str(err)) from err


def models(w: Worker, body: None) -> dict:
    entry = {"id": w.model_name, "object": "model", "owned_by": "coa", "max_model_len": w.max_seq_len}
    return {"object": "list", "data": [entry]}


ROUTES = {
    ("POST", "/v1/completions"): completions,
    ("POST", "/tokenize"): tokenize,
    ("POST", "/detokenize"): detokenize,
    ("POST", "/train/sft"): train_sft,
    ("POST", "/eval/sft"): eval_sft,
    ("POST", "/train/policy"): train_policy,
    ("POST", "/train/config"): train_config,
    ("POST", "/train/reference"): train_reference,
    ("POST", "/score"): score,
    ("POST", "/checkpoint/save"): checkpoint_save,
    ("POST", "/checkpoint/load"): checkpoint_load,
    ("GET", "/v1/models"): models,
    ("GET", "/info"): lambda w, _: w.info(),
    # The whole vocabulary (tags, merges), so a client can tokenize locally with the same ids.
    ("GET", "/tokenizer"): lambda w, _: w.tokenizer.to_json(),
    ("GET", "/health"): lambda w, _: {"status": "ok"},
}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "coa-engine"
    timeout = IDLE_TIMEOUT_S  # per socket read or write; waiting for the model is not one
    # Buffered writes, flushed once a request is answered (`handle_one_request`): a response's headers
    # and body leave in one send rather than two, each a system call and a return to the GIL that the
    # model thread waits on (0.65 s of the handlers' time over the demo's evaluation, docs/engine.md).
    wbufsize = 1 << 16

    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def _dispatch(self, method: str):
        started = time.perf_counter()
        path = urlsplit(self.path).path.rstrip("/") or "/"
        status, payload, headers = 200, None, {}
        try:
            if not host_allowed(self.server.bind_host, self.server.server_address[1], self.headers.get("Host")):
                self.close_connection = True  # the body stays unread
                host = self.headers.get("Host") or ""
                raise BadRequest(
                    f"Host {json.dumps(host)} is not an address this engine listens on (a page on another "
                    "domain may be reaching it by DNS rebinding); connect to http://127.0.0.1:PORT",
                    403,
                )
            # Read the body first, whatever happens next, so the connection stays in step.
            body = self._read_body() if method == "POST" else None
            route = ROUTES.get((method, path))
            if route is None:
                allowed = [m for (m, p) in ROUTES if p == path]
                raise BadRequest(f"{method} {path}: no such endpoint", 405 if allowed else 404)
            if body is not None and not isinstance(body, dict):
                raise BadRequest("the request body must be a JSON object")
            payload = route(self.server.worker, body)
        except BadRequest as err:
            status, payload = err.status, err.payload()
            if err.retry_after is not None:
                headers["Retry-After"] = f"{max(1, math.ceil(err.retry_after))}"
        except Exception as err:  # noqa: BLE001 - the server outlives any one request
            traceback.print_exc(file=sys.stderr)
            status = 500
            payload = {"error": {"message": f"{type(err).__name__}: {err}", "type": "internal_error"}}
        self._send(status, payload, headers)
        # A refusal for capacity (503) is counted in /info, not logged: under load there are many.
        if self.server.log_requests or (status >= 500 and status != 503):
            log(f"{method} {path} {status} {time.perf_counter() - started:.3f}s")

    def _read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", ""):
            self.close_connection = True
            raise BadRequest("chunked request bodies are not supported; send Content-Length", 411)
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0:
            self.close_connection = True
            raise BadRequest("Content-Length must be a non-negative integer")
        if length > MAX_BODY_BYTES:
            self.close_connection = True  # never read: the limit holds before any parsing
            raise BadRequest(
                f"request body of {length} bytes is over the {MAX_BODY_BYTES} byte limit; send smaller batches",
                413,
            )
        try:
            raw = self.rfile.read(length)
        except TimeoutError as err:
            self.close_connection = True
            raise BadRequest(f"the request body stopped arriving for {IDLE_TIMEOUT_S:.0f} s", 408) from err
        try:
            return json.loads(raw or b"{}")
        except ValueError as err:
            raise BadRequest(f"the request body is not valid JSON: {err}") from err

    def _send(self, status: int, payload, headers: dict[str, str] | None = None) -> None:
        try:
            data = json.dumps(payload, allow_nan=False).encode()
        except ValueError:
            data = json.dumps(finite(payload), allow_nan=False).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        pass


class EngineServer(ThreadingHTTPServer):
    """One thread per connection, at most `max_connections` (default `connection_limit(worker)`) open
    at once: past them a connection gets a 503 from the accepting thread and is closed, so a flood of
    connections cannot grow the threads (and their memory) without bound. `worker.connections` is the
    count, which /info reports."""

    daemon_threads = True
    # The listen backlog: socketserver's default of 5 made the kernel drop the SYNs of an evaluation's
    # 32 first connections past it, which the clients sent again only after TCP's 1 s timeout.
    request_queue_size = socket.SOMAXCONN

    def __init__(
        self, worker: Worker, host: str, port: int, log_requests: bool = False, max_connections: int | None = None
    ):
        super().__init__((host, port), Handler)
        self.worker, self.log_requests, self.bind_host = worker, log_requests, host
        self.connections = ConnectionLimit(max_connections or connection_limit(worker))
        worker.connections = self.connections

    def process_request(self, request, client_address):
        if not self.connections.acquire():
            refuse_connection(request, self.connections)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)  # starts the connection's thread
        except BaseException:
            self.connections.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.connections.release()


def finite(value):
    """JSON has no NaN or infinity; a diverged loss goes out as null rather than breaking the reply."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

