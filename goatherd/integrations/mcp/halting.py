"""A halt ends the command an environment is running.

While ``run`` executes, a watcher thread follows the environment's path in
the trace. When a halt lands there (from this server or any other process),
it kills the command: every process carrying the run's marker variable, and
everything below the confinement launcher that started it (the launcher is a
subreaper, so a command's orphans stay below it). The run then ends as a
killed command and the tool answers that the environment was halted.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Final

from goatherd.domain import ScopeHalted, decode_fact
from goatherd.infrastructure.sandbox.launch import proctree
from goatherd.infrastructure.store import SqlAlchemyTraceStore

__all__ = [
    "HaltWatch",
    "MARKER",
]

MARKER: Final = "GOATHERD_RUN"
"""The variable naming one run in its processes' environment."""
_POLL_SECONDS: Final = 0.2


class HaltWatch:
    """Watch ``owner``'s path during one run; kill the run when it is halted."""

    def __init__(self, store: SqlAlchemyTraceStore, owner: str) -> None:
        """Watch from ``owner``'s current head on."""
        self._store = store
        self._owner = owner
        self.token = os.urandom(12).hex()
        self._seen = store.head(owner)
        """The path's next ordinal when last read."""
        self._done = threading.Event()
        self._halted = threading.Event()
        self._thread = threading.Thread(
            target=self._watch, name=f"goatherd-halt-watch-{owner}", daemon=True
        )

    @property
    def halted(self) -> bool:
        """Whether a halt landed while the run was watched."""
        return self._halted.is_set()

    def __enter__(self) -> HaltWatch:
        """Start watching."""
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        """Stop watching; a halt that landed by now still counts."""
        self._done.set()
        self._thread.join()
        if not self._halted.is_set() and self._halt_landed():
            self._halted.set()

    def _watch(self) -> None:
        while not self._done.wait(_POLL_SECONDS):
            try:
                landed = self._halt_landed()
            except Exception:  # noqa: S112 - a failed read must not end the run
                continue
            if landed:
                self._halted.set()
                break
        while self._halted.is_set() and not self._done.is_set():
            _kill_marked(self.token)
            self._done.wait(_POLL_SECONDS / 4)

    def _halt_landed(self) -> bool:
        head = self._store.head(self._owner)
        if head == self._seen:
            return False
        entries = self._store.read_path(self._owner, self._seen - 1)
        self._seen = head
        for entry in entries:
            try:
                event = decode_fact(entry.record).event
            except Exception:  # noqa: S112 - a record not of ours to read
                continue
            if isinstance(event, ScopeHalted):
                return True
        return False


def _kill_marked(token: str) -> None:
    """Kill every process of the run ``token`` names, and its launcher's tree."""
    needle = f"{MARKER}={token}".encode()
    me = os.getpid()
    for pid in _marked(needle):
        launcher = _launcher_of(pid, me)
        with contextlib.suppress(OSError):
            if launcher is not None:
                proctree.kill_tree(launcher, include_root=False)
            else:
                proctree.kill_tree(pid, include_root=True)


def _marked(needle: bytes) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                held = handle.read()
        except OSError:
            continue
        if needle in held.split(b"\0"):
            found.append(int(name))
    return found


def _launcher_of(pid: int, server: int) -> int | None:
    """Return the ancestor of ``pid`` whose parent is this server, if any."""
    current = pid
    for _ in range(64):
        parent = _parent(current)
        if parent is None or parent <= 1:
            return None
        if parent == server:
            return current
        current = parent
    return None


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    return int(fields[1]) if len(fields) > 1 else None
