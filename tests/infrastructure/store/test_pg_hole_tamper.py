"""Holes are accepted only where a hole step records them (ADR 0076).

A hole step vouches for a commit number and positions that a dead writer
abandoned. One whose positions hold a real record is named by ``verify``
even with every digest and link recomputed; a gap no hole step records
(the step removed) is named by ``verify``; an export whose hole line was
removed or moved over a record is refused by ``import`` naming the line.
"""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    RecordDraft,
)
from goatherd.domain.canonical import canonical_json_text
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.portability.jsonl import (
    ImportRejectedError,
    export_trace,
    import_trace,
)
from goatherd.infrastructure.store import (
    SqlAlchemyTraceStore,
    SQLiteTraceStore,
    open_trace_store,
    open_trace_store_read_only,
)
from goatherd.infrastructure.store import postgres as pg
from goatherd.infrastructure.store.chain import (
    HOLE_TABLE,
    SideContent,
    link,
    meta_value,
    parse_meta,
    side_digest,
)
from tests.faults.conftest import postgres_url  # noqa: F401 (a fixture)
from tests.security.test_side_export import resealed


class _DiedError(Exception):
    """Stands for a writer's death between drawing its numbers and COMMIT."""


def batch(intent: str, records: int = 2) -> AppendBatch:
    drafts = tuple(
        RecordDraft("capture", "app.step.v1", {"intent": intent, "i": i})
        for i in range(records)
    )
    return AppendBatch(intent, (AppendGroup("agent:h", fact_drafts=drafts),))


def details(store: SqlAlchemyTraceStore) -> list[str]:
    report = verify_trace(store, max_problems=None)
    return [f"{p.check}: {p.detail}" for p in report.problems]


def with_a_hole(store: SqlAlchemyTraceStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Commits 0 and 1 (positions 0-3), a dead commit 2 (4-5), commit 3 (6-7)."""
    store.append(TRUSTED_APPEND_CONTEXT, batch("h:0"))
    store.append(TRUSTED_APPEND_CONTEXT, batch("h:1"))

    def die(point: str) -> None:
        if point == "allocated":
            raise _DiedError

    monkeypatch.setattr(pg, "fault_hook", die)
    with pytest.raises(_DiedError):
        store.append(TRUSTED_APPEND_CONTEXT, batch("h:dead"))
    monkeypatch.setattr(pg, "fault_hook", None)
    store.append(TRUSTED_APPEND_CONTEXT, batch("h:3"))
    store.seal()


def admin(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(False)


def exported(store: SqlAlchemyTraceStore) -> list[str]:
    out = io.StringIO()
    export_trace(store, out)
    return out.getvalue().splitlines(keepends=True)


# ---------------------------------------------------------------- SQLite


def test_a_forged_hole_step_over_a_real_record_is_named_with_the_chain_redone(
    tmp_path: Path,
) -> None:
    db = tmp_path / "t.sqlite"
    with SQLiteTraceStore(db) as store:
        store.append(TRUSTED_APPEND_CONTEXT, batch("s:0"))
        store.append(TRUSTED_APPEND_CONTEXT, batch("s:1"))
        assert details(store) == []
    # The forger appends a hole step claiming position 1 (a real record) and
    # recomputes its digest, its link and meta.head: the chain is consistent.
    conn = sqlite3.connect(db)
    (value,) = conn.execute("SELECT value FROM meta WHERE key = 'head'").fetchone()
    commits, head = parse_meta(value)
    assert head is not None
    digest = side_digest(SideContent(commits, HOLE_TABLE, "1-1", None))
    after = link(head, digest)
    conn.execute(
        "INSERT INTO side_writes VALUES (?, ?, ?, NULL, ?, ?)",
        (commits, HOLE_TABLE, "1-1", digest, after),
    )
    conn.execute(
        "UPDATE meta SET value = ? WHERE key = 'head'",
        (meta_value(commits + 1, after),),
    )
    conn.commit()
    conn.close()
    with open_trace_store_read_only(db) as store:
        found = details(store)
    assert any(
        "records position 1 as abandoned, but it holds a record" in d for d in found
    ), found
    assert not any(d.startswith("chain:") for d in found), found


# ------------------------------------------------------------ PostgreSQL


@pytest.mark.postgres
def test_a_recorded_hole_verifies_and_the_same_gap_unrecorded_is_named(
    postgres_url: str,  # noqa: F811 (the fixture imported above)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with open_trace_store(postgres_url) as store:
        with_a_hole(store, monkeypatch)
        assert details(store) == []
    with psycopg.connect(admin(postgres_url)) as conn:
        holes = conn.execute(
            "SELECT commit_seq, row_key FROM side_writes WHERE table_name = %s",
            (HOLE_TABLE,),
        ).fetchall()
        assert holes == [(2, "4-5")]
        conn.execute("DELETE FROM side_writes WHERE table_name = %s", (HOLE_TABLE,))
    with open_trace_store_read_only(postgres_url) as store:
        found = details(store)
    assert "log: position 6 where 4 was due" in " ".join(found), found
    assert any("commit 2 is missing" in d for d in found), found


@pytest.mark.postgres
def test_a_forged_hole_step_over_a_real_record_is_named_on_postgresql(
    postgres_url: str,  # noqa: F811 (the fixture imported above)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with open_trace_store(postgres_url) as store:
        with_a_hole(store, monkeypatch)
    with psycopg.connect(admin(postgres_url)) as conn:
        conn.execute(
            "UPDATE side_writes SET row_key = '4-6' WHERE table_name = %s",
            (HOLE_TABLE,),
        )
    with open_trace_store_read_only(postgres_url) as store:
        found = details(store)
    assert any(
        "records position 6 as abandoned, but it holds a record" in d for d in found
    ), found


@pytest.mark.postgres
def test_import_accepts_a_recorded_hole_and_refuses_it_removed_or_moved(
    postgres_url: str,  # noqa: F811 (the fixture imported above)
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    with open_trace_store(postgres_url) as store:
        with_a_hole(store, monkeypatch)
        lines = exported(store)
        head = str(store.trace_head())
    numbered = [(n, json.loads(line)) for n, line in enumerate(lines, start=1)]
    (hole,) = [n for n, obj in numbered if obj.get("table") == HOLE_TABLE]
    with SQLiteTraceStore(tmp_path / "ok.sqlite") as copy:
        assert import_trace(lines, copy).head == head
        assert verify_trace(copy, expect_head=head).ok
        copy.append(TRUSTED_APPEND_CONTEXT, batch("copy:1"))
        assert details(copy) == []
    removed = [line for n, line in enumerate(lines, start=1) if n != hole]
    with (
        SQLiteTraceStore(tmp_path / "removed.sqlite") as copy,
        pytest.raises(ImportRejectedError, match=r"log position 6 .* where 4 is due"),
    ):
        import_trace(resealed(removed), copy)
    obj = json.loads(lines[hole - 1])
    moved = list(lines)
    moved[hole - 1] = canonical_json_text({**obj, "row_key": "4-6"}, root="line") + "\n"
    with (
        SQLiteTraceStore(tmp_path / "moved.sqlite") as copy,
        pytest.raises(ImportRejectedError, match="where 7 is due"),
    ):
        import_trace(resealed(moved), copy)


@pytest.mark.postgres
def test_a_trace_whose_first_append_died_imports_with_its_root_witness(
    postgres_url: str,  # noqa: F811 (the fixture imported above)
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Positions 0-1 abandoned: the first logged entry, at 2, cites the root."""
    with open_trace_store(postgres_url) as store:

        def die(point: str) -> None:
            if point == "allocated":
                raise _DiedError

        monkeypatch.setattr(pg, "fault_hook", die)
        with pytest.raises(_DiedError):
            store.append(TRUSTED_APPEND_CONTEXT, batch("first:dead"))
        monkeypatch.setattr(pg, "fault_hook", None)
        store.append(TRUSTED_APPEND_CONTEXT, batch("first:1"))
        store.seal()
        assert details(store) == []
        lines = exported(store)
        head = str(store.trace_head())
    assert any(json.loads(line).get("row_key") == "0-1" for line in lines)
    with SQLiteTraceStore(tmp_path / "copy.sqlite") as copy:
        assert import_trace(lines, copy).head == head
        assert details(copy) == []
