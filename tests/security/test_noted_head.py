"""A head noted outside the trace catches what no row can contradict.

``stats``, ``verify`` and ``export`` print the trace's chained head digest;
``verify --expect-head H`` fails once anything ``H`` covered was rewritten or
truncated, even when the editor recomputed every stored digest and link and
rewrote ``meta.head`` (the case plain ``verify`` cannot tell from a trace that
never had those commits). An import chains its commits in the export's commit
order, so it ends at the head the export names, and refuses when it does not.
"""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

import pytest

from goatherd.cli import main
from goatherd.domain.contexts import TRUSTED_APPEND_CONTEXT
from goatherd.domain.records import AppendBatch, AppendGroup, RecordDraft
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
from tests.security.test_tamper import truncation


def note(n: int, owner: str = "agent:a") -> AppendBatch:
    draft = RecordDraft(mode="capture", schema_ref="test.note.v1", payload={"n": n})
    return AppendBatch(f"i:{owner}:{n}", (AppendGroup(owner, fact_drafts=(draft,)),))


def build(path: Path, count: int) -> None:
    """``count`` commits on two owners, with an empty batch in the middle."""
    with SQLiteTraceStore(path) as store:
        for n in range(count):
            store.append(TRUSTED_APPEND_CONTEXT, note(n, f"agent:{n % 2}"))
            if n == count // 2:
                store.append(TRUSTED_APPEND_CONTEXT, AppendBatch("i:empty", ()))


def head_of(path: Path) -> str:
    with open_trace_store_read_only(path) as store:
        return str(store.trace_head())


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_stats_verify_and_export_print_the_same_head(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "trace.sqlite"
    build(db, 6)
    head = head_of(db)
    assert head.startswith("7:sha256:")
    code, out, _ = run(["stats", str(db), "--json"], capsys)
    assert code == 0
    assert json.loads(out)["head"] == head
    code, out, _ = run(["verify", str(db)], capsys)
    assert code == 0
    assert out.strip().endswith(f"head {head}")
    export = tmp_path / "trace.jsonl"
    code, _, err = run(["export", str(db), "-o", str(export)], capsys)
    assert code == 0
    assert err.strip().endswith(f"head {head}")
    end = json.loads(export.read_text().splitlines()[-1])
    assert end["type"] == "end"
    assert end["head"] == head


def test_a_noted_head_still_holds_after_the_trace_grew(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "trace.sqlite"
    build(db, 4)
    noted = head_of(db)
    with SQLiteTraceStore(db) as store:
        store.append(TRUSTED_APPEND_CONTEXT, note(99))
    code, out, _ = run(["verify", str(db), "--expect-head", noted], capsys)
    assert code == 0
    assert "(extends the expected head)" in out
    bare = noted.split(":", 1)[1]  # without the count: matches at any length
    assert run(["verify", str(db), "--expect-head", bare], capsys)[0] == 0


def relinked_truncation(db: Path) -> None:
    """Remove the last commit everywhere and make the stored chain end before it."""
    with sqlite3.connect(db) as conn:
        last, seq = conn.execute(
            "SELECT append_intent_id, commit_seq FROM append_intents"
            " ORDER BY commit_seq DESC LIMIT 1"
        ).fetchone()
        before = conn.execute(
            "SELECT head_digest FROM append_intents WHERE commit_seq = ?", (seq - 1,)
        ).fetchone()[0]
    statements = [
        *truncation(db, last),
        f"UPDATE meta SET value = '{seq} {before}' WHERE key = 'head'",
    ]
    with sqlite3.connect(db) as conn:
        for statement in statements:
            conn.execute(statement)


def test_a_truncation_that_relinked_the_chain_fails_only_against_a_noted_head(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "trace.sqlite"
    build(db, 6)
    noted = head_of(db)
    relinked_truncation(db)
    with open_trace_store_read_only(db) as store:
        assert verify_trace(store).ok, "the edit is consistent with every row"
        report = verify_trace(store, expect_head=noted)
    assert not report.ok
    assert report.expected_head is False
    code, _, err = run(["verify", str(db), "--expect-head", noted], capsys)
    assert code == 1
    assert f"does not extend the head noted earlier ({noted})" in err


def test_a_rewrite_with_every_digest_recomputed_fails_against_a_noted_head(
    tmp_path: Path,
) -> None:
    db = tmp_path / "trace.sqlite"
    build(db, 6)
    noted = head_of(db)
    with sqlite3.connect(db) as conn:
        conn.execute(
            "UPDATE path_entries SET kind_label = 'tool:harmless'"
            " WHERE path_ref = 'agent:1' AND path_ordinal = 0"
        )
        conn.execute(
            "UPDATE append_intents SET commit_digest = NULL, head_digest = NULL"
        )
        conn.execute("DELETE FROM meta WHERE key = 'head'")
    with SQLiteTraceStore(db) as store:  # a writer relinks the whole chain
        store.seal()
    with open_trace_store_read_only(db) as store:
        report = verify_trace(store, expect_head=noted)
    assert report.expected_head is False
    assert any("does not extend the head" in p.detail for p in report.problems)


def test_verify_refuses_a_malformed_head_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "trace.sqlite"
    build(db, 2)
    with pytest.raises(SystemExit) as exit_:
        main(["verify", str(db), "--expect-head", "12:sha256:xyz"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "not a trace head: '12:sha256:xyz'" in err


def exported(db: Path) -> list[str]:
    out = io.StringIO()
    with open_trace_store_read_only(db) as store:
        export_trace(store, out)
    return out.getvalue().splitlines(keepends=True)


def test_an_import_ends_at_the_head_the_export_names(tmp_path: Path) -> None:
    db = tmp_path / "trace.sqlite"
    build(db, 8)
    lines = exported(db)
    with SQLiteTraceStore(tmp_path / "copy.sqlite") as copy:
        summary = import_trace(lines, copy)
    assert summary.head == head_of(db) == json.loads(lines[-1])["head"]
    assert head_of(tmp_path / "copy.sqlite") == head_of(db)


def test_an_export_naming_another_head_is_refused_and_writes_nothing(
    tmp_path: Path,
) -> None:
    db = tmp_path / "trace.sqlite"
    build(db, 4)
    lines = exported(db)
    end = json.loads(lines[-1])
    end["head"] = "5:sha256:" + "ab" * 32
    lines[-1] = json.dumps(end, sort_keys=True, separators=(",", ":")) + "\n"
    with SQLiteTraceStore(tmp_path / "copy.sqlite") as copy:
        with pytest.raises(
            ImportRejectedError,
            match="line 7: the imported commits chain to head 5:sha256:",
        ):
            import_trace(lines, copy)
        assert copy.max_position() == -1


@pytest.mark.postgres
def test_a_trace_moved_between_backends_keeps_its_head(
    tmp_path: Path,
    postgres_url: str,  # noqa: F811 (the fixture imported above)
) -> None:
    source = tmp_path / "trace.sqlite"
    build(source, 6)
    lines = exported(source)
    with open_trace_store(postgres_url) as pg_store:
        assert import_trace(lines, pg_store).head == head_of(source)
        # the commit numbers go on after the imported ones
        pg_store.append(TRUSTED_APPEND_CONTEXT, note(50))
        assert verify_trace(pg_store).ok
        grown = str(pg_store.trace_head())
        back = io.StringIO()
        export_trace(pg_store, back)
    assert grown.startswith("8:sha256:")
    with SQLiteTraceStore(tmp_path / "back.sqlite") as copy:
        summary = import_trace(back.getvalue().splitlines(keepends=True), copy)
    assert summary.head == grown
    assert verify_trace_expecting(tmp_path / "back.sqlite", head_of(source))


def verify_trace_expecting(db: Path, head: str) -> bool:
    with open_trace_store_read_only(db) as store:
        return verify_trace(store, expect_head=head).ok
