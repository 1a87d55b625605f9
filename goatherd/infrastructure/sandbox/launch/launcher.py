"""The launcher: confine one command, supervise it, leave no process behind.

The host starts ``python -I -S -B -c BOOTSTRAP SANDBOX_DIR CONTROL_FD
STATUS_FD`` with an empty environment, in its own session. Nothing of the
request reaches this interpreter's environment or arguments: the command, its
arguments and environment, the working directory and the policy arrive as
one frame on ``CONTROL_FD``. Then the launcher

1. makes itself a child subreaper (orphans of the command come back to it);
2. forks the command's process, which joins the exec's cgroup leaf (when the
   host made one), changes directory, restricts itself with Landlock (and
   the seccomp filter a network or metadata denial asks for), restores
   default signal dispositions and ``execve``s the command with the
   request's environment;
3. waits for that process while reaping adopted orphans; the host closing
   ``CONTROL_FD`` (a timeout, or the host died) means "stop now";
4. kills whatever is left - ``cgroup.kill`` on the leaf, or every descendant
   found below itself - reaps them, and reports the command's exit status.

Reports are frames on ``STATUS_FD`` (close-on-exec, so the command never
holds it): ``{"refused": STAGE, "detail": ...}`` when the command did not
start, then ``{"exit": CODE, "leftovers": N}`` (``CODE`` is ``None`` when the
host said stop), or ``{"failed": ..., "leftovers": N}`` when supervising
failed after the command started (it was killed).

A frame is a 4-byte big-endian length and a ``marshal``-encoded dict: both
ends run the same interpreter (``sys.executable``), and unlike ``json``,
``marshal`` costs no import (about 8 ms of CPU per exec here). Frames travel
only over the two private pipes between the host and its own launcher; the
command never holds either (both are close-on-exec in the launcher).
"""

from __future__ import annotations

import ctypes
import importlib
import marshal
import os
import select
import signal
import time

from . import landlock_sys

# cgroup, proctree and seccomp are imported where a mode needs them: the
# launcher starts on every exec, and each module it loads costs time.

__all__ = ["BOOTSTRAP", "frame", "main", "unframe"]

# os._exit: the launcher writes only through raw descriptors, so it skips the
# interpreter's shutdown (milliseconds on every exec).
BOOTSTRAP = (
    "import os, sys; sys.path.append(sys.argv.pop(1)); "
    "from launch.launcher import main; os._exit(main(sys.argv[1:]))"
)
_REAP_INTERVAL = 0.5
_CLEANUP_SECONDS = 10.0
_REFUSED = 126
_PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper() -> None:
    """Adopt the orphans among this process's descendants."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(errno)}")


def frame(message: dict[str, object]) -> bytes:
    """Encode ``message`` as one frame."""
    data = marshal.dumps(message)
    return len(data).to_bytes(4, "big") + data


def unframe(data: bytes) -> list[dict[str, object]]:
    """Decode the complete frames in ``data`` (a cut-off tail is dropped)."""
    messages, at = [], 0
    while at + 4 <= len(data):
        size = int.from_bytes(data[at : at + 4], "big")
        if at + 4 + size > len(data):
            break
        message = marshal.loads(data[at + 4 : at + 4 + size])  # noqa: S302 - own pipe
        if isinstance(message, dict):
            messages.append(message)
        at += 4 + size
    return messages


def _report(fd: int, **message: object) -> None:
    detail = message.get("detail")
    if isinstance(detail, str):
        message["detail"] = detail[:2000]  # one frame stays one atomic write
    os.write(fd, frame(message))


def _read_exactly(fd: int, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise ValueError("the host closed the control pipe before the request")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _read_config(fd: int) -> dict[str, object]:
    size = int.from_bytes(_read_exactly(fd, 4), "big")
    config = marshal.loads(_read_exactly(fd, size))  # noqa: S302 - own pipe
    if not isinstance(config, dict):
        raise ValueError("the request is not a dict")
    return config


def _confine(config: dict[str, object]) -> None:
    leaf = str(config["cgroup"])
    if leaf:
        from . import cgroup

        cgroup.join_leaf(leaf)
    os.chdir(str(config["cwd"]))
    writable = [str(p) for p in config["writable"]]  # type: ignore[attr-defined]
    abi = int(config["abi"])  # type: ignore[call-overload]
    landlock_sys.restrict_self(writable, bool(config["deny_network"]), abi)
    if _wants_filter(config):
        from . import seccomp

        seccomp.install_filter(
            metadata=bool(config["deny_metadata"]),
            network=bool(config["deny_network"]),
            io_uring=not config["allow_io_uring"],
        )
    # Python ignores SIGPIPE and SIGXFSZ; an ignored signal survives execve.
    for signum in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(signum, signal.SIG_DFL)


def _wants_filter(config: dict[str, object]) -> bool:
    """A network denial or a metadata denial installs the seccomp filter."""
    return bool(config["deny_metadata"]) or bool(config["deny_network"])


def _command(config: dict[str, object]) -> tuple[list[str], dict[str, str]]:
    argv = [str(a) for a in config["argv"]]  # type: ignore[attr-defined]
    env = {str(k): str(v) for k, v in config["env"].items()}  # type: ignore[attr-defined]
    return argv, env


def _run_command(config: dict[str, object], status: int) -> None:
    """Confine this (forked) process, then become the command."""
    try:
        argv, env = _command(config)
        _confine(config)
    except BaseException as exc:  # every failure is reported: fail-closed
        _report(status, refused="confine", detail=f"{type(exc).__name__}: {exc}")
        return
    try:
        os.execvpe(argv[0], argv, env)  # noqa: S606 - the caller's command, confined
    except OSError as exc:
        _report(status, refused="exec", detail=f"{argv[0]}: {exc.strerror}")


def _child(config: dict[str, object], status: int) -> None:
    """Run in the forked child; whatever happens, it never returns to the caller."""
    try:
        _run_command(config, status)
    finally:
        os._exit(_REFUSED)


def _reap(command: int) -> int | None:
    """Reap every exited child; return the command's wait status if it was one."""
    found = None
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return found
        if pid == 0:
            return found
        if pid == command:
            found = status


def _wait(command: int, control: int) -> int | None:
    """Return the command's wait status, or ``None`` when the host says stop."""
    pidfd = os.pidfd_open(command)
    try:
        while True:
            ready, _, _ = select.select([pidfd, control], [], [], _REAP_INTERVAL)
            status = _reap(command)
            if status is not None:
                return status
            if control in ready and not os.read(control, 4096):
                return None
    finally:
        os.close(pidfd)


def _reap_all(deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.001)


def _clean_up(config: dict[str, object]) -> int:
    """Kill every process the command left; return how many there were."""
    deadline = time.monotonic() + _CLEANUP_SECONDS
    leaf = str(config["cgroup"])
    if leaf:
        from . import cgroup

        left = len(cgroup.leaf_pids(leaf))
        cgroup.kill_leaf(leaf)
        if cgroup.wait_leaf_empty(leaf, _CLEANUP_SECONDS):
            cgroup.remove_leaf(leaf)  # the host removes it too, unless it died
    else:
        from . import proctree

        left = proctree.kill_tree(os.getpid(), include_root=False)
    _reap_all(deadline)
    return left


def _quiet_stdio() -> None:
    # The command holds the request's pipes; this process must not keep them
    # open, or the host would wait on it for end-of-file. Fresh pipes (not
    # /dev/null, which an unprivileged user may not be able to open) take
    # their places: reading gives end-of-file, writing fails.
    empty, closed = os.pipe()
    os.close(closed)
    os.dup2(empty, 0)
    os.close(empty)
    gone, sink = os.pipe()
    os.close(gone)
    os.dup2(sink, 1)
    os.dup2(sink, 2)
    os.close(sink)


def _preload(config: dict[str, object]) -> None:
    """Import, before the fork, the modules both processes will need once."""
    names = ["cgroup" if config["cgroup"] else "proctree"]
    if _wants_filter(config):
        names.append("seccomp")
    for name in names:
        importlib.import_module(f".{name}", __package__)


def _supervise(config: dict[str, object], control: int, status: int) -> int:
    _preload(config)
    command = os.fork()
    if command == 0:
        os.close(control)
        _child(config, status)
    wait_status, failure = None, None
    try:
        _quiet_stdio()
        wait_status = _wait(command, control)
    except Exception as exc:  # the tree is killed below; the host is told why
        failure = f"{type(exc).__name__}: {exc}"
    finally:
        leftovers = _clean_up(config)
    if failure is not None:
        _report(status, failed=failure, leftovers=leftovers)
        return _REFUSED
    code = None if wait_status is None else os.waitstatus_to_exitcode(wait_status)
    _report(status, exit=code, leftovers=leftovers)
    if code is None:
        return _REFUSED
    return code if code >= 0 else 128 - code


def main(argv: list[str]) -> int:
    """Run the launcher: ``CONTROL_FD STATUS_FD``; see the module docstring."""
    control, status = int(argv[0]), int(argv[1])
    os.set_inheritable(control, False)
    os.set_inheritable(status, False)
    try:
        config = _read_config(control)
        _become_subreaper()
    except Exception as exc:  # before the fork: the command does not run
        _report(status, refused="launcher", detail=f"{type(exc).__name__}: {exc}")
        return _REFUSED
    return _supervise(config, control, status)
