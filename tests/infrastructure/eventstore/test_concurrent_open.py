"""Several processes opening the runtime on one new SQLite file at once."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

import goatherd
from goatherd.infrastructure.blobs.store import SqlBlobStore
from goatherd.infrastructure.store import SQLiteTraceStore

WORKERS = 8


def _open_and_append(path: str, barrier: multiprocessing.synchronize.Barrier) -> None:
    store = SQLiteTraceStore(path)
    barrier.wait(timeout=60)
    for index in range(5):
        SqlBlobStore(store)  # creates the blob tables if absent
        store.append(
            goatherd.TRUSTED_APPEND_CONTEXT,
            goatherd.AppendBatch(
                f"{os.getpid()}:{index}",
                (
                    goatherd.AppendGroup(
                        "owner",
                        fact_drafts=(
                            goatherd.RecordDraft(
                                "capture", "test.v1", {"pid": os.getpid(), "i": index}
                            ),
                        ),
                    ),
                ),
            ),
        )
    store.close()


@pytest.mark.integration
def test_eight_processes_creating_the_blob_tables_never_fail_locked(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "trace.sqlite")
    SQLiteTraceStore(path).close()
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(WORKERS)
    workers = [
        context.Process(target=_open_and_append, args=(path, barrier))
        for _ in range(WORKERS)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [w.exitcode for w in workers] == [0] * WORKERS
    with SQLiteTraceStore(path) as store:
        assert store.max_position() == WORKERS * 5 - 1
