"""Side steps move with the trace: export writes them in commit order (ADR 0064).

Every write to a side table (ledger inserts, checkpoint row replacements and
deletions) is a ``side`` line at its commit number among the intent lines, so
an import replays the same chain and the copy keeps the source's head, on
either backend. A forged side line is refused by its line number; an export
made before schema v3 (no side lines) still imports, its side rows chained
after its last commit.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import time
from pathlib import Path

import pytest

from goatherd.domain.canonical import canonical_json_text
from goatherd.domain.contexts import TRUSTED_APPEND_CONTEXT
from goatherd.domain.workspace import WorkspaceState
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.portability.jsonl import (
    ImportRejectedError,
    export_trace,
    import_trace,
)
from goatherd.infrastructure.store import (
    SQLiteTraceStore,
    open_trace_store,
    open_trace_store_read_only,
)
from tests.faults.conftest import postgres_url  # noqa: F401 (a fixture)
from tests.security.tamper_trace import build
from tests.security.test_noted_head import note

V2_FIXTURE = Path(__file__).parents[1] / "infrastructure/store/fixtures/trace_v2.sqlite"
# the state its checkpoint.created record names; the snapshot bytes change
STATE = WorkspaceState("memory", "r1", {"files": {"a.txt": "one"}})


def source(path: Path) -> str:
    """A trace whose side tables were inserted into, replaced and deleted from."""
    with SQLiteTraceStore(path) as store:
        ids = build(store)
        store.persist_checkpoint_blob(
            ids.checkpoint_a, "scope:agent:old", 1, STATE, b"again", time.time_ns()
        )
        store.delete_checkpoint_blob(ids.checkpoint_b)
        store.append(TRUSTED_APPEND_CONTEXT, note(1))
        return str(store.trace_head())


def exported(path: Path | str) -> list[str]:
    out = io.StringIO()
    with open_trace_store_read_only(path) as store:
        export_trace(store, out)
    return out.getvalue().splitlines(keepends=True)


def head_of(path: Path) -> str:
    with open_trace_store_read_only(path) as store:
        return str(store.trace_head())


def resealed(lines: list[str], *, head: bool = True) -> list[str]:
    """Recompute the end line over edited lines (as a forger would)."""
    body = lines[:-1]
    digest = hashlib.sha256("".join(body).encode("utf-8")).hexdigest()
    end = json.loads(lines[-1])
    end.update(lines=len(body), sha256=digest)
    if not head:
        del end["head"]
    return [*body, canonical_json_text(end, root="line") + "\n"]


def side_lines(lines: list[str]) -> list[tuple[int, dict[str, object]]]:
    return [
        (number, obj)
        for number, obj in enumerate((json.loads(line) for line in lines), start=1)
        if obj["type"] == "side"
    ]


def test_a_copy_replays_every_side_step_and_keeps_the_head(tmp_path: Path) -> None:
    db = tmp_path / "trace.sqlite"
    head = source(db)
    lines = exported(db)
    sides = side_lines(lines)
    kinds = [(o["table"], o["row_digest"] is None) for _, o in sides]
    assert kinds == [
        ("materialization_intents", False),
        ("checkpoint_snapshots", False),
        ("checkpoint_snapshots", False),
        ("checkpoint_snapshots", False),
        ("checkpoint_snapshots", True),
    ]
    # the ledger row's step comes right after the intent of its captures
    first = sides[0][0]
    assert json.loads(lines[first - 2])["append_intent_id"] == "mat:1"
    with SQLiteTraceStore(tmp_path / "copy.sqlite") as copy:
        summary = import_trace(lines, copy)
        assert summary.side_writes == 5
        assert summary.head == head == json.loads(lines[-1])["head"]
        assert verify_trace(copy, expect_head=head).ok


@pytest.mark.postgres
def test_side_steps_survive_sqlite_to_postgres_and_back(
    tmp_path: Path,
    postgres_url: str,  # noqa: F811 (the fixture imported above)
) -> None:
    db = tmp_path / "trace.sqlite"
    head = source(db)
    with open_trace_store(postgres_url) as pg_store:
        assert import_trace(exported(db), pg_store).head == head
        pg_store.record_completed_materialization("mat:pg", "ab" * 32, "{}")
        pg_store.append(TRUSTED_APPEND_CONTEXT, note(2))
        assert verify_trace(pg_store, expect_head=head).ok
        grown = str(pg_store.trace_head())
        back = io.StringIO()
        export_trace(pg_store, back)
    with SQLiteTraceStore(tmp_path / "back.sqlite") as copy:
        summary = import_trace(back.getvalue().splitlines(keepends=True), copy)
        assert summary.head == grown
        assert verify_trace(copy, expect_head=head).ok


@pytest.mark.parametrize(
    ("edit", "expect"),
    [
        (
            lambda o: {**o, "row_digest": "sha256:" + "cd" * 32},
            "digests to sha256:",
        ),
        (lambda o: {**o, "table": "records"}, "side table 'records' is not one of"),
        (lambda o: {**o, "row_digest": "cd" * 32}, "is not sha256:<hex> or null"),
        (lambda o: {**o, "row_key": ""}, "row_key"),
        (lambda o: {**o, "row_digest": None}, "the side line"),
    ],
    ids=["forged digest", "not a side table", "bare digest", "empty key", "deleted"],
)
def test_a_forged_side_line_is_refused_by_its_line_number(
    tmp_path: Path, edit: object, expect: str
) -> None:
    db = tmp_path / "trace.sqlite"
    source(db)
    lines = exported(db)
    number, obj = side_lines(lines)[0]  # the ledger row's step
    assert callable(edit)
    lines[number - 1] = canonical_json_text(edit(obj), root="line") + "\n"
    with SQLiteTraceStore(tmp_path / "copy.sqlite") as copy:
        with pytest.raises(ImportRejectedError, match=expect) as refused:
            import_trace(resealed(lines), copy)
        assert copy.max_position() == -1
    ledger_line = next(
        n
        for n, line in enumerate(lines, start=1)
        if json.loads(line)["type"] == "materialization"
    )
    assert refused.value.line in (number, ledger_line)


def test_a_side_row_no_side_line_wrote_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "trace.sqlite"
    source(db)
    lines = exported(db)
    number, _ = side_lines(lines)[0]
    del lines[number - 1]
    with (
        SQLiteTraceStore(tmp_path / "copy.sqlite") as copy,
        pytest.raises(
            ImportRejectedError,
            match="materialization_intents row 'mat:1' was written by no side line",
        ),
    ):
        import_trace(resealed(lines, head=False), copy, accept_headless=True)


def test_a_side_line_after_the_ledger_lines_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "trace.sqlite"
    source(db)
    lines = exported(db)
    number, _ = side_lines(lines)[-1]
    moved = lines.pop(number - 1)
    lines.insert(len(lines) - 1, moved)
    with (
        SQLiteTraceStore(tmp_path / "copy.sqlite") as copy,
        pytest.raises(ImportRejectedError, match="after the ledger") as refused,
    ):
        import_trace(resealed(lines), copy)
    assert refused.value.line == len(lines) - 1


def test_an_export_made_before_v3_imports_with_its_side_rows_chained_last(
    tmp_path: Path,
) -> None:
    v2 = tmp_path / "v2.sqlite"
    shutil.copy(V2_FIXTURE, v2)
    lines = exported(v2)  # read as it is: no side_writes, no side lines
    assert not side_lines(lines)
    with SQLiteTraceStore(tmp_path / "copy.sqlite") as copy:
        summary = import_trace(lines, copy)
        assert summary.side_writes == 2
        # the read-only opener's head of the v2 file is the one its import ends at
        assert summary.head == head_of(v2) == json.loads(lines[-1])["head"]
        assert verify_trace(copy).ok
    # an export that predates the head in the end line is refused by default
    # (its chain would go unchecked), and imports when the caller accepts that
    with (
        SQLiteTraceStore(tmp_path / "copy2.sqlite") as copy,
        pytest.raises(ImportRejectedError, match="names no head"),
    ):
        import_trace(resealed(lines, head=False), copy)
    with SQLiteTraceStore(tmp_path / "copy3.sqlite") as copy:
        headless = resealed(lines, head=False)
        assert import_trace(headless, copy, accept_headless=True).head == head_of(v2)
