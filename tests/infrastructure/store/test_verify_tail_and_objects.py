"""verify trusts nothing it did not write: the chain's last links, foreign objects.

Two edits a row-by-row check cannot see, on SQLite and PostgreSQL:

* the last commit rewritten, its commit digest and head link cleared and
  ``meta.head`` pointed back at the link before it: the chain then looks
  like a shorter, sealed chain followed by a commit waiting for its seal. A
  commit stores its digest (and on SQLite its link) when it commits, so a
  cleared cell after the first stored one is itself a finding;
* a trigger, rule, view or index goatherd never creates, planted in the
  trace's database (a trigger that copies every body before an erasure
  overwrites it keeps what was erased, with every row consistent).
"""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text

from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    RecordDraft,
)
from goatherd.infrastructure.audit.verify import IntegrityReport, verify_trace
from goatherd.infrastructure.store import open_trace_store, open_trace_store_read_only
from goatherd.infrastructure.store.chain import meta_value


def _fill(url: str, commits: int = 4) -> None:
    with open_trace_store(url) as store:
        for n in range(commits):
            store.append(
                TRUSTED_APPEND_CONTEXT,
                AppendBatch(
                    f"tail:{n}",
                    (
                        AppendGroup(
                            "agent:tail",
                            fact_drafts=(
                                RecordDraft(
                                    "capture", "note.v1", {"n": n}, kind_label="note"
                                ),
                            ),
                        ),
                    ),
                ),
            )
        store.seal()
        assert verify_trace(store).ok


def _edit(url: str, statements: list[str]) -> None:
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            for statement in statements:
                conn.execute(text(statement))
    finally:
        engine.dispose()


def _verify(url: str) -> IntegrityReport:
    with open_trace_store_read_only(url) as store:
        return verify_trace(store, max_problems=None)


def _last_two(url: str) -> tuple[int, str]:
    """Return the last commit's number and the stored link before it."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            last = conn.execute(
                text("SELECT MAX(commit_seq) FROM append_intents")
            ).scalar_one()
            before = conn.execute(
                text("SELECT head_digest FROM append_intents WHERE commit_seq = :s"),
                {"s": last - 1},
            ).scalar_one()
    finally:
        engine.dispose()
    return int(last), str(before)


@pytest.fixture
def trace(durable_store_url: str) -> str:
    _fill(durable_store_url)
    return durable_store_url


def _cleared_tail(url: str, rewrite: str) -> list[str]:
    last, before = _last_two(url)
    return [
        rewrite,
        "UPDATE append_intents SET commit_digest = NULL, head_digest = NULL"
        f" WHERE commit_seq = {last}",
        f"UPDATE meta SET value = '{meta_value(last, before)}' WHERE key = 'head'",
    ]


def test_a_rewritten_last_commit_with_its_links_cleared_is_named(trace: str) -> None:
    last, _ = _last_two(trace)
    _edit(
        trace,
        _cleared_tail(
            trace,
            "UPDATE path_entries SET kind_label = 'harmless' WHERE append_intent_id ="
            f" (SELECT append_intent_id FROM append_intents WHERE commit_seq = {last})",
        ),
    )
    report = _verify(trace)
    assert not report.ok
    assert any("commit digest is missing" in str(p) for p in report.problems), [
        str(p) for p in report.problems
    ]


def test_only_a_cleared_head_link_is_named_on_sqlite(durable_store_url: str) -> None:
    if durable_store_url.startswith("postgresql"):
        pytest.skip("PostgreSQL links commits after they commit (its seal)")
    _fill(durable_store_url)
    last, before = _last_two(durable_store_url)
    _edit(
        durable_store_url,
        [
            f"UPDATE append_intents SET head_digest = NULL WHERE commit_seq = {last}",
            f"UPDATE meta SET value = '{meta_value(last, before)}' WHERE key = 'head'",
        ],
    )
    report = _verify(durable_store_url)
    assert any("head digest is missing" in str(p) for p in report.problems), [
        str(p) for p in report.problems
    ]


def _planted(url: str) -> list[tuple[str, str]]:
    postgres = url.startswith("postgresql")
    if postgres:
        return [
            (
                "CREATE TABLE kept (body TEXT);"
                " CREATE FUNCTION keep() RETURNS trigger LANGUAGE plpgsql AS"
                " $$ BEGIN INSERT INTO kept VALUES (OLD.body_json); RETURN NEW; END $$;"
                " CREATE TRIGGER keep_bodies BEFORE UPDATE ON records"
                " FOR EACH ROW EXECUTE FUNCTION keep()",
                "trigger 'keep_bodies' on table 'records'",
            ),
            (
                "CREATE RULE no_erase AS ON UPDATE TO records DO INSTEAD NOTHING",
                "rule 'no_erase' on table 'records'",
            ),
            ("CREATE VIEW bodies AS SELECT body_json FROM records", "view 'bodies'"),
            (
                "CREATE INDEX sneaky ON records (lower(body_json))",
                "index 'sneaky' on table 'records'",
            ),
        ]
    return [
        (
            "CREATE TABLE kept (body TEXT); CREATE TRIGGER keep_bodies BEFORE UPDATE"
            " ON records BEGIN INSERT INTO kept VALUES (OLD.body_json); END",
            "trigger 'keep_bodies' on table 'records'",
        ),
        ("CREATE VIEW bodies AS SELECT body_json FROM records", "view 'bodies'"),
        (
            "CREATE INDEX sneaky ON records (lower(body_json))",
            "index 'sneaky' on table 'records'",
        ),
    ]


@pytest.mark.parametrize("which", range(4))
def test_an_object_goatherd_never_creates_is_named(trace: str, which: int) -> None:
    planted = _planted(trace)
    if which >= len(planted):
        pytest.skip("SQLite has no rewrite rules")
    statement, named = planted[which]
    engine = create_engine(trace)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(statement) if trace.startswith(
                "postgresql"
            ) else conn.connection.driver_connection.executescript(statement)  # type: ignore[union-attr]
    finally:
        engine.dispose()
    report = _verify(trace)
    assert not report.ok
    shown = [str(p) for p in report.problems]
    assert any(named in line for line in shown), shown


def test_a_table_of_your_own_is_allowed(trace: str) -> None:
    # Read models of the projection runner live in the trace's database.
    _edit(trace, ["CREATE TABLE my_read_model (k TEXT PRIMARY KEY, v TEXT)"])
    assert _verify(trace).ok
