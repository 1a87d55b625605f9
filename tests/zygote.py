"""A pre-imported Python that forks the suite's helper processes.

Tests that kill a process at every write boundary start the same program
dozens of times: ``goatherd mcp`` imports the MCP SDK and goatherd (about
0.8 s of CPU before it answers), a killed best-of-n session imports goatherd
(0.4 s). A zygote imports those modules once; each run is then a fork of it
that runs the module as ``python -m`` would (its own process, its own pid, the
caller's argv, environment, working directory and standard streams), so a
SIGKILL kills a real process and recovery starts from what it committed.

What a test starts is ``Zygote.command(module, *args)``: a small stdlib-only
launcher (``tests/zygote_launch.py``) hands its standard streams to the zygote,
waits for the fork's end and ends the same way (the same exit code, or killed
by the same signal). If the launcher is killed, the zygote kills the fork.

The zygote itself is single-threaded and opens nothing before it forks.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import runpy
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAUNCHER = Path(__file__).with_name("zygote_launch.py")


class Zygote:
    """A zygote process with ``preload`` imported, serving one socket."""

    def __init__(self, preload: Sequence[str]) -> None:
        self._dir = tempfile.mkdtemp(prefix="zygote-")
        self.socket_path = os.path.join(self._dir, "sock")
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.zygote", self.socket_path, *preload],
            cwd=ROOT,
            stdin=subprocess.PIPE,  # its end of file: the test process is gone
            stdout=subprocess.PIPE,
        )
        assert self._process.stdout is not None
        ready = self._process.stdout.readline()
        if ready.strip() != b"ready":
            self._process.kill()
            raise RuntimeError(f"the zygote did not start: {ready!r}")

    def command(self, module: str, *args: str) -> list[str]:
        """The argv that runs ``python -m module args`` as a fork of the zygote."""
        return [sys.executable, "-S", str(LAUNCHER), self.socket_path, module, *args]

    def close(self) -> None:
        assert self._process.stdin is not None
        assert self._process.stdout is not None
        self._process.stdin.close()
        self._process.wait(timeout=30)
        self._process.stdout.close()
        with contextlib.suppress(OSError):
            os.unlink(self.socket_path)
        with contextlib.suppress(OSError):
            os.rmdir(self._dir)


@contextlib.contextmanager
def zygote(preload: Sequence[str]) -> Iterator[Zygote]:
    started = Zygote(preload)
    try:
        yield started
    finally:
        started.close()


# ---------------------------------------------------------------- the zygote


def _receive(conn: socket.socket) -> tuple[dict[str, object], list[int]]:
    """Read one request: a 4-byte length, JSON, and the three stream fds."""
    head, fds, _, _ = socket.recv_fds(conn, 4, 3)
    size = int.from_bytes(head, "big")
    body = b""
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise EOFError("the launcher went away mid-request")
        body += chunk
    return json.loads(body), list(fds)


def _run_child(request: dict[str, object], fds: list[int]) -> None:
    """In the fork: become ``python -m module args`` and never return."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        env = request["env"]
        assert isinstance(env, dict)
        os.environ.clear()
        os.environ.update(env)
        os.chdir(str(request["cwd"]))
        args = request["args"]
        assert isinstance(args, list)
        sys.argv = [str(request["module"]), *args]
        try:
            runpy.run_module(
                str(request["module"]), run_name="__main__", alter_sys=True
            )
            code = 0
        except SystemExit as done:
            if done.code is None:
                code = 0
            elif isinstance(done.code, int):
                code = done.code
            else:
                print(done.code, file=sys.stderr)
                code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _serve(path: str) -> None:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(64)
    wake_r, wake_w = socket.socketpair()
    wake_r.setblocking(False)
    wake_w.setblocking(False)
    signal.set_wakeup_fd(wake_w.fileno())
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(server, selectors.EVENT_READ, "accept")
    selector.register(wake_r, selectors.EVENT_READ, "child")
    selector.register(sys.stdin.fileno(), selectors.EVENT_READ, "stdin")
    children: dict[int, socket.socket] = {}  # fork pid -> its launcher
    print("ready", flush=True)
    while True:
        for key, _ in selector.select(timeout=1.0):
            if key.data == "stdin":
                if not os.read(sys.stdin.fileno(), 4096):
                    for pid in children:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGKILL)
                    return
            elif key.data == "accept":
                conn, _ = server.accept()
                try:
                    request, fds = _receive(conn)
                except (OSError, EOFError, ValueError):
                    conn.close()
                    continue
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    server.close()
                    for other in children.values():
                        other.close()
                    conn.close()
                    _run_child(request, fds)
                for fd in fds:
                    os.close(fd)
                conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
                children[pid] = conn
                selector.register(conn, selectors.EVENT_READ, pid)
            elif isinstance(key.data, int):
                # A launcher sends nothing more: readable means it is gone.
                gone = key.fileobj
                assert isinstance(gone, socket.socket)
                if not gone.recv(1):
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(key.data, signal.SIGKILL)
                    selector.unregister(gone)
            # key.data == "child" (or a timeout): reap below
        with contextlib.suppress(BlockingIOError):
            while wake_r.recv(4096):
                pass
        _reap(children, selector)


def _reap(children: dict[int, socket.socket], selector: selectors.BaseSelector) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid)
        with contextlib.suppress(KeyError, ValueError):
            selector.unregister(conn)
        if os.WIFSIGNALED(status):
            outcome = {"signal": os.WTERMSIG(status)}
        else:
            outcome = {"code": os.waitstatus_to_exitcode(status)}
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps(outcome).encode() + b"\n")
        conn.close()


def main(argv: Sequence[str]) -> None:
    path, *preload = argv
    gc.disable()
    for module in preload:
        importlib.import_module(module)
    gc.freeze()
    gc.enable()
    _serve(path)


if __name__ == "__main__":
    main(sys.argv[1:])
