"""One cgroup v2 leaf per command, killed as a whole (stdlib only).

Where this process sits in a cgroup v2 hierarchy it may write (the host
delegated it, or it runs as root), each command gets a fresh leaf below this
process's own cgroup. The launcher's child joins the leaf before anything
else runs, so every process the command starts - whatever it does with
sessions, process groups or parent links - stays a member; writing ``1`` to
the leaf's ``cgroup.kill`` (Linux >= 5.14) kills them all at once. A confined
command cannot leave the leaf: moving a process means writing a
``cgroup.procs`` file, which lies outside its writable roots.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

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

LEAF_PREFIX: Final = "goatherd-exec-"
_POLL_FIRST: Final = 0.0005
_POLL_MAX: Final = 0.02


class CgroupUnavailableError(OSError):
    """Raised when no writable cgroup v2 hierarchy holds this process."""


@dataclass(frozen=True, slots=True)
class _Mount:
    root: str
    point: str


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


def _cgroup2_mounts(mountinfo: str) -> list[_Mount]:
    mounts = []
    for line in mountinfo.splitlines():
        head, _, tail = line.partition(" - ")
        fields = head.split()
        if tail.split()[:1] == ["cgroup2"] and len(fields) >= 5:
            mounts.append(_Mount(_unescape(fields[3]), _unescape(fields[4])))
    return mounts


def _own_path(cgroup_file: str) -> str | None:
    for line in cgroup_file.splitlines():
        if line.startswith("0::"):
            return line[3:]
    return None


def _locate(proc: Path) -> Path:
    path = _own_path((proc / "cgroup").read_text())
    if path is None:
        raise CgroupUnavailableError(0, "this process is in no cgroup v2 hierarchy")
    mounts = _cgroup2_mounts((proc / "mountinfo").read_text())
    for mount in mounts:
        root = mount.root.rstrip("/")
        if path == root or path.startswith(root + "/"):
            return Path(mount.point + path[len(root) :])
    where = "no cgroup2 filesystem is mounted" if not mounts else "not mounted here"
    raise CgroupUnavailableError(0, f"cgroup v2 path {path}: {where}")


def delegated_cgroup(proc: Path = Path("/proc/self")) -> Path:
    """Return this process's own cgroup v2 directory, if it may make leaves there.

    Raises:
        CgroupUnavailableError: naming why not (cgroup v1 only, not mounted,
            not writable).
    """
    directory = _locate(proc)
    for target in (directory, directory / "cgroup.procs"):
        if not os.access(target, os.W_OK):
            raise CgroupUnavailableError(0, f"{target} is not writable (not delegated)")
    return directory


def make_leaf(parent: Path) -> Path:
    """Create a fresh leaf below ``parent`` that supports ``cgroup.kill``.

    Raises:
        OSError: when the leaf cannot be made (then nothing is left behind).
    """
    leaf = parent / f"{LEAF_PREFIX}{os.getpid()}-{secrets.token_hex(6)}"
    leaf.mkdir()
    if not (leaf / "cgroup.kill").exists():
        leaf.rmdir()
        raise CgroupUnavailableError(0, "this kernel has no cgroup.kill (Linux 5.14)")
    return leaf


def join_leaf(leaf: Path) -> None:
    """Move the calling process into ``leaf``."""
    with open(leaf / "cgroup.procs", "w") as procs:
        procs.write("0")


def kill_leaf(leaf: Path) -> None:
    """SIGKILL every process in ``leaf`` (a removed leaf is fine)."""
    try:
        with open(leaf / "cgroup.kill", "w") as kill:
            kill.write("1")
    except FileNotFoundError:
        pass


def leaf_pids(leaf: Path) -> list[int]:
    """Return the processes in ``leaf`` (none once it is removed)."""
    try:
        return [int(line) for line in (leaf / "cgroup.procs").read_text().split()]
    except FileNotFoundError:
        return []


def leaf_populated(leaf: Path) -> bool:
    """Whether any process is still in ``leaf`` (or below it)."""
    try:
        events = (leaf / "cgroup.events").read_text()
    except FileNotFoundError:
        return False
    return "populated 1" in events.splitlines()


def wait_leaf_empty(leaf: Path, timeout: float) -> bool:
    """Wait until ``leaf`` holds no process; return whether it emptied in time."""
    deadline, pause = time.monotonic() + timeout, _POLL_FIRST
    while leaf_populated(leaf):
        if time.monotonic() > deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, _POLL_MAX)
    return True


def remove_leaf(leaf: Path) -> None:
    """Remove an empty ``leaf``; an already removed one is fine.

    Raises:
        OSError: ``EBUSY`` while processes remain in it.
    """
    with contextlib.suppress(FileNotFoundError):
        leaf.rmdir()


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


def sweep_stale_leaves(parent: Path, timeout: float = 1.0) -> list[Path]:
    """Kill and remove the leaves whose creating process has died.

    A leaf outlives its exec only when both the host and its launcher were
    killed outright; what still runs in it is killed here.

    Returns:
        The leaves removed.
    """
    removed = []
    for leaf in parent.glob(f"{LEAF_PREFIX}*"):
        if leaf.is_dir() and not _host_alive(leaf.name):
            kill_leaf(leaf)
            if wait_leaf_empty(leaf, timeout):
                remove_leaf(leaf)
                removed.append(leaf)
    return removed
