"""Find and kill every descendant of a process (the subreaper fallback; stdlib only).

A process that set ``PR_SET_CHILD_SUBREAPER`` (the launcher does) adopts
every orphan among its descendants: a command that double-forks, or whose
child calls ``setsid``, still has all its processes below the subreaper.
``kill_tree`` walks the tree, stops every process it finds (``SIGSTOP``: a
stopped process can neither fork nor exit, so the tree holds still), rescans
until no new process appears, then kills them all with ``SIGKILL``, and
repeats plain kill rounds for anything that slipped through (a process with
a fatal signal pending cannot fork any more).

The tree is walked through ``/proc/PID/task/TID/children`` (exact once the
tree is stopped), or by scanning every ``/proc/PID/stat`` where the kernel
lacks that file. Signals go through pidfds opened while the process is
verified to be the one scanned (same start time), so a recycled pid is never
signalled. The module imports little: the launcher loads it on every exec.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "ProcessInfo",
    "kill_tree",
    "live_descendants",
    "read_process",
]

_STOPPED = frozenset("Tt")
_DEAD = frozenset("ZX")
_KILL_ROUNDS = 50
_PAUSE = 0.002


class ProcessInfo:
    """One process as ``/proc/PID/stat`` shows it.

    Attributes:
        pid: the process id.
        ppid: its parent's id.
        state: the one-letter state (``R``, ``S``, ``T``, ``Z`` ...).
        start: its start time in clock ticks since boot (with ``pid``, unique).
    """

    __slots__ = ("pid", "ppid", "start", "state")

    def __init__(self, pid: int, ppid: int, state: str, start: int) -> None:
        self.pid, self.ppid, self.state, self.start = pid, ppid, state, start

    @property
    def key(self) -> tuple[int, int]:
        """``(pid, start)``: names this process and no later one."""
        return self.pid, self.start

    @property
    def alive(self) -> bool:
        """Whether the process still runs (neither zombie nor dead)."""
        return self.state not in _DEAD


def read_process(pid: int) -> ProcessInfo | None:
    """Return ``pid``'s stat line parsed, or ``None`` when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            line = stat.read().decode("ascii", "replace")
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name sits in parentheses and may itself contain ") ".
    fields = line[line.rindex(")") + 2 :].split()
    return ProcessInfo(pid, int(fields[1]), fields[0], int(fields[19]))


def _children_files(pid: int) -> list[int] | None:
    """Children of every thread of ``pid``; ``None`` without the files."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
        children = []
        for tid in tids:
            with open(f"/proc/{pid}/task/{tid}/children") as file:
                children += [int(child) for child in file.read().split()]
    except FileNotFoundError:
        return None if os.path.exists(f"/proc/{pid}") else []
    return children


def _scan_children() -> dict[int, list[int]]:
    by_parent: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (info := read_process(int(name))) is not None:
            by_parent.setdefault(info.ppid, []).append(info.pid)
    return by_parent


def _descendants(root: int) -> list[ProcessInfo]:
    found, queue = [], [root]
    table: dict[int, list[int]] | None = None
    while queue:
        pid = queue.pop()
        children = _children_files(pid) if table is None else None
        if children is None:
            table = table if table is not None else _scan_children()
            children = table.get(pid, [])
        for child in children:
            if (info := read_process(child)) is not None:
                found.append(info)
                queue.append(child)
    return found


def live_descendants(root: int) -> list[ProcessInfo]:
    """Return the running (not zombie) descendants of ``root``."""
    return [p for p in _descendants(root) if p.alive]


def _tree(root: int, include_root: bool) -> list[ProcessInfo]:
    members = _descendants(root)
    if include_root and (info := read_process(root)) is not None:
        members.insert(0, info)
    return [p for p in members if p.alive]


class _Held:
    """Pidfds of one tree's processes, each opened on the verified process."""

    def __init__(self) -> None:
        self.fds: dict[tuple[int, int], int] = {}

    def hold(self, info: ProcessInfo) -> tuple[int, int] | None:
        try:
            fd = os.pidfd_open(info.pid)
        except ProcessLookupError:
            return None
        again = read_process(info.pid)
        if again is None or again.start != info.start:
            os.close(fd)  # the pid was recycled between the scan and the open
            return None
        self.fds[info.key] = fd
        return info.key

    def new(self, members: list[ProcessInfo]) -> list[ProcessInfo]:
        return [p for p in members if p.key not in self.fds]

    def signal(self, keys: Iterable[tuple[int, int]], signum: int) -> None:
        for key in keys:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self.fds[key], signum)

    def all_stopped(self) -> bool:
        for pid, start in self.fds:
            info = read_process(pid)
            if info is None or info.start != start or not info.alive:
                continue  # gone: nothing left to stop
            if info.state not in _STOPPED:
                return False
        return True

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


def _hold_all(held: _Held, members: list[ProcessInfo]) -> list[tuple[int, int]]:
    return [key for p in members if (key := held.hold(p)) is not None]


def _freeze(held: _Held, root: int, include_root: bool, deadline: float) -> None:
    while True:
        new = held.new(_tree(root, include_root))
        held.signal(_hold_all(held, new), signal.SIGSTOP)
        if (not new and held.all_stopped()) or time.monotonic() > deadline:
            return
        time.sleep(_PAUSE)


def _kill_rounds(held: _Held, root: int, include_root: bool) -> None:
    for _ in range(_KILL_ROUNDS):
        rest = held.new(_tree(root, include_root))
        if not rest:
            return
        held.signal(_hold_all(held, rest), signal.SIGKILL)
        time.sleep(_PAUSE)


def kill_tree(root: int, *, include_root: bool, freeze_seconds: float = 2.0) -> int:
    """Kill every running descendant of ``root`` (and ``root`` itself if asked).

    The tree is frozen with ``SIGSTOP`` first (for at most ``freeze_seconds``;
    members resuming each other only delay this), then every member gets
    ``SIGKILL``. Killed processes still have to be reaped by their parents.

    Returns:
        How many processes were signalled.
    """
    held = _Held()
    try:
        _freeze(held, root, include_root, time.monotonic() + freeze_seconds)
        if not held.fds:
            return 0
        held.signal(list(held.fds), signal.SIGKILL)
        _kill_rounds(held, root, include_root)
        return len(held.fds)
    finally:
        held.close()
