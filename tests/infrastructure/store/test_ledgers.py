"""Checkpoint blobs (runtime-spec 4.3) and the materialization ledger (13.3)."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from goatherd import (
    WorkspaceState,
)
from goatherd.domain import (
    AppendIntentConflictError,
    CheckpointBlob,
    CheckpointBlobTooLargeError,
)
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.store import (
    DEFAULT_CHECKPOINT_BLOB_LIMIT,
    SqlAlchemyTraceStore,
)
from goatherd.infrastructure.store.schema import checkpoint_snapshots
from tests.infrastructure.store.helpers import dump

STATE = WorkspaceState(backend="git", revision="abc123", data={"stash": "def"})


class TestCheckpointBlobs:
    def test_blobs_round_trip_oldest_first(self, store: SqlAlchemyTraceStore) -> None:
        store.persist_checkpoint_blob("cp:s:2", "s", 2, STATE, b"two", 200)
        store.persist_checkpoint_blob("cp:s:1", "s", 1, STATE, b"", 100)
        blobs, corrupt = store.load_checkpoint_blobs()
        assert corrupt == ()
        assert blobs == (
            CheckpointBlob("cp:s:1", "s", 1, STATE, b"", 100),
            CheckpointBlob("cp:s:2", "s", 2, STATE, b"two", 200),
        )

    def test_persisting_again_replaces_and_delete_removes(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        store.persist_checkpoint_blob("cp:s:1", "s", 1, STATE, b"old", 100)
        store.persist_checkpoint_blob("cp:s:1", "s", 1, STATE, b"new", 100)
        assert store.load_checkpoint_blobs()[0][0].snapshot == b"new"
        store.delete_checkpoint_blob("cp:s:1")
        store.delete_checkpoint_blob("cp:absent")
        assert store.load_checkpoint_blobs() == ((), ())

    def test_an_unsigned_sequence_above_the_signed_range_round_trips(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        seq = 2**64 - 2
        store.persist_checkpoint_blob("cp:s:big", "s", seq, STATE, b"x", 1)
        assert store.load_checkpoint_blobs()[0][0].seq == seq

    def test_an_oversized_snapshot_is_refused_and_nothing_is_written(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        store.with_checkpoint_blob_limit(4)
        before = dump(store)
        with pytest.raises(
            CheckpointBlobTooLargeError, match="over the store's 4-byte"
        ):
            store.persist_checkpoint_blob("cp:s:1", "s", 1, STATE, b"12345", 1)
        assert dump(store) == before
        assert store.with_checkpoint_blob_limit(0).checkpoint_blob_limit == (
            DEFAULT_CHECKPOINT_BLOB_LIMIT
        )

    def test_a_corrupt_row_is_skipped_and_reported(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        store.persist_checkpoint_blob("cp:s:1", "s", 1, STATE, b"a", 1)
        store.persist_checkpoint_blob("cp:s:2", "s", 2, STATE, b"b", 2)
        with store.engine.begin() as conn:
            conn.execute(
                update(checkpoint_snapshots)
                .where(checkpoint_snapshots.c.checkpoint_id == "cp:s:1")
                .values(state_json="{not json")
            )
        blobs, corrupt = store.load_checkpoint_blobs()
        assert [b.checkpoint_id for b in blobs] == ["cp:s:2"]
        assert corrupt == ("cp:s:1",)


class TestMaterializationLedger:
    def test_a_completed_intent_reads_back_and_the_same_digest_is_fine(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        assert store.read_completed_materialization("m:1") is None
        store.record_completed_materialization("m:1", "d1", '{"outcome":"success"}')
        store.record_completed_materialization("m:1", "d1", '{"outcome":"success"}')
        assert store.read_completed_materialization("m:1") == (
            "d1",
            '{"outcome":"success"}',
        )

    def test_a_different_digest_conflicts_and_changes_nothing(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        store.record_completed_materialization("m:1", "d1", "{}")
        before = dump(store)
        with pytest.raises(
            AppendIntentConflictError,
            match="materialize intent 'm:1' was already committed with different",
        ):
            store.record_completed_materialization("m:1", "d2", "{}")
        assert dump(store) == before

    def test_a_marker_is_swapped_only_while_it_is_the_stored_receipt(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        digest = "ab" * 32
        store.record_completed_materialization("m:1", digest, '{"state":"started"}')
        before = dump(store)
        for wrong in (("cd" * 32, '{"state":"started"}'), (digest, '{"state":"x"}')):
            assert not store.replace_materialization("m:1", *wrong, "{}")
        assert not store.replace_materialization("m:2", digest, "{}", None)
        assert dump(store) == before
        assert store.replace_materialization(
            "m:1", digest, '{"state":"started"}', '{"outcome":"success"}'
        )
        assert store.read_completed_materialization("m:1") == (
            digest,
            '{"outcome":"success"}',
        )
        assert store.replace_materialization(
            "m:1", digest, '{"outcome":"success"}', None
        )
        assert store.read_completed_materialization("m:1") is None
        store.record_completed_materialization("m:1", digest, '{"outcome":"success"}')
        report = verify_trace(store)
        assert report.ok, report.problems
