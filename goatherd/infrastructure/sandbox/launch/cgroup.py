"""One cgroup v2 leaf per command, killed as a whole (stdlib only).

Where this process sits in a cgroup v2 hierarchy it may write (the host
delegated it, or it runs as root), each command gets a fresh leaf below this
process's own cgroup. The launcher's child joins the leaf before anything
else runs, so every process the command starts - whatever it does with
sessions, process groups or parent links - stays a member; writing ``1`` to
the leaf's ``cgroup.kill`` (Linux >= 5.14) kills them all at once. A confined
command cannot leave the leaf: moving a process means writing a
``cgroup.procs`` file, which lies outside its writable roots.

Paths are plain strings, and the module imports little: the launcher loads it
on every exec.
"""

from __future__ import annotations

import contextlib
import os
import time

__all__ = [
    "CgroupUnavailableError",
    "LEAF_PREFIX",
    "delegated_cgroup",
    "join_leaf",
    "kill_leaf",
    "leaf_pids",
    "leaf_populated",
    "make_leaf",
    "remove_leaf",
    "sweep_stale_leaves",
    "wait_leaf_empty",
]

LEAF_PREFIX = "goatherd-exec-"
_POLL_FIRST = 0.0005
_POLL_MAX = 0.02


class CgroupUnavailableError(OSError):
    """Raised when no writable cgroup v2 hierarchy holds this process."""


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo.
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def _cgroup2_mounts(mountinfo: str) -> list[tuple[str, str]]:
    """Return (root inside the hierarchy, mount point) of each cgroup2 mount."""
    mounts = []
    for line in mountinfo.splitlines():
        head, _, tail = line.partition(" - ")
        fields = head.split()
        if tail.split()[:1] == ["cgroup2"] and len(fields) >= 5:
            mounts.append((_unescape(fields[3]), _unescape(fields[4])))
    return mounts


def _own_path(cgroup_file: str) -> str | None:
    for line in cgroup_file.splitlines():
        if line.startswith("0::"):
            return line[3:]
    return None


def _read(path: str) -> str:
    with open(path) as file:
        return file.read()


def _locate(proc: str) -> str:
    path = _own_path(_read(os.path.join(proc, "cgroup")))
    if path is None:
        raise CgroupUnavailableError(0, "this process is in no cgroup v2 hierarchy")
    mounts = _cgroup2_mounts(_read(os.path.join(proc, "mountinfo")))
    for root, point in mounts:
        root = root.rstrip("/")
        if path == root or path.startswith(root + "/"):
            return point + path[len(root) :]
    where = "no cgroup2 filesystem is mounted" if not mounts else "not mounted here"
    raise CgroupUnavailableError(0, f"cgroup v2 path {path}: {where}")


def delegated_cgroup(proc: str | os.PathLike[str] = "/proc/self") -> str:
    """Return this process's own cgroup v2 directory, if it may make leaves there.

    Raises:
        CgroupUnavailableError: naming why not (cgroup v1 only, not mounted,
            not writable).
    """
    directory = _locate(os.fspath(proc))
    for target in (directory, os.path.join(directory, "cgroup.procs")):
        if not os.access(target, os.W_OK):
            raise CgroupUnavailableError(0, f"{target} is not writable (not delegated)")
    return directory


def make_leaf(parent: str) -> str:
    """Create a fresh leaf below ``parent`` that supports ``cgroup.kill``.

    Raises:
        OSError: when the leaf cannot be made (then nothing is left behind).
    """
    leaf = os.path.join(parent, f"{LEAF_PREFIX}{os.getpid()}-{os.urandom(6).hex()}")
    os.mkdir(leaf)
    if not os.path.exists(os.path.join(leaf, "cgroup.kill")):
        os.rmdir(leaf)
        raise CgroupUnavailableError(0, "this kernel has no cgroup.kill (Linux 5.14)")
    return leaf


def _write(path: str, text: str) -> None:
    with open(path, "w") as file:
        file.write(text)


def join_leaf(leaf: str) -> None:
    """Move the calling process into ``leaf``."""
    _write(os.path.join(leaf, "cgroup.procs"), "0")


def kill_leaf(leaf: str) -> None:
    """SIGKILL every process in ``leaf`` (a removed leaf is fine)."""
    with contextlib.suppress(FileNotFoundError):
        _write(os.path.join(leaf, "cgroup.kill"), "1")


def leaf_pids(leaf: str) -> list[int]:
    """Return the processes in ``leaf`` (none once it is removed)."""
    try:
        return [int(line) for line in _read(os.path.join(leaf, "cgroup.procs")).split()]
    except FileNotFoundError:
        return []


def leaf_populated(leaf: str) -> bool:
    """Whether any process is still in ``leaf`` (or below it)."""
    try:
        events = _read(os.path.join(leaf, "cgroup.events"))
    except FileNotFoundError:
        return False
    return "populated 1" in events.splitlines()


def wait_leaf_empty(leaf: str, timeout: float) -> bool:
    """Wait until ``leaf`` holds no process; return whether it emptied in time."""
    deadline, pause = time.monotonic() + timeout, _POLL_FIRST
    while leaf_populated(leaf):
        if time.monotonic() > deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, _POLL_MAX)
    return True


def remove_leaf(leaf: str) -> None:
    """Remove an empty ``leaf``; an already removed one is fine.

    Raises:
        OSError: ``EBUSY`` while processes remain in it.
    """
    with contextlib.suppress(FileNotFoundError):
        os.rmdir(leaf)


def _host_alive(name: str) -> bool:
    pid = name[len(LEAF_PREFIX) :].split("-")[0]
    if not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale_leaves(parent: str, timeout: float = 1.0) -> list[str]:
    """Kill and remove the leaves whose creating process has died.

    A leaf outlives its exec only when both the host and its launcher were
    killed outright; what still runs in it is killed here.

    Returns:
        The leaves removed.
    """
    removed = []
    for name in os.listdir(parent):
        leaf = os.path.join(parent, name)
        if name.startswith(LEAF_PREFIX) and not _host_alive(name):
            kill_leaf(leaf)
            if wait_leaf_empty(leaf, timeout):
                remove_leaf(leaf)
                removed.append(leaf)
    return removed
