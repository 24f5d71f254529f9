"""A warm sandbox's resident interpreter (src/tools/sandbox.ts, "warm"): runs one program at a time in
a forked child, so that a run costs a fork instead of a sandbox and an interpreter started for it.

Started by launcher.py inside bwrap as `python3 -I -B -u -c <this file>`, its control socket (a
SOCK_SEQPACKET) on descriptor 5. Protocol, one datagram each, in text (json and socket would cost
every sandbox's start ~15 ms of imports):
  <- "ready"  once started.
  -> "RLIMIT_CPU soft hard\nRLIMIT_AS soft hard\n...\nfilter <hex>", with four descriptors: the
     program's stdin, stdout, stderr, and a pipe carrying its source.
  <- "<wait status> <retire: 0 or 1>"  once the program ended and the sandbox was wiped; retire when
     it could not be made as it was (the launcher then ends this sandbox).
The child holds what a fresh `python3 -I -B -u /box/main.py` would: the same modules imported,
__main__, argv, descriptors 0-2 only, the run's rlimits, and the run's seccomp filter (no new
processes). Between runs the writable mounts are emptied and their modes restored.
"""

import sys

# What a fresh interpreter holds when a program starts; the child forgets what this process imports.
FRESH_MODULES = set(sys.modules)

import _socket  # noqa: E402
import ctypes  # noqa: E402
import gc  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402

CONTROL_FD = 5
PROGRAM = "/box/main.py"
# /box/main.py is a link to this file: the program and its tracebacks read their source from there.
PROGRAM_FILE = "/dev/shm/.coa-program.py"
SCRATCH = ("/tmp", "/dev/shm")
# The program runs two levels deeper than in a fresh interpreter (this file's frame and exec): its
# recursion limit is raised by as much, so that a runaway recursion stops where it would have.
EXEC_DEPTH = 2
PR_SET_DUMPABLE, PR_SET_SECCOMP, PR_SET_NO_NEW_PRIVS, SECCOMP_MODE_FILTER = 4, 22, 38, 2

libc = ctypes.CDLL(None, use_errno=True)


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def prctl(option, arg, pointer=0):
    if libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(pointer), ctypes.c_ulong(0), ctypes.c_ulong(0)):
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}): {os.strerror(err)}")


def read_all(fd):
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


def remove_tree(path):
    os.chmod(path, 0o700)  # a run may have taken its own permissions away
    for entry in os.scandir(path):
        if entry.is_dir(follow_symlinks=False):
            remove_tree(entry.path)
        else:
            os.unlink(entry.path)
    os.rmdir(path)


def wipe(modes, niceness):
    """Empties the writable mounts and restores their modes; False if this sandbox is not as it was."""
    try:
        for top in SCRATCH:
            os.chmod(top, modes[top])
            for entry in os.scandir(top):
                if entry.is_dir(follow_symlinks=False):
                    remove_tree(entry.path)
                else:
                    os.unlink(entry.path)
        # A run may lower its sandbox's priority (raising it back needs a privilege this one lacks).
        return os.getpriority(os.PRIO_PROCESS, 0) == niceness
    except Exception:  # noqa: BLE001 (a tree too deep to walk included): this sandbox is not reused
        return False


def receive(control):
    """A datagram and the descriptors that came with it."""
    message, ancillary, _, _ = control.recvmsg(1 << 16, _socket.CMSG_LEN(4 * 4))
    fds = []
    for level, kind, data in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds += [int.from_bytes(data[i : i + 4], sys.byteorder) for i in range(0, len(data) - 3, 4)]
    return message, fds


def serve(control):
    """Answers runs until the launcher closes the socket; returns in a forked child, with its run."""
    modes = {top: os.stat(top).st_mode & 0o7777 for top in SCRATCH}
    niceness = os.getpriority(os.PRIO_PROCESS, 0)
    # Not dumpable: a run may not read or trace this process (/proc/<pid>/mem, ptrace), which outlives it.
    prctl(PR_SET_DUMPABLE, 0)
    control.send(b"ready")
    while True:
        message, fds = receive(control)
        if not message:
            sys.exit(0)
        run = message.decode().splitlines()
        source = read_all(fds[3])
        fd = os.open(PROGRAM_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
        with open(fd, "wb") as out:
            out.write(source)
        # A collection in the child would touch, so copy, every page of this heap: only its own objects count.
        gc.freeze()
        pid = os.fork()
        if pid == 0:
            return fds, run
        for fd in fds:
            os.close(fd)
        _, status = os.waitpid(pid, 0)
        clean = wipe(modes, niceness)
        control.send(b"%d %d" % (status, not clean))
        if not clean:
            sys.exit(0)


def enter_run(control, fds, run):
    """In the child: becomes the run's process, as bwrap and prlimit would have started it."""
    control.close()
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    # Up to the highest open one: the descriptor limit may be a container's billion.
    os.closerange(3, max(map(int, os.listdir("/proc/self/fd"))) + 1)
    prctl(PR_SET_DUMPABLE, 1)  # its own /proc entries are its own again, as in a fresh process
    filter_hex = ""
    for line in run:
        name, *values = line.split()
        if name == "filter":
            filter_hex = values[0]
        else:
            resource.setrlimit(getattr(resource, name), (int(values[0]), int(values[1])))
    program = ctypes.create_string_buffer(bytes.fromhex(filter_hex))
    fprog = SockFprog(len(program.raw) // 8, ctypes.addressof(program))
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog))
    for name in set(sys.modules) - FRESH_MODULES:
        del sys.modules[name]
    main = type(sys)("__main__")
    loader = sys.modules["_frozen_importlib_external"].SourceFileLoader("__main__", PROGRAM)
    main.__dict__.update(
        __loader__=loader, __annotations__={}, __file__=PROGRAM, __cached__=None, __builtins__=sys.modules["builtins"]
    )
    sys.modules["__main__"] = main
    sys.setrecursionlimit(sys.getrecursionlimit() + EXEC_DEPTH)
    sys.argv = [PROGRAM]
    sys.orig_argv = [sys.executable, "-I", "-B", "-u", PROGRAM]
    return main


def exit_status(exc):
    """The status a fresh interpreter exits with on this SystemExit, its message printed as it would."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    print(exc.code, file=sys.stderr)
    return 1


def finish(main, status):
    """Ends the program as the interpreter's exit would (threads joined, atexit handlers, __main__'s
    objects released and collected, streams flushed), without tearing down this process's heap: a
    finalization would touch, so copy, every page of it."""
    threading = sys.modules.get("threading")
    if threading is not None:
        threading._shutdown()
    import atexit

    atexit._run_exitfuncs()
    names = main.__dict__
    # As the interpreter clears a module: names with one leading underscore first, then the rest.
    for name in [n for n in names if n.startswith("_") and not n.startswith("__")]:
        names[name] = None
    for name in [n for n in names if n != "__builtins__"]:
        names[name] = None
    gc.collect()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            status = status or 120  # as the interpreter does when its streams cannot be flushed
    os._exit(status)


control = _socket.socket(fileno=CONTROL_FD)
fds, run = serve(control)
main = enter_run(control, fds, run)
del control, fds, run
try:
    with open(PROGRAM, "rb") as source:
        code = compile(source.read(), PROGRAM, "exec", dont_inherit=True)
    exec(code, main.__dict__)
    status = 0
except SystemExit as exc:
    status = exit_status(exc)
except BaseException as exc:
    # As the interpreter reports a program's uncaught exception, from the program's own frames.
    tb = exc.__traceback__.tb_next
    sys.excepthook(type(exc), exc.with_traceback(tb), tb)
    # 130: what a fresh interpreter's death by SIGINT after an uncaught KeyboardInterrupt reads as.
    status = 130 if isinstance(exc, KeyboardInterrupt) else 1
finish(main, status)
