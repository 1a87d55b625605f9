"""Copy a SQLite trace's WAL back into the database file off the appending thread.

In WAL mode every commit appends its pages to the ``-wal`` file; a checkpoint
copies them back into the database file and syncs both. SQLite runs that
checkpoint inside the ``COMMIT`` that crosses ``wal_autocheckpoint`` pages, so
an appender stalled on the checkpoint's copying and ``fsync`` every few dozen
appends (11-15% of append time, see ``docs/benchmarks.md``).

A :class:`WalCheckpointer` is one daemon thread per writable file store with
its own connection. Writers call :meth:`nudge` after each commit; every
``WAKE_COMMITS`` commits (or at once when the ``-wal`` file grew by the
threshold since the thread last ran) the nudge wakes the thread, and when the
WAL is past ``threshold_pages`` it runs a ``PASSIVE`` checkpoint, which never
waits for or blocks a writer or reader. The WAL file keeps its size once it
grew (SQLite reuses it from the start), so its size cannot tell how much is
left to copy; waking the thread on every commit made it checkpoint every
commit, and the thread switch and the fight for the interpreter lock cost the
appending thread more CPU than the commit's own statements (see
``docs/benchmarks.md``, "Store throughput").
The writer connection keeps a much larger ``wal_autocheckpoint`` as a safety
net: under sustained load a passive checkpoint cannot finish the frames
written while it ran, and only a checkpoint at a commit boundary lets the WAL
restart from its beginning. By then the thread has copied almost everything,
so that checkpoint is short.

Durability is unchanged: the same ``synchronous`` level applies to every
checkpoint, whichever thread runs it.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from typing import Final

__all__ = ["SAFETY_NET_PAGES", "THRESHOLD_PAGES", "WalCheckpointer"]

THRESHOLD_PAGES: Final = 1000
"""WAL size (pages) at which the thread checkpoints: SQLite's own default."""

WAKE_COMMITS: Final = 64
"""Commits between wake-ups (a single-record append writes about 14 pages)."""

SAFETY_NET_PAGES: Final = 16_000
"""The writer connection's ``wal_autocheckpoint`` (about 64 MiB of WAL)."""

_IDLE_SECONDS: Final = 5.0
_LOG = logging.getLogger(__name__)


class WalCheckpointer:
    """A daemon thread that checkpoints one SQLite file's WAL when it grows."""

    def __init__(
        self,
        path: str,
        *,
        synchronous: str,
        threshold_pages: int = THRESHOLD_PAGES,
        page_size: int = 4096,
    ) -> None:
        self._path = path
        self._wal = path + "-wal"
        self._synchronous = synchronous
        self._threshold_bytes = threshold_pages * (page_size + 24)
        self._wake = threading.Event()
        self._stop = False
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._commits = 0
        self._seen_bytes = 0
        self.checkpoints = 0

    def nudge(self) -> None:
        """Tell the thread that a commit happened (cheap; call after each).

        Wakes (and first starts) the thread every ``WAKE_COMMITS`` commits,
        or when the ``-wal`` file grew by the threshold since the last wake
        (a large commit); otherwise it costs one ``stat``. (The count is not
        locked: a lost increment only delays a wake-up by one commit.)
        """
        self._commits += 1
        if self._commits < WAKE_COMMITS:
            try:
                size = os.stat(self._wal).st_size
            except OSError:
                return
            if size < self._seen_bytes + self._threshold_bytes:
                return
        self._commits = 0
        try:
            self._seen_bytes = os.stat(self._wal).st_size
        except OSError:
            self._seen_bytes = 0
        if self._thread is None:
            self._start()
        self._wake.set()

    def close(self) -> None:
        """Stop the thread and wait for it (idempotent)."""
        with self._lock:
            thread, self._thread = self._thread, None
            self._stop = True
        if thread is not None:
            self._wake.set()
            thread.join()

    def _start(self) -> None:
        with self._lock:
            if self._thread is not None or self._stop:
                return
            self._thread = threading.Thread(
                target=self._run, name=f"goatherd-wal-{os.path.basename(self._path)}"
            )
            self._thread.daemon = True
            self._thread.start()

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        try:
            while not self._stop:
                self._wake.wait(_IDLE_SECONDS)
                self._wake.clear()
                if self._stop or not self._wal_is_large():
                    continue
                if conn is None:
                    conn = self._connect()
                self._checkpoint(conn)
        except Exception:
            # Never fatal: the writer's safety-net autocheckpoint still runs.
            _LOG.exception("WAL checkpointer for %s stopped", self._path)
        finally:
            if conn is not None:
                conn.close()

    def _wal_is_large(self) -> bool:
        try:
            return os.stat(self._wal).st_size >= self._threshold_bytes
        except OSError:
            return False

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self._path, isolation_level=None, check_same_thread=False
        )
        # Another process's checkpoint in progress: skip this round, never wait.
        conn.execute("PRAGMA busy_timeout=0")
        conn.execute(f"PRAGMA synchronous={self._synchronous}")
        return conn

    def _checkpoint(self, conn: sqlite3.Connection) -> None:
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            self.checkpoints += 1
        except sqlite3.OperationalError as error:
            _LOG.debug("passive checkpoint of %s skipped: %s", self._path, error)
