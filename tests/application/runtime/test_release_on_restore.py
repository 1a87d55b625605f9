"""A restore releases its checkpoint's snapshot: the digest stays, the bytes go.

ADR 0056: ``checkpoint.restored`` names the digests it releases and the hold
is dropped once that record committed; a retry returns the snapshot while its
bytes are still stored, else ``SnapshotReleasedError``. Everything runs on
SQLite and on PostgreSQL (when ``GOATHERD_TEST_DB_URL`` names a server).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from returns.result import Failure, Success
from sqlalchemy import text

from goatherd.application import SandboxSpec
from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    CheckpointCreated,
    CheckpointNotRestorableError,
    CheckpointPruned,
    CheckpointRestored,
    CheckpointState,
    RecordDraft,
    SnapshotReleasedError,
)
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.sandbox.memory import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.store import SqlAlchemyTraceStore, open_trace_store
from tests.integration.runtime.support import fresh_postgres_database

ROOT = Path(__file__).resolve().parents[3]


class Died(BaseException):
    pass


def dies_at(boundary: str, suffix: str = ""):
    def hook(seen: str, intent: str) -> None:
        if seen == boundary and intent.endswith(suffix):
            raise Died(f"{seen} {intent}")

    return hook


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "trace.db")
        return
    with fresh_postgres_database() as found:
        yield found


def sandbox() -> MemorySandbox:
    sb = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"1\n"}))
    sb.create(SandboxSpec())
    return sb


def stored(store: SqlAlchemyTraceStore) -> dict[str, list[str]]:
    """Every stored digest with its holders (sorted)."""
    with store.engine.connect() as conn:
        digests = conn.execute(text("SELECT digest FROM content_blobs")).scalars()
        out: dict[str, list[str]] = {d: [] for d in digests}
        rows = conn.execute(text("SELECT holder, digest FROM blob_holders"))
        for holder, digest in rows:
            out.setdefault(digest, []).append(holder)
    return {d: sorted(h) for d, h in out.items()}


def payloads(
    store: SqlAlchemyTraceStore, owner: str, schema: str
) -> list[dict[str, Any]]:
    return [
        dict(e.record.payload)
        for e in store.read_path(owner)
        if e.record.envelope.schema_ref == schema
    ]


def test_a_restore_releases_the_snapshot_and_records_the_digest(url):
    with open_trace_store(url) as store:
        mgr = scope_manager_for(store)
        main = sandbox()
        root = mgr.create("root", main).unwrap()
        cp = mgr.create_checkpoint(root.id, b"the conversation so far").unwrap()
        digest = cp.snapshot_digest
        assert stored(store) == {digest: [f"{cp.id}#snapshot"]}
        main.write_file("a.txt", b"broken\n")
        assert mgr.restore_checkpoint(cp.id) == Success(b"the conversation so far")
        assert main.read_file("a.txt") == b"1\n"
        assert stored(store) == {}  # the bytes went
        created = payloads(store, cp.id, CheckpointCreated.SCHEMA)
        restored = payloads(store, cp.id, CheckpointRestored.SCHEMA)
        assert created[0]["snapshot_digest"] == digest  # the digest stays
        assert restored == [
            {
                "checkpoint_id": cp.id,
                "backend": "memory",
                "revision": cp.workspace.revision,
                "state_digest": cp.workspace.digest(),
                "released": [digest],
            }
        ]
        view = mgr.checkpoint(cp.id)
        assert view is not None
        assert (view.state, view.snapshot, view.snapshot_digest) == (
            CheckpointState.USED,
            b"",
            digest,
        )
        assert mgr.context.model.checkpoint(cp.id).released == (digest,)
        assert verify_trace(store).ok


def test_identical_bytes_another_checkpoint_holds_stay(url):
    with open_trace_store(url) as store:
        mgr = scope_manager_for(store)
        root = mgr.create("root", sandbox()).unwrap()
        first = mgr.create_checkpoint(root.id, b"same bytes").unwrap()
        second = mgr.create_checkpoint(root.id, b"same bytes").unwrap()
        assert mgr.restore_checkpoint(first.id) == Success(b"same bytes")
        assert stored(store) == {first.snapshot_digest: [f"{second.id}#snapshot"]}
        assert mgr.restore_checkpoint(second.id) == Success(b"same bytes")
        assert stored(store) == {}
        assert verify_trace(store).ok


def test_a_retry_after_the_commit_and_before_the_release_gets_the_snapshot(url):
    with open_trace_store(url) as store:
        mgr = scope_manager_for(store)
        main = sandbox()
        root = mgr.create("root", main).unwrap()
        cp = mgr.create_checkpoint(root.id, b"history").unwrap()
        main.write_file("a.txt", b"broken\n")
        mgr.context.faults = dies_at("after-commit", f"restore:{cp.seq}")
        with pytest.raises(Died):
            mgr.restore_checkpoint(cp.id, seq=41)
        mgr.context.faults = None
        assert cp.snapshot_digest in stored(store)  # committed, not yet released
        assert verify_trace(store).ok  # bytes still held after a release: fine
    with open_trace_store(url) as store:
        mgr = scope_manager_for(store)
        mgr.attach_sandbox(root.id, main)
        size = store.fact_count()
        assert mgr.restore_checkpoint(cp.id, seq=41) == Success(b"history")
        assert store.fact_count() == size  # the retry appended nothing
        assert stored(store) == {}  # and finished the release
        assert main.read_file("a.txt") == b"1\n"
        assert verify_trace(store).ok


def test_a_retry_after_the_release_says_the_restore_happened_and_names_the_digest(
    url,
):
    with open_trace_store(url) as store:
        mgr = scope_manager_for(store)
        main = sandbox()
        root = mgr.create("root", main).unwrap()
        cp = mgr.create_checkpoint(root.id, b"history").unwrap()
        main.write_file("a.txt", b"broken\n")
        mgr.context.faults = dies_at("after-release")
        with pytest.raises(Died):
            mgr.restore_checkpoint(cp.id, seq=51)
        mgr.context.faults = None
        main.write_file("a.txt", b"the agent went on\n")
        result = mgr.restore_checkpoint(cp.id, seq=51)
        assert isinstance(result, Failure)
        error = result.failure()
        assert isinstance(error, SnapshotReleasedError)
        assert isinstance(error, CheckpointNotRestorableError)
        assert error.digest == cp.snapshot_digest
        assert error.checkpoint_id == cp.id
        assert str(error) == (
            f"checkpoint {cp.id} was restored by this attempt already; its snapshot"
            f" {cp.snapshot_digest} was released at the restore, only its digest"
            " remains"
        )
        # The stored outcome touches nothing: the workspace is the agent's.
        assert main.read_file("a.txt") == b"the agent went on\n"
        other = mgr.restore_checkpoint(cp.id, seq=52)
        assert isinstance(other, Failure)
        assert isinstance(other.failure(), CheckpointNotRestorableError)
        assert not isinstance(other.failure(), SnapshotReleasedError)
        assert verify_trace(store).ok


def test_an_empty_snapshot_s_retry_is_exact(url):
    with open_trace_store(url) as store:
        mgr = scope_manager_for(store)
        root = mgr.create("root", sandbox()).unwrap()
        cp = mgr.create_checkpoint(root.id, b"").unwrap()
        mgr.context.faults = dies_at("after-release")
        with pytest.raises(Died):
            mgr.restore_checkpoint(cp.id, seq=61)
        mgr.context.faults = None
        assert mgr.restore_checkpoint(cp.id, seq=61) == Success(b"")


def test_a_prune_after_a_restore_releases_nothing_twice(url):
    with open_trace_store(url) as store:
        mgr = scope_manager_for(store)
        root = mgr.create("root", sandbox()).unwrap()
        used = mgr.create_checkpoint(root.id, b"used one").unwrap()
        kept = mgr.create_checkpoint(root.id, b"kept one").unwrap()
        mgr.restore_checkpoint(used.id).unwrap()
        assert mgr.prune_checkpoints(root.id) == 2
        pruned = {
            p["checkpoint_id"]: p["released"]
            for cp in (used, kept)
            for p in payloads(store, cp.id, CheckpointPruned.SCHEMA)
        }
        assert pruned == {used.id: [], kept.id: [kept.snapshot_digest]}
        assert stored(store) == {}
        assert verify_trace(store).ok


def test_another_process_sees_the_restore_and_no_bytes(tmp_path):
    db = tmp_path / "trace.db"
    with open_trace_store(str(db)) as store:
        mgr = scope_manager_for(store)
        root = mgr.create("root", sandbox()).unwrap()
        cp = mgr.create_checkpoint(root.id, b"private words").unwrap()
    script = textwrap.dedent(
        f"""
        from goatherd.application import SandboxSpec
        from goatherd.infrastructure.bootstrap import scope_manager_for
        from goatherd.infrastructure.sandbox.memory import (
            MemorySandbox, MemorySandboxConfig,
        )
        from goatherd.infrastructure.store import open_trace_store
        sb = MemorySandbox(MemorySandboxConfig(files={{"a.txt": b"1\\n"}}))
        sb.create(SandboxSpec())
        with open_trace_store({str(db)!r}) as store:
            mgr = scope_manager_for(store)
            mgr.attach_sandbox("scope:root", sb)
            print(mgr.restore_checkpoint({cp.id!r}).unwrap().decode())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "private words"
    with open_trace_store(str(db)) as store:
        mgr = scope_manager_for(store)
        view = mgr.checkpoint(cp.id)
        assert view is not None
        assert (view.state, view.snapshot) == (CheckpointState.USED, b"")
        assert stored(store) == {}


def test_a_restore_recorded_without_released_keeps_its_bytes_until_prune(url):
    # A trace written before restores released (or by the seed): its
    # checkpoint.restored names nothing, so the bytes stay until a prune.
    with open_trace_store(url) as store:
        mgr = scope_manager_for(store)
        root = mgr.create("root", sandbox()).unwrap()
        cp = mgr.create_checkpoint(root.id, b"old format").unwrap()
        old = CheckpointRestored(
            checkpoint_id=cp.id,
            backend=cp.workspace.backend,
            revision=cp.workspace.revision,
            state_digest=cp.workspace.digest(),
        )
        assert "released" not in old.payload()
        store.append(
            TRUSTED_APPEND_CONTEXT,
            AppendBatch(
                "old-writer:restore",
                (
                    AppendGroup(
                        cp.id,
                        fact_drafts=(
                            RecordDraft(
                                old.mode.value,
                                old.schema_ref,
                                old.payload(),
                                kind_label=old.kind_label,
                            ),
                        ),
                    ),
                ),
            ),
        )
        view = mgr.checkpoint(cp.id)
        assert view is not None
        assert view.state is CheckpointState.USED
        assert cp.snapshot_digest in stored(store)
        assert mgr.prune_checkpoints(root.id) == 1
        assert payloads(store, cp.id, CheckpointPruned.SCHEMA)[0]["released"] == [
            cp.snapshot_digest
        ]
        assert stored(store) == {}
        assert verify_trace(store).ok


def test_verify_still_reports_the_missing_bytes_of_a_checkpoint_not_restored(url):
    with open_trace_store(url) as store:
        mgr = scope_manager_for(store)
        root = mgr.create("root", sandbox()).unwrap()
        used = mgr.create_checkpoint(root.id, b"restored one").unwrap()
        kept = mgr.create_checkpoint(root.id, b"still valid").unwrap()
        mgr.restore_checkpoint(used.id).unwrap()
        assert verify_trace(store).ok
        with store.transaction() as conn:
            conn.execute(text("DELETE FROM blob_holders"))
            conn.execute(text("DELETE FROM content_blobs"))
        report = verify_trace(store)
        assert not report.ok
        text_of = " ".join(str(problem) for problem in report.problems)
        assert kept.snapshot_digest in text_of
        assert used.snapshot_digest not in text_of
