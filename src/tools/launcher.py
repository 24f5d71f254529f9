"""Starts the sandbox's processes for coa (src/tools/launcher.ts), so that the Node process never forks.

Node forks its whole address space to start a child, and on Linux that copy of the page tables grows
with the process: tens of milliseconds for an agent runtime holding a corpus, during which its event
loop stands still. This small process starts each program with posix_spawn (no copy at all) and
relays the program's input and output.

Protocol, one JSON object per line each way:
  -> {"id": 1, "argv": [...], "env": {...}, "cwd": "/", "inputs": {"0": b64, "3": b64},
      "outputBytes": n, "wallMs": n}
     starts argv[0] (looked up in PATH) in a new session with `env`, the child's descriptor k (0 for stdin)
     reading inputs[k] and then its end; stdout and stderr are collected.
  -> {"id": 1, "sandbox": {"key": "1", "start": {"argv": [...], "env": {...}, "inputs": {"4": b64}},
      "idle": n, "run": "..."}, "inputs": {"0": b64, "3": b64}, "outputBytes": n, "wallMs": n}
     runs the program in a warm sandbox (zygote.py) started as `start` says (sent with a key's first
     run only), or in an idle one of the same key: the run's descriptors go to the sandbox's resident
     interpreter with `run`, which forks the program. After a run the sandbox waits for the next (at
     most `idle` wait);
     stopping a run ends its sandbox. {"id": 1, "error": ..., "code": "EWARM"} when the sandbox ended
     before it could take the run (the program did not run).
  -> {"id": 1, "kill": true}          ends the run's process group (the caller aborted).
  <- {"id": 1, "stdout": b64, "stderr": b64, "truncated": "stdout" | "stderr" | null,
      "killedBy": "wall_timeout" | "output_limit" | "aborted" | null,
      "exitCode": n | null, "signal": n | null}
     once the program exited and both its streams closed; or {"id": 1, "error": ..., "code": ...}
     when it could not start. Output past `outputBytes` (stdout and stderr together) is dropped and
     the run stopped; at `wallMs` the run is stopped. Stopping kills the whole process group.
When its own stdin closes (coa exited), it kills every run still going and exits.
"""

import base64
import collections
import errno
import fcntl
import json
import os
import selectors
import signal
import socket
import sys
import time

CHUNK = 65536
STANDARD_SIGNALS = [s for s in range(1, 32) if s not in (signal.SIGKILL, signal.SIGSTOP)]
# Without pidfd_open (Linux < 5.3), exits are polled this often.
POLL_SECONDS = 0.01
# A warm sandbox's control socket, at this descriptor in its resident interpreter (zygote.py).
CONTROL_FD = 5
# Kept of what a warm sandbox printed (bwrap's or the interpreter's errors), for a run it fails.
SANDBOX_LOG_BYTES = 65536
# Warm sandboxes starting at once, per start key: a burst of runs waits for these (and for sandboxes
# its runs free) instead of starting one each, which took longer than fresh sandboxes and starved coa.
START_AT_ONCE = max(2, len(os.sched_getaffinity(0)))
# A warm sandbox not ready this long after its start is ended (its first waiting run answered EWARM):
# runs wait for sandboxes without a deadline of their own, so a start that hangs must not hold them.
START_SECONDS = 30


def above_stdio(fd):
    """`fd` moved to a number the child's dup2 targets (0-4) cannot clobber before it is read."""
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high


def spawn_error(argv, err):
    """What a failed start is answered: the message and the errno's name."""
    code = errno.errorcode.get(err.errno, "EIO")
    return f"spawn {argv[0]} {code}", code


def spawn(argv, env, child_ends):
    """Starts argv[0] (looked up in PATH) in a new session, its descriptor k reading from or writing
    to fd for each (k, fd) of `child_ends`; returns its pid."""
    return os.posix_spawnp(
        argv[0],
        argv,
        env,
        file_actions=[(os.POSIX_SPAWN_DUP2, fd, target) for target, fd in child_ends],
        setsid=True,
        # Ignored signals survive exec, and Python ignores SIGPIPE and SIGXFSZ: a program would get
        # EPIPE where it should die, and no signal at its file-size limit. As a fork from Node (libuv)
        # does, every standard signal starts at its default, none blocked.
        setsigdef=STANDARD_SIGNALS,
        setsigmask=(),
    )


class Run:
    def __init__(self, launcher, request):
        self.launcher, self.id = launcher, request["id"]
        self.request = request
        self.limit = request["outputBytes"]
        self.out = {"stdout": [], "stderr": []}
        self.kept, self.truncated, self.killed_by, self.status = 0, None, None, None
        self.readers, self.writers = {}, {}
        self.pid = self.pidfd = self.sandbox = None
        self.dispatched = False
        if "sandbox" in request:
            self.deadline = None  # the wait for a warm sandbox (`enqueue`) is not the program's time
            return
        self.start_clock()
        child_ends = self.open_pipes()
        try:
            # posix_spawn has no working-directory action (before Python 3.13): this process is
            # single-threaded, so it enters the directory itself around the call.
            os.chdir(request.get("cwd", "/"))
            self.pid = spawn(request["argv"], request["env"], child_ends)
        except OSError:
            for fd in [*(fd for _, fd in child_ends), *self.readers, *self.writers]:
                os.close(fd)
            raise
        finally:
            os.chdir("/")
        for _, fd in child_ends:
            os.close(fd)
        try:
            self.pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            self.pidfd = None
        self.watch()
        if self.pidfd is not None:
            self.launcher.selector.register(self.pidfd, selectors.EVENT_READ, (self, "exit"))

    def start_clock(self):
        self.deadline = time.monotonic() + self.request["wallMs"] / 1000

    def open_pipes(self):
        """The program's stdout, stderr and inputs as pipes: [(its descriptor, its end)], ours kept."""
        child_ends = []
        for name, target in (("stdout", 1), ("stderr", 2)):
            r, w = os.pipe()
            child_ends.append((target, above_stdio(w)))
            os.set_blocking(r, False)
            self.readers[r] = name
        for target, data in sorted((int(k), base64.b64decode(v)) for k, v in self.request["inputs"].items()):
            r, w = os.pipe()
            child_ends.append((target, above_stdio(r)))
            os.set_blocking(w, False)
            self.writers[w] = memoryview(data)
        return sorted(child_ends)

    def watch(self):
        sel = self.launcher.selector
        for fd in self.readers:
            sel.register(fd, selectors.EVENT_READ, (self, "read"))
        for fd in self.writers:
            sel.register(fd, selectors.EVENT_WRITE, (self, "write"))

    def dispatch(self):
        """Hands the program's descriptors to its warm sandbox, which forks it; the wall limit counts
        from here."""
        self.start_clock()
        child_ends = self.open_pipes()
        message = self.request["sandbox"]["run"].encode()
        try:
            socket.send_fds(self.sandbox.control, [message], [fd for _, fd in child_ends])
            self.dispatched = True
        except OSError:  # the sandbox is ending: its end, read next, answers EWARM (nothing ran)
            for fd in [*self.readers, *self.writers]:
                os.close(fd)
            self.readers, self.writers = {}, {}
        for _, fd in child_ends:
            os.close(fd)
        self.watch()

    def on_status(self, status):
        self.status = status
        self.finish_if_done()

    def on_sandbox_gone(self, status, log):
        """Its sandbox ended: stopped with this run, taken down by the program, or ending as it was
        handed the run (nothing ran: EWARM)."""
        if self.dispatched or self.killed_by is not None:
            self.status = status
            return self.finish_if_done()
        self.launcher.fail_warm(self, status, log)

    def stop(self, why):
        if self.killed_by is None:
            self.killed_by = why
        if "sandbox" in self.request:
            if self.sandbox is None:  # still waiting for one
                self.launcher.dequeue(self)
                self.status = signal.SIGKILL  # the wait status of a process killed so
                return self.finish_if_done()
            # Once the program's status came, its sandbox may serve another run already.
            if self.sandbox.run is self:
                self.sandbox.end()
            return
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass  # already gone

    def on_read(self, fd):
        try:
            data = os.read(fd, CHUNK)
        except BlockingIOError:
            return
        if not data:
            self.launcher.selector.unregister(fd)
            os.close(fd)
            del self.readers[fd]
            return self.finish_if_done()
        if self.killed_by == "output_limit":
            return
        room = self.limit - self.kept
        name = self.readers[fd]
        self.out[name].append(data[:room])
        self.kept += min(room, len(data))
        if len(data) > room:
            self.truncated = name
            self.stop("output_limit")

    def on_write(self, fd):
        data = self.writers[fd]
        try:
            sent = os.write(fd, data) if data else 0
        except BlockingIOError:
            return
        except OSError:  # the program closed its end (EPIPE): it reads no more input
            sent = len(data)
        self.writers[fd] = data = data[sent:]
        if not data:
            self.close_writer(fd)

    def close_writer(self, fd):
        self.launcher.selector.unregister(fd)
        os.close(fd)
        del self.writers[fd]

    def on_exit(self):
        if self.status is not None:
            return
        pid, status = os.waitpid(self.pid, 0 if self.pidfd is not None else os.WNOHANG)
        if pid == 0:
            return
        self.status = status
        if self.pidfd is not None:
            self.launcher.selector.unregister(self.pidfd)
            os.close(self.pidfd)
            self.pidfd = None
        self.finish_if_done()

    def finish_if_done(self):
        if self.status is None or self.readers:
            return
        for fd in list(self.writers):
            self.close_writer(fd)
        self.launcher.finish(self)


class Sandbox:
    """A warm sandbox: bwrap running zygote.py, which forks one program at a time."""

    def __init__(self, launcher, key, spec):
        self.launcher, self.key = launcher, key
        self.ready, self.ending, self.run, self.log = False, False, None, bytearray()
        self.start_deadline = time.monotonic() + START_SECONDS
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        log_r, log_w = os.pipe()
        log_w = above_stdio(log_w)
        child_ends = [(1, log_w), (2, log_w), (CONTROL_FD, above_stdio(theirs.detach()))]
        for target, data in ((int(k), base64.b64decode(v)) for k, v in spec["inputs"].items()):
            r, w = os.pipe()
            os.write(w, data)  # a seccomp program: far below a pipe's capacity
            os.close(w)
            child_ends.append((target, above_stdio(r)))
        null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        child_ends.append((0, null))
        try:
            self.pid = spawn(spec["argv"], spec["env"], child_ends)
        except OSError:
            ours.close()
            os.close(log_r)
            raise
        finally:
            for fd in {fd for _, fd in child_ends}:
                os.close(fd)
        self.control = ours
        self.log_fd = log_r
        os.set_blocking(log_r, False)
        launcher.selector.register(ours, selectors.EVENT_READ, (self, "control"))
        launcher.selector.register(log_r, selectors.EVENT_READ, (self, "log"))
        launcher.unready.add(self)

    def on_control(self):
        try:
            message = self.control.recv(1 << 16)
        except OSError:
            message = b""
        if not message:
            return self.gone()
        if message == b"ready":
            self.ready = True
            self.launcher.started(self)
            return
        status, retire = map(int, message.split())
        run, self.run = self.run, None
        # Ended already (its run was stopped as the status came), or unable to be as it was: not reused.
        if retire or self.ending:
            self.end()
        else:
            self.launcher.release(self)
        run.on_status(status)

    def on_log(self):
        if self.log_fd is None:  # closed by an earlier event of the same wait
            return
        try:
            data = os.read(self.log_fd, CHUNK)
        except BlockingIOError:
            return
        if not data:
            self.launcher.selector.unregister(self.log_fd)
            os.close(self.log_fd)
            self.log_fd = None
        else:
            self.log += data[: SANDBOX_LOG_BYTES - len(self.log)]

    def take(self, run):
        self.run, run.sandbox = run, self
        run.dispatch()

    def end(self):
        self.ending = True
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass  # already gone

    def gone(self):
        sel = self.launcher.selector
        sel.unregister(self.control)
        self.control.close()
        if self.log_fd is not None:
            self.on_log()  # what it printed last, if it is still unread
            if self.log_fd is not None:
                sel.unregister(self.log_fd)
                os.close(self.log_fd)
        self.end()
        _, status = os.waitpid(self.pid, 0)
        self.launcher.forget(self)
        if not self.ready:
            self.launcher.start_failed(self, status, bytes(self.log))
        elif self.run is not None:
            self.run.on_sandbox_gone(status, bytes(self.log))


class Launcher:
    def __init__(self):
        self.selector = selectors.DefaultSelector()
        self.runs = {}
        # Warm sandboxes by the key of how they start: that start, those idle, how many may be, and the
        # runs waiting for one.
        self.starts, self.idle, self.idle_caps, self.queued = {}, {}, {}, {}
        self.unready = set()  # warm sandboxes started and not ready yet
        self.pending = b""
        os.set_blocking(0, False)
        self.selector.register(0, selectors.EVENT_READ, (None, "requests"))
        # A reply is written whole even when coa reads it slowly.
        self.replies = os.fdopen(1, "wb", buffering=0)

    def reply(self, message):
        data = (json.dumps(message) + "\n").encode()
        view = memoryview(data)
        while view:
            view = view[self.replies.write(view) :]

    def enqueue(self, spec, run):
        """Queues a run for a warm sandbox started as `spec` asks (an idle one, else one started)."""
        key = spec["key"]
        if "start" in spec:
            self.starts[key] = spec["start"]
        self.idle_caps[key] = spec["idle"]
        self.queued.setdefault(key, collections.deque()).append(run)
        self.pump(key)

    def dequeue(self, run):
        self.queued[run.request["sandbox"]["key"]].remove(run)

    def pump(self, key):
        """Hands waiting runs to idle sandboxes; starts sandboxes for the others, START_AT_ONCE at most."""
        queue, idle = self.queued.get(key, ()), self.idle.setdefault(key, [])
        while queue and idle:
            idle.pop().take(queue.popleft())
        while queue and self.starting(key) < min(START_AT_ONCE, len(queue)):
            try:
                Sandbox(self, key, self.starts[key])
            except OSError as err:
                self.fail(queue.popleft(), *spawn_error(self.starts[key]["argv"], err))

    def starting(self, key):
        return sum(sandbox.key == key for sandbox in self.unready)

    def started(self, sandbox):
        """A sandbox is ready: it takes a waiting run, and while runs still wait, another starts (a burst
        of long programs must not wait for each other's ends)."""
        self.unready.discard(sandbox)
        self.release(sandbox)
        self.pump(sandbox.key)

    def start_failed(self, sandbox, status, log):
        """A sandbox ended before it was ready: the first waiting run is answered EWARM (its caller runs
        it elsewhere), so that a start that cannot work does not hold the others forever."""
        self.unready.discard(sandbox)
        queue = self.queued.get(sandbox.key)
        if queue:
            self.fail_warm(queue.popleft(), status, log)
        self.pump(sandbox.key)

    def fail(self, run, error, code):
        del self.runs[run.id]
        self.reply({"id": run.id, "error": error, "code": code})

    def fail_warm(self, run, status, log):
        """EWARM: the run's sandbox ended before the program ran, with what the sandbox printed."""
        why = log.decode(errors="replace").strip() or f"wait status {status}"
        self.fail(run, f"the warm sandbox ended before the run: {why}", "EWARM")

    def release(self, sandbox):
        queue = self.queued.get(sandbox.key)
        waiting = self.idle.setdefault(sandbox.key, [])
        if queue:
            sandbox.take(queue.popleft())
        elif len(waiting) < self.idle_caps[sandbox.key]:
            waiting.append(sandbox)
        else:
            sandbox.end()

    def forget(self, sandbox):
        waiting = self.idle.get(sandbox.key, [])
        if sandbox in waiting:
            waiting.remove(sandbox)

    def on_requests(self):
        data = os.read(0, CHUNK)
        if not data:
            for run in list(self.runs.values()):
                run.stop("aborted")
            for waiting in self.idle.values():
                for sandbox in waiting:
                    sandbox.end()
            sys.exit(0)
        lines = (self.pending + data).split(b"\n")
        self.pending = lines.pop()
        for line in lines:
            request = json.loads(line)
            if request.get("kill"):
                run = self.runs.get(request["id"])
                if run is not None:
                    run.stop("aborted")
                continue
            try:
                run = self.runs[request["id"]] = Run(self, request)
            except OSError as err:
                error, code = spawn_error(request["argv"], err)
                self.reply({"id": request["id"], "error": error, "code": code})
                continue
            if "sandbox" in request:
                self.enqueue(request["sandbox"], run)

    def finish(self, run):
        del self.runs[run.id]
        status = run.status
        self.reply(
            {
                "id": run.id,
                "stdout": base64.b64encode(b"".join(run.out["stdout"])).decode(),
                "stderr": base64.b64encode(b"".join(run.out["stderr"])).decode(),
                "truncated": run.truncated,
                "killedBy": run.killed_by,
                "exitCode": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
            }
        )

    def serve(self):
        while True:
            now = time.monotonic()
            for run in list(self.runs.values()):
                if run.killed_by is None and run.deadline is not None and now >= run.deadline:
                    run.stop("wall_timeout")
            for sandbox in [b for b in self.unready if not b.ending and now >= b.start_deadline]:
                sandbox.end()
            waiting = [r.deadline - now for r in self.runs.values() if r.killed_by is None and r.deadline is not None]
            waiting += [b.start_deadline - now for b in self.unready if not b.ending]
            polled = any(r.pid is not None and r.pidfd is None and r.status is None for r in self.runs.values())
            timeout = min([max(0.0, w) for w in waiting] + ([POLL_SECONDS] if polled else []), default=None)
            for key, _ in self.selector.select(timeout):
                run, what = key.data
                if what == "requests":
                    self.on_requests()
                elif what == "control":
                    run.on_control()
                elif what == "log":
                    run.on_log()
                elif what == "read":
                    run.on_read(key.fd)
                elif what == "write":
                    run.on_write(key.fd)
                else:
                    run.on_exit()
            if polled:
                for run in list(self.runs.values()):
                    if run.pid is not None and run.pidfd is None:
                        run.on_exit()


if __name__ == "__main__":
    # Nothing coa's process left open may reach the programs (posix_spawn closes only what is
    # marked close-on-exec): a test runner's IPC socket, say, would otherwise be inside the sandbox.
    try:
        last = max(int(fd) for fd in os.listdir("/proc/self/fd"))
    except OSError:  # no /proc: the descriptor limit, which a container may set to a billion
        last = min(os.sysconf("SC_OPEN_MAX"), 1 << 16)
    os.closerange(3, last + 1)
    Launcher().serve()
