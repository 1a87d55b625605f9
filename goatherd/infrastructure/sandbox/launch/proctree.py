"""Find and kill every descendant of a process (the subreaper fallback; stdlib only).

A process that set ``PR_SET_CHILD_SUBREAPER`` adopts every orphan among its
descendants: a command that double-forks, or whose child calls ``setsid``,
still has all its processes below the subreaper in the parent links of
``/proc``. ``kill_tree`` walks those links, stops every process it finds
(``SIGSTOP``: a stopped process can neither fork nor exit, so the tree holds
still), rescans until no new process appears, then kills them all with
``SIGKILL``, and repeats plain kill rounds for anything that slipped through
(a process with a fatal signal pending cannot fork any more).

Signals go through pidfds opened while the process is verified to be the one
scanned (same start time), so a recycled pid is never signalled.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

__all__ = [
    "ProcessInfo",
    "become_subreaper",
    "kill_tree",
    "live_descendants",
    "process_table",
    "read_process",
]

_PR_SET_CHILD_SUBREAPER: Final = 36
_STOPPED: Final = frozenset("Tt")
_DEAD: Final = frozenset("ZX")
_KILL_ROUNDS: Final = 50
_PAUSE: Final = 0.002


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    """One process as ``/proc/PID/stat`` shows it.

    Attributes:
        pid: the process id.
        ppid: its parent's id.
        state: the one-letter state (``R``, ``S``, ``T``, ``Z`` ...).
        start: its start time in clock ticks since boot (with ``pid``, unique).
    """

    pid: int
    ppid: int
    state: str
    start: int

    @property
    def alive(self) -> bool:
        """Whether the process still runs (neither zombie nor dead)."""
        return self.state not in _DEAD


def become_subreaper() -> None:
    """Make this process adopt its descendants' orphans.

    Raises:
        OSError: when ``prctl`` refuses.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(errno)}")


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


def process_table() -> dict[int, ProcessInfo]:
    """Return every process of this pid namespace, by pid."""
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (info := read_process(int(name))) is not None:
            table[info.pid] = info
    return table


def _descendants(root: int, table: dict[int, ProcessInfo]) -> list[ProcessInfo]:
    children: dict[int, list[ProcessInfo]] = {}
    for info in table.values():
        children.setdefault(info.ppid, []).append(info)
    found, queue = [], [root]
    while queue:
        for child in children.pop(queue.pop(), []):
            found.append(child)
            queue.append(child.pid)
    return found


def live_descendants(root: int) -> list[ProcessInfo]:
    """Return the running (not zombie) descendants of ``root``."""
    return [p for p in _descendants(root, process_table()) if p.alive]


def _tree(root: int, include_root: bool) -> list[ProcessInfo]:
    table = process_table()
    members = _descendants(root, table)
    if include_root and root in table:
        members.insert(0, table[root])
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
        self.fds[info.pid, info.start] = fd
        return info.pid, info.start

    def new(self, members: list[ProcessInfo]) -> list[ProcessInfo]:
        return [p for p in members if (p.pid, p.start) not in self.fds]

    def signal(self, keys: Iterable[tuple[int, int]], signum: int) -> None:
        for key in keys:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self.fds[key], signum)

    def all_stopped(self) -> bool:
        for pid, start in self.fds:
            info = read_process(pid)
            if (
                info
                and info.start == start
                and info.alive
                and info.state not in _STOPPED
            ):
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
        held.signal(list(held.fds), signal.SIGKILL)
        _kill_rounds(held, root, include_root)
        return len(held.fds)
    finally:
        held.close()
