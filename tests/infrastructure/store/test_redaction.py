"""Erasing payloads by a recorded redaction (ADR 0062).

The erased bytes leave the SQLite file and its WAL; the record keeps its id,
schema, parents and path entries and reads back with ``redacted_by``; the
head chain and ``verify`` stay green; what may not be erased is refused with
one line naming why; a redaction replays under its intent id.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import text

from goatherd.cli import main
from goatherd.domain.contexts import TRUSTED_APPEND_CONTEXT, TRUSTED_READ_CONTEXT
from goatherd.domain.errors import (
    BatchShapeError,
    RedactionRefusedError,
    StoreUnavailableError,
    TraceStoreError,
    UnknownFactError,
)
from goatherd.domain.records import (
    REDACTION_OWNER,
    REDACTION_SCHEMA_REF,
    AppendBatch,
    AppendGroup,
    Record,
    RecordDraft,
)
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.projections.runner import ProjectionRunner
from goatherd.infrastructure.projections.views import SqlUiIndexView
from goatherd.infrastructure.store import (
    Redaction,
    SqlAlchemyTraceStore,
    SQLiteTraceStore,
    open_trace_store,
)
from goatherd.projections import UiIndexProjection
from tests.faults.conftest import postgres_url  # noqa: F401 (a fixture)

CTX = TRUSTED_APPEND_CONTEXT


def secret_batch(intent: str, secret: str, owner: str = "agent:a") -> AppendBatch:
    drafts = (
        RecordDraft(
            mode="capture",
            schema_ref="test.secret.v1",
            payload={"secret": secret, "padding": secret * 200},
        ),
    )
    return AppendBatch(intent, (AppendGroup(owner, fact_drafts=drafts),))


def fill(store: SqlAlchemyTraceStore, secret: str) -> tuple[str, str]:
    """One record to erase (with ``secret``) and one that stays; their ids."""
    erased = store.append(CTX, secret_batch("i:erase", secret)).fact_ids[0]
    kept = store.append(CTX, secret_batch("i:keep", "kept-value")).fact_ids[0]
    return erased, kept


def file_bytes(path: Path) -> bytes:
    data = b""
    for candidate in (path, Path(f"{path}-wal"), Path(f"{path}-journal")):
        if candidate.exists():
            data += candidate.read_bytes()
    return data


def test_erased_bytes_leave_the_sqlite_file_and_its_wal(tmp_path: Path) -> None:
    path = tmp_path / "t.sqlite"
    secret = f"SECRET-{uuid.uuid4().hex}"
    with SQLiteTraceStore(path) as store:
        erased, _ = fill(store, secret)
        assert secret.encode() in file_bytes(path)
        redaction = store.redact(CTX, "redact:1", [erased], "user asked (GDPR)")
        assert redaction.wal_truncated
        assert secret.encode() not in file_bytes(path)
        assert b"kept-value" in file_bytes(path)
    assert secret.encode() not in file_bytes(path)


def _check_redacted_reads(store: SqlAlchemyTraceStore, secret: str) -> None:
    erased, kept = fill(store, secret)
    head_before = store.trace_head()
    redaction = store.redact(CTX, "redact:1", [erased, erased], "asked")
    assert redaction.erased == (erased,)
    record = store.read_fact(TRUSTED_READ_CONTEXT, erased)
    assert isinstance(record, Record)
    assert record.redacted_by == redaction.redaction_record_id
    assert record.payload == {}
    assert record.envelope.schema_ref == "test.secret.v1"
    other = store.read_fact(TRUSTED_READ_CONTEXT, kept)
    assert isinstance(other, Record)
    assert other.payload["secret"] == "kept-value"
    marker = store.read_fact(TRUSTED_READ_CONTEXT, redaction.redaction_record_id)
    assert isinstance(marker, Record)
    assert marker.envelope.schema_ref == REDACTION_SCHEMA_REF
    assert marker.payload == {"erased": [erased], "reason": "asked"}
    assert marker.trace_owner_id == REDACTION_OWNER
    assert marker.envelope.caused_by_record_ids == (erased,)
    logged = {e.record.record_id: e.record for e in store.read_log(-1, 100)}
    assert logged[erased].redacted_by == redaction.redaction_record_id
    # The chain still extends the head noted before, and verify is green.
    assert store.verify_chain(expect=head_before).ok
    report = verify_trace(store)
    assert report.ok, report
    # A replay under the same intent returns the same receipt, erases nothing.
    again = store.redact(CTX, "redact:1", [erased], "asked")
    assert again.receipt == redaction.receipt
    # The erased content cannot be appended again (its id names the erasure).
    with pytest.raises(TraceStoreError, match="was erased by redaction"):
        store.append(CTX, secret_batch("i:again", secret))


def test_a_redacted_record_reads_back_with_redacted_by_sqlite(tmp_path: Path) -> None:
    with SQLiteTraceStore(tmp_path / "t.sqlite") as store:
        _check_redacted_reads(store, f"S-{uuid.uuid4().hex}")


def test_a_redacted_record_reads_back_with_redacted_by_postgres(
    postgres_url: str,  # noqa: F811 (a fixture)
) -> None:
    secret = f"S-{uuid.uuid4().hex}"
    with open_trace_store(postgres_url) as store:
        _check_redacted_reads(store, secret)
        with store.engine.connect() as conn:
            found = conn.execute(
                text("SELECT count(*) FROM records WHERE body_json LIKE :s"),
                {"s": f"%{secret}%"},
            ).scalar()
        assert found == 0


def test_what_may_not_be_erased_is_refused_in_one_line(tmp_path: Path) -> None:
    with SQLiteTraceStore(tmp_path / "t.sqlite") as store:
        erased, _ = fill(store, "x")
        receipt = store.append(
            CTX,
            AppendBatch(
                "i:scope",
                (
                    AppendGroup(
                        "scope:s",
                        fact_drafts=(
                            RecordDraft(
                                mode="declaration",
                                schema_ref="goatherd.scope.created.v1",
                                payload={"owner": "scope:s"},
                            ),
                        ),
                    ),
                ),
            ),
        )
        runtime = receipt.fact_ids[0]
        witness = store.read_fact(TRUSTED_READ_CONTEXT, erased).envelope.witness_ref
        cases = {
            runtime: "runtime goatherd.scope.created.v1 record",
            witness: "it is a witness",
            "ab" * 32: "no such record",
        }
        for record_id, message in cases.items():
            with pytest.raises((RedactionRefusedError, UnknownFactError)) as info:
                store.redact(CTX, f"r:{record_id}", [record_id], "asked")
            assert message in str(info.value)
            assert "\n" not in str(info.value)
        done = store.redact(CTX, "r:1", [erased], "asked")
        with pytest.raises(RedactionRefusedError, match="a redaction record"):
            store.redact(CTX, "r:2", [done.redaction_record_id], "asked")
        with pytest.raises(RedactionRefusedError, match="already erased"):
            store.redact(CTX, "r:3", [erased], "asked")
        with pytest.raises(RedactionRefusedError, match="at least one"):
            store.redact(CTX, "r:4", [], "asked")
        with pytest.raises(RedactionRefusedError, match="reason"):
            store.redact(CTX, "r:5", [erased], "  ")
        forged = RecordDraft(
            mode="declaration",
            schema_ref=REDACTION_SCHEMA_REF,
            payload={"erased": [erased], "reason": "forged"},
        )
        for owner in ("agent:a", REDACTION_OWNER):
            with pytest.raises(BatchShapeError, match="only redact"):
                store.append(
                    CTX,
                    AppendBatch(
                        f"f:{owner}", (AppendGroup(owner, fact_drafts=(forged,)),)
                    ),
                )
        assert verify_trace(store).ok


def test_two_stores_redacting_one_record_at_once_erase_it_once(
    postgres_url: str,  # noqa: F811 (a fixture)
) -> None:
    """Two PostgreSQL writers race to erase one record: one wins, one refuses."""
    with open_trace_store(postgres_url) as first:
        erased, _ = fill(first, "raced")
        outcomes: list[object] = []

        def erase(name: str) -> None:
            with open_trace_store(postgres_url) as store:
                try:
                    outcomes.append(store.redact(CTX, name, [erased], "race"))
                except RedactionRefusedError as error:
                    outcomes.append(error)

        workers = [
            threading.Thread(target=erase, args=(f"race:{n}",)) for n in range(4)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        refused = [o for o in outcomes if isinstance(o, RedactionRefusedError)]
        assert len(refused) == 3
        assert all("already erased" in str(e) for e in refused)
        assert verify_trace(first).ok


def test_log_show_and_verify_say_a_payload_was_erased(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.sqlite"
    with SQLiteTraceStore(path) as store:
        erased, _ = fill(store, "shown")
        noted = str(store.trace_head())
        redaction = store.redact(CTX, "redact:1", [erased], "asked")
    capsys.readouterr()
    assert main(["show", str(path), erased]) == 0
    out = capsys.readouterr().out
    assert f"erased by redaction {redaction.redaction_record_id}" in out
    assert "shown" not in out
    assert main(["show", str(path), erased, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["redacted_by"] == redaction.redaction_record_id
    assert main(["log", str(path)]) == 0
    assert "[payload erased by redaction" in capsys.readouterr().out
    assert main(["verify", str(path), "--expect-head", noted]) == 0


def test_the_trace_ui_index_in_the_same_file_loses_the_payload_too(
    tmp_path: Path,
) -> None:
    """The UI's read model copies payloads; a redaction erases those copies too."""
    path = tmp_path / "t.sqlite"
    secret = f"UI-{uuid.uuid4().hex}"
    with SQLiteTraceStore(path) as store:
        erased, _ = fill(store, secret)
        runner = ProjectionRunner(
            store,
            (UiIndexProjection(SqlUiIndexView.bind),),
            engine=store.engine,
        )
        runner.catch_up()
        assert file_bytes(path).count(secret.encode()) > 1  # the record and its copy
        redaction = store.redact(CTX, "redact:ui", [erased], "asked")
        assert secret.encode() not in file_bytes(path)
        runner.catch_up()
        with store.engine.connect() as conn:
            shown = [
                json.loads(raw)
                for (raw,) in conn.execute(
                    text("SELECT record_json FROM traceui_entries")
                )
            ]
        by_id = {row["id"]: row for row in shown}
        assert by_id[erased]["payload"] == {}
        assert by_id[erased]["redacted_by"] == redaction.redaction_record_id
        assert redaction.redaction_record_id in by_id


def _hold_snapshot(path: Path, release: threading.Event, held: threading.Event) -> None:
    """Keep a read transaction on an old snapshot until ``release`` is set."""
    import sqlite3

    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        conn.execute("SELECT count(*) FROM records").fetchone()
        held.set()
        release.wait(30)
        conn.execute("COMMIT")
    finally:
        conn.close()


@contextmanager
def _old_snapshot(path: Path) -> Iterator[threading.Event]:
    """Hold a reader on the current snapshot; set the event to let it go."""
    release, held = threading.Event(), threading.Event()
    reader = threading.Thread(target=_hold_snapshot, args=(path, release, held))
    reader.start()
    assert held.wait(10)
    try:
        yield release
    finally:
        release.set()
        reader.join(10)


def _erase_under_a_reader(
    tmp_path: Path, *, busy_timeout_ms: int, release_after: float | None
) -> tuple[str, bytes, Redaction]:
    path = tmp_path / "t.sqlite"
    secret = f"SECRET-{uuid.uuid4().hex}".encode()
    with SQLiteTraceStore(path, busy_timeout_ms=busy_timeout_ms) as store:
        erased, _ = fill(store, secret.decode())
        with _old_snapshot(path) as release:
            if release_after is not None:
                threading.Timer(release_after, release.set).start()
            redaction = store.redact(CTX, "redact:1", [erased], "asked")
        return erased, secret if secret in file_bytes(path) else b"", redaction


def test_a_reader_on_an_old_snapshot_is_waited_for_then_the_bytes_are_gone(
    tmp_path: Path,
) -> None:
    # Before: the checkpoint met the reader's snapshot, answered busy at once
    # (busy_timeout=0 on the writer), and the erased bytes stayed in -wal.
    _, left, redaction = _erase_under_a_reader(
        tmp_path, busy_timeout_ms=30_000, release_after=0.5
    )
    assert redaction.wal_truncated
    assert redaction.bytes_left == ()
    assert left == b""


def test_a_reader_that_never_lets_go_is_reported_not_hidden(tmp_path: Path) -> None:
    erased, left, redaction = _erase_under_a_reader(
        tmp_path, busy_timeout_ms=300, release_after=None
    )
    # Whether or not the bytes stayed, the report says what the disk holds.
    assert (erased in redaction.bytes_left) == bool(left)
    assert not redaction.wal_truncated


def test_many_erasures_under_appends_and_a_busy_reader_leave_no_bytes(
    tmp_path: Path,
) -> None:
    # A large WAL, the background checkpointer, a reader taking a snapshot
    # every 10 ms (holding each for 3 ms) and appends between the redactions:
    # every erased body is gone from the file and its WAL when its redaction
    # returns.
    import sqlite3

    path = tmp_path / "t.sqlite"
    secrets = [f"SECRET-{n:03d}-{uuid.uuid4().hex}" for n in range(64)]
    stop = threading.Event()

    def read_in_a_loop() -> None:
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            while not stop.is_set():
                conn.execute("BEGIN")
                conn.execute("SELECT count(*) FROM records").fetchone()
                stop.wait(0.003)
                conn.execute("COMMIT")
                stop.wait(0.007)
        finally:
            conn.close()

    with SQLiteTraceStore(path) as store:
        ids = [
            store.append(CTX, secret_batch(f"i:{n}", s)).fact_ids[0]
            for n, s in enumerate(secrets)
        ]
        reader = threading.Thread(target=read_in_a_loop)
        reader.start()
        try:
            for n, record_id in enumerate(ids):
                redaction = store.redact(CTX, f"redact:{n}", [record_id], "asked")
                assert redaction.wal_truncated, n
                assert redaction.bytes_left == (), n
                store.append(CTX, secret_batch(f"after:{n}", f"filler-{n}"))
        finally:
            stop.set()
            reader.join(10)
        data = file_bytes(path)
        assert [s for s in secrets if s.encode() in data] == []
        assert verify_trace(store).ok


def test_a_full_disk_raises_the_store_error_not_the_reset(tmp_path: Path) -> None:
    # The disk fills during the redaction (SQLite's page limit gives the same
    # SQLITE_FULL): the writer connection is dropped, and the finally that
    # turned secure_delete off used to raise "Cannot operate on a closed
    # database" over the real error.
    path = tmp_path / "t.sqlite"
    with SQLiteTraceStore(path) as store:
        erased, _ = fill(store, f"SECRET-{uuid.uuid4().hex}")
        raw = store._held_writer_raw()
        (pages,) = raw.execute("PRAGMA page_count").fetchone()
        raw.execute(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(StoreUnavailableError, match="full"):
            # the long reason needs pages the file may not grow by
            store.redact(CTX, "redact:1", [erased], "x" * 300_000)
        # Nothing was erased, and the store recovers on a new connection.
        record = store.read_fact(TRUSTED_READ_CONTEXT, erased)
        assert isinstance(record, Record)
        assert record.redacted_by is None
        assert store.redact(CTX, "redact:1", [erased], "asked").bytes_left == ()
