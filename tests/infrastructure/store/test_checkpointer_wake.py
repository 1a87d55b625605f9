"""The WAL checkpointer wakes its thread only when there may be work for it."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from goatherd.infrastructure.store.checkpointer import WAKE_COMMITS, WalCheckpointer


def _wal_file(tmp_path: Path, pages: int) -> tuple[str, sqlite3.Connection]:
    # The connection stays open: closing the last one checkpoints the WAL away.
    path = str(tmp_path / "t.sqlite")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute("CREATE TABLE t (body BLOB)")
    for _ in range(pages):
        conn.execute("INSERT INTO t VALUES (zeroblob(4000))")
    return path, conn


def test_commits_on_a_small_wal_do_not_wake_the_thread(tmp_path: Path) -> None:
    path, conn = _wal_file(tmp_path, 2)
    checkpointer = WalCheckpointer(path, synchronous="NORMAL")
    try:
        for _ in range(WAKE_COMMITS - 1):
            checkpointer.nudge()
        assert checkpointer._thread is None
        checkpointer.nudge()  # the WAKE_COMMITS-th commit wakes it
        assert checkpointer._thread is not None
    finally:
        checkpointer.close()
        conn.close()


def test_a_wal_past_the_threshold_wakes_the_thread_at_once(tmp_path: Path) -> None:
    path, conn = _wal_file(tmp_path, 40)
    checkpointer = WalCheckpointer(path, synchronous="NORMAL", threshold_pages=20)
    try:
        checkpointer.nudge()
        assert checkpointer._thread is not None
        deadline = time.monotonic() + 10
        while checkpointer.checkpoints == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert checkpointer.checkpoints == 1
    finally:
        checkpointer.close()
        conn.close()
