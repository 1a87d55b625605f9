"""The tamper suite: edit every column of every table, one at a time; verify names it.

Each case is an edit an attacker with write access to the database could make
(constraints and foreign keys switched off where the backend allows it), with
a plausible value of the right type, so that it is the cross-checks that catch
it, not a type error. A second sweep (SQLite only: PostgreSQL enforces column
types) writes a value of the wrong type into every column and expects a
``well-formed`` problem naming ``table.column``. Edits no row can contradict
(a commit time, a kind label) are caught by the chained head digest (ADR 0038).
Edits of the side tables (the materialization ledger, the legacy checkpoint
rows) are named against the side steps of the chain (ADR 0064). An edit
verify cannot see would be a strict xfail naming why (``Case.gap``): it
starts failing (and must be promoted) the day verify catches it.

docs/reliability.md has the table of what each column's check is.
"""

from __future__ import annotations

import shutil
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.engine import Dialect, make_url

import goatherd
from goatherd.cli import main
from goatherd.domain.errors import NotATraceStoreError
from goatherd.domain.records import AppendBatch, AppendGroup, RecordDraft
from goatherd.infrastructure.audit.verify import IntegrityReport, verify_trace
from goatherd.infrastructure.blobs.store import blob_tables
from goatherd.infrastructure.store import (
    SQLiteTraceStore,
    open_trace_store,
    open_trace_store_read_only,
)
from goatherd.infrastructure.store.codec import REDACTED_PREFIX
from goatherd.infrastructure.store.schema import TRACE_TABLES
from tests.security.tamper_trace import Ids, build


@dataclass(frozen=True)
class Case:
    """One edit: the statements, and what the report must mention."""

    table: str
    column: str
    sql: Callable[[Ids], list[str]]
    expect: str
    gap: str = ""


def q(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


FORGED_HEX = "cd" * 32
i_checkpoint_a, i_checkpoint_b = "cp:agent:old:1", "cp:agent:old:2"
EMPTY_BYTES = "CAST('' AS BLOB)"  # both backends: replaced for PostgreSQL below
FORGED_BYTES = "CAST('kept-99' AS BLOB)"
PG_BYTES = {EMPTY_BYTES: "''::bytea", FORGED_BYTES: "'kept-99'::bytea"}

CASES: list[Case] = [
    # meta
    Case(
        "meta",
        "key",
        lambda i: [
            "UPDATE meta SET key = 'next_commit_sequence' WHERE key = 'next_commit_seq'"
        ],
        "next_commit_sequence",
    ),
    Case(
        "meta",
        "value",
        lambda i: ["UPDATE meta SET value = '99' WHERE key = 'next_commit_seq'"],
        "next commit sequence 99",
    ),
    # append_intents
    Case(
        "append_intents",
        "append_intent_id",
        lambda i: [
            "UPDATE append_intents SET append_intent_id = 'forged'"
            " WHERE append_intent_id = 'demo:call:1'"
        ],
        "demo:call:1",
    ),
    Case(
        "append_intents",
        "batch_digest",
        lambda i: [
            f"UPDATE append_intents SET batch_digest = {q(FORGED_HEX)}"
            " WHERE append_intent_id = 'demo:call:1'"
        ],
        "demo:call:1",
    ),
    Case(
        "append_intents",
        "receipt_json",
        lambda i: [
            "UPDATE append_intents SET receipt_json ="
            f" replace(receipt_json, {q(i.note)}, {q(i.result)})"
            " WHERE append_intent_id = 'demo:result:1'"
        ],
        "demo:result:1",
    ),
    Case(
        "append_intents",
        "committed_at",
        lambda i: [
            "UPDATE append_intents SET committed_at = '2001-01-01 00:00:00'"
            " WHERE append_intent_id = 'demo:call:1'"
        ],
        "demo:call:1",
    ),
    Case(
        "append_intents",
        "commit_seq",
        lambda i: [
            "UPDATE append_intents SET commit_seq = commit_seq + 100"
            " WHERE append_intent_id = 'demo:call:1'"
        ],
        "demo:call:1",
    ),
    Case(
        "append_intents",
        "commit_digest",
        lambda i: [
            f"UPDATE append_intents SET commit_digest = {q(FORGED_HEX)}"
            " WHERE append_intent_id = 'demo:call:1'"
        ],
        "demo:call:1",
    ),
    Case(
        "append_intents",
        "head_digest",
        lambda i: [
            f"UPDATE append_intents SET head_digest = {q(FORGED_HEX)}"
            " WHERE append_intent_id = 'demo:call:1'"
        ],
        "demo:call:1",
    ),
    Case(
        "append_intents",
        "txid",
        lambda i: [
            "UPDATE append_intents SET txid = 7 WHERE append_intent_id = 'demo:call:1'"
        ],
        "transaction id",
    ),
    # contexts
    *[
        Case(
            "contexts",
            column,
            (
                lambda c, v: (
                    lambda i: [
                        f"UPDATE contexts SET {c} = {q(v)}"
                        f" WHERE context_id = {q(i.call_context)}"
                    ]
                )
            )(column, value),
            "context",
        )
        for column, value in (
            ("active_binding_refs_json", '["binding:forged"]'),
            ("capability_witness_refs_json", '["trusted:internal"]'),
            ("semantic_environment_refs_json", '["forged-env"]'),
            ("visibility_policy_refs_json", '["public"]'),
            ("substrate_ref", "forged.v1"),
            ("containment", "uncontained"),
            ("append_intent_id", "demo:result:1"),
        )
    ],
    Case(
        "contexts",
        "context_id",
        lambda i: [
            "UPDATE contexts SET context_id ="
            " 'context:00000000000000000000000000000000'"
            f" WHERE context_id = {q(i.call_context)}",
            "UPDATE path_entries SET retained_context_ref ="
            " 'context:00000000000000000000000000000000'"
            f" WHERE retained_context_ref = {q(i.call_context)}",
        ],
        "context:00000000000000000000000000000000",
    ),
    # owner_ordinals
    Case(
        "owner_ordinals",
        "trace_owner_id",
        lambda i: [
            "UPDATE owner_ordinals SET trace_owner_id = 'other2'"
            " WHERE trace_owner_id = 'other'"
        ],
        "other2",
    ),
    Case(
        "owner_ordinals",
        "next_ordinal",
        lambda i: [
            "UPDATE owner_ordinals SET next_ordinal = 2 WHERE trace_owner_id = 'other'"
        ],
        "'other': next ordinal 2",
    ),
    # records (the tool call)
    *[
        Case(
            "records",
            column,
            (
                lambda c, v: (
                    lambda i: [
                        f"UPDATE records SET {c} = {v} WHERE record_id = {q(i.call)}"
                    ]
                )
            )(column, value),
            "record sha256:",
        )
        for column, value in (
            ("digest", q("sha256:" + FORGED_HEX)),
            ("schema_ref", "'yaah.tool.harmless.v1'"),
            ("mode", "'capture'"),
            ("body_json", "replace(body_json, 'pytest', 'rm -rf')"),
            ("append_intent_id", "'demo:result:1'"),
        )
    ],
    Case(
        "records",
        "record_id",
        lambda i: [
            f"UPDATE records SET record_id = {q('sha256:' + FORGED_HEX)},"
            f" digest = {q('sha256:' + FORGED_HEX)} WHERE record_id = {q(i.note)}",
            f"UPDATE path_entries SET record_id = {q('sha256:' + FORGED_HEX)}"
            f" WHERE record_id = {q(i.note)}",
        ],
        "sha256:" + FORGED_HEX,
    ),
    Case(
        "records",
        "witness_ref",
        lambda i: [
            "UPDATE records SET witness_ref = (SELECT witness_ref FROM records"
            f" WHERE record_id = {q(i.produced)}) WHERE record_id = {q(i.call)}"
        ],
        "record sha256:",
    ),
    Case(
        "records",
        "caused_by_json",
        lambda i: [
            f"UPDATE records SET caused_by_json = '[]' WHERE record_id = {q(i.result)}"
        ],
        "caused_by",
    ),
    # record_edges
    Case(
        "record_edges",
        "child_record_id",
        lambda i: [
            f"UPDATE record_edges SET child_record_id = {q(i.note)}"
            f" WHERE child_record_id = {q(i.result)}"
        ],
        "edge rows",
    ),
    Case(
        "record_edges",
        "parent_position",
        lambda i: [
            "UPDATE record_edges SET parent_position = 1"
            f" WHERE child_record_id = {q(i.result)}"
        ],
        "edge rows",
    ),
    Case(
        "record_edges",
        "parent_record_id",
        lambda i: [
            f"UPDATE record_edges SET parent_record_id = {q(i.note)}"
            f" WHERE child_record_id = {q(i.result)}"
        ],
        "edge rows",
    ),
    # path_entries
    Case(
        "path_entries",
        "txid",
        lambda i: [f"UPDATE path_entries SET txid = 7 WHERE record_id = {q(i.call)}"],
        "transaction id",
    ),
    Case(
        "path_entries",
        "path_ref",
        lambda i: [
            # a consistent move: 'agent:main:sub' -> 'other' with its ordinals fixed
            "UPDATE path_entries SET path_ref = 'other', path_ordinal = 1"
            f" WHERE record_id = {q(i.result)}",
            "UPDATE owner_ordinals SET next_ordinal = 2 WHERE trace_owner_id = 'other'",
            "DELETE FROM owner_ordinals WHERE trace_owner_id = 'agent:main:sub'",
        ],
        "owner_ordinal_ranges",
    ),
    Case(
        "path_entries",
        "path_ordinal",
        lambda i: [
            # swap the call (#0) and the frontier record it caused (#1) on agent:main
            "UPDATE path_entries SET path_ordinal = path_ordinal + 10"
            " WHERE path_ref = 'agent:main' AND path_ordinal IN (0, 1)",
            "UPDATE path_entries SET path_ordinal = 11 - path_ordinal"
            " WHERE path_ref = 'agent:main' AND path_ordinal IN (10, 11)",
        ],
        "before",
    ),
    Case(
        "path_entries",
        "record_id",
        lambda i: [
            f"UPDATE path_entries SET record_id = {q(i.note)}"
            f" WHERE record_id = {q(i.result)}"
        ],
        "sha256:",
    ),
    Case(
        "path_entries",
        "retained_context_ref",
        lambda i: [
            "UPDATE path_entries SET retained_context_ref ="
            " (SELECT retained_context_ref"
            f" FROM path_entries WHERE record_id = {q(i.produced)})"
            f" WHERE record_id = {q(i.call)}"
        ],
        "context",
    ),
    Case(
        "path_entries",
        "kind_label",
        lambda i: [
            "UPDATE path_entries SET kind_label = 'witness_root'"
            " WHERE path_ref = 'kernel:witness' AND path_ordinal = 1"
        ],
        "witness entry labelled",
    ),
    Case(
        "path_entries",
        "append_intent_id",
        lambda i: [
            "UPDATE path_entries SET append_intent_id = 'demo:call:1'"
            f" WHERE record_id = {q(i.note)}"
        ],
        "demo:",
    ),
    Case(
        "path_entries",
        "commit_receipt",
        lambda i: [
            f"UPDATE path_entries SET commit_receipt = 'commit:99'"
            f" WHERE record_id = {q(i.note)}"
        ],
        "commit receipt",
    ),
    Case(
        "path_entries",
        "position",
        lambda i: [
            # swap the call (0) and its child (1) in the log, receipts included
            "UPDATE path_entries SET position = position + 100,"
            " commit_receipt = 'x' || position WHERE position IN (0, 1)",
            "UPDATE path_entries SET position = 101 - position"
            " WHERE position IN (100, 101)",
            "UPDATE path_entries SET commit_receipt = 'commit:' || position"
            " WHERE position IN (0, 1)",
        ],
        "before its parent",
    ),
    # frontiers
    *[
        Case(
            "frontiers",
            column,
            (lambda c, v: lambda i: [f"UPDATE frontiers SET {c} = {v}"])(column, value),
            "frontier",
        )
        for column, value in (
            ("frontier_id", "'frontier:forged'"),
            ("target_trace_owner_id", "'other'"),
            ("through_owner_ordinal", "1"),
            ("publisher_trace_owner_id", "'other'"),
            ("append_intent_id", "'demo:call:1'"),
        )
    ],
    Case(
        "frontiers",
        "through_fact_id",
        lambda i: [f"UPDATE frontiers SET through_fact_id = {q(i.result)}"],
        "frontier",
    ),
    Case(
        "frontiers",
        "created_by_fact_id",
        lambda i: [f"UPDATE frontiers SET created_by_fact_id = {q(i.note)}"],
        "frontier",
    ),
    # materialization_intents
    Case(
        "materialization_intents",
        "materialize_intent_id",
        lambda i: [
            "UPDATE materialization_intents SET materialize_intent_id = 'demo:call:1'"
        ],
        "materialization 'demo:call:1'",
    ),
    Case(
        "materialization_intents",
        "receipt_json",
        lambda i: [
            "UPDATE materialization_intents SET receipt_json ="
            " replace(receipt_json, 'files.v1', 'shell.v1')"
        ],
        "materialization 'mat:1'",
    ),
    Case(
        "materialization_intents",
        "request_digest",
        lambda i: [
            f"UPDATE materialization_intents SET request_digest = {q(FORGED_HEX)}"
        ],
        "materialization_intents row 'mat:1' changed since commit",
    ),
    Case(
        "materialization_intents",
        "completed_at",
        lambda i: [
            "UPDATE materialization_intents SET completed_at = '2001-01-01 00:00:00'"
        ],
        "materialization_intents row 'mat:1' changed since commit",
    ),
    # checkpoint_snapshots
    Case(
        "checkpoint_snapshots",
        "checkpoint_id",
        lambda i: [
            # blob A passed off as checkpoint B (whose blob was cleared)
            "DELETE FROM checkpoint_snapshots"
            f" WHERE checkpoint_id = {q(i.checkpoint_b)}",
            f"UPDATE checkpoint_snapshots SET checkpoint_id = {q(i.checkpoint_b)}"
            f" WHERE checkpoint_id = {q(i.checkpoint_a)}",
        ],
        "digests to",
    ),
    Case(
        "checkpoint_snapshots",
        "scope_id",
        lambda i: [
            "UPDATE checkpoint_snapshots SET scope_id = 'scope:agent:main'"
            f" WHERE checkpoint_id = {q(i.checkpoint_a)}"
        ],
        "scope_id",
    ),
    Case(
        "checkpoint_snapshots",
        "seq",
        lambda i: [
            "UPDATE checkpoint_snapshots SET seq = 9"
            f" WHERE checkpoint_id = {q(i.checkpoint_a)}"
        ],
        "seq 9",
    ),
    Case(
        "checkpoint_snapshots",
        "state_json",
        lambda i: [
            "UPDATE checkpoint_snapshots SET state_json = (SELECT state_json FROM"
            f" checkpoint_snapshots WHERE checkpoint_id = {q(i.checkpoint_b)})"
            f" WHERE checkpoint_id = {q(i.checkpoint_a)}"
        ],
        "digests to",
    ),
    Case(
        "checkpoint_snapshots",
        "snapshot",
        lambda i: [
            f"UPDATE checkpoint_snapshots SET snapshot = {EMPTY_BYTES}"
            f" WHERE checkpoint_id = {q(i.checkpoint_a)}"
        ],
        "has_snapshot",
    ),
    Case(
        "checkpoint_snapshots",
        "created_at_unixnano",
        lambda i: [
            "UPDATE checkpoint_snapshots SET created_at_unixnano ="
            " created_at_unixnano - 864000000000000"
            f" WHERE checkpoint_id = {q(i.checkpoint_a)}"
        ],
        "created at",
    ),
    # side_writes (ADR 0064): each step is a commit of the chain
    Case(
        "side_writes",
        "commit_seq",
        lambda i: [
            "UPDATE side_writes SET commit_seq = commit_seq + 1000"
            " WHERE row_key = 'mat:1'"
        ],
        "(side write materialization_intents 'mat:1')",
    ),
    Case(
        "side_writes",
        "table_name",
        lambda i: [
            "UPDATE side_writes SET table_name = 'checkpoint_snapshots'"
            " WHERE row_key = 'mat:1'"
        ],
        "(side write checkpoint_snapshots 'mat:1'): what the commit wrote changed",
    ),
    Case(
        "side_writes",
        "row_key",
        lambda i: ["UPDATE side_writes SET row_key = 'mat:2' WHERE row_key = 'mat:1'"],
        "(side write materialization_intents 'mat:2'): what the commit wrote changed",
    ),
    Case(
        "side_writes",
        "row_digest",
        lambda i: [
            f"UPDATE side_writes SET row_digest = {q('sha256:' + FORGED_HEX)}"
            f" WHERE row_key = {q(i.checkpoint_a)}"
        ],
        f"(side write checkpoint_snapshots {i_checkpoint_a!r}): what the commit",
    ),
    Case(
        "side_writes",
        "commit_digest",
        lambda i: [
            f"UPDATE side_writes SET commit_digest = {q(FORGED_HEX)}"
            " WHERE row_key = 'mat:1'"
        ],
        "(side write materialization_intents 'mat:1')",
    ),
    Case(
        "side_writes",
        "head_digest",
        lambda i: [
            f"UPDATE side_writes SET head_digest = {q(FORGED_HEX)}"
            " WHERE row_key = 'mat:1'"
        ],
        "(side write materialization_intents 'mat:1')",
    ),
]

BLOB_STORE_CASES: list[Case] = [
    Case(
        "content_blobs",
        "digest",
        lambda i: [
            "UPDATE content_blobs"
            " SET digest = 'sha256:' || substr(digest, 8, 63) || 'f'"
            " WHERE digest IN (SELECT digest FROM blob_holders"
            " WHERE holder = 'cp:agent:rt:12#snapshot')"
        ],
        "digest to",
    ),
    Case(
        "content_blobs",
        "size",
        lambda i: ["UPDATE content_blobs SET size = size + 1"],
        "size column",
    ),
    Case(
        "content_blobs",
        "data",
        lambda i: [
            f"UPDATE content_blobs SET data = {FORGED_BYTES}"
            " WHERE digest IN (SELECT digest FROM blob_holders"
            " WHERE holder = 'cp:agent:rt:12#snapshot')"
        ],
        "digest to",
    ),
    Case(
        "blob_holders",
        "holder",
        lambda i: [
            "UPDATE blob_holders SET holder = 'cp:agent:rt:14#snapshot'"
            " WHERE holder = 'cp:agent:rt:12#snapshot'"
        ],
        "cp:agent:rt:12#snapshot",
    ),
    Case(
        "blob_holders",
        "digest",
        lambda i: [
            "UPDATE blob_holders SET digest = (SELECT digest FROM blob_holders"
            " WHERE holder = 'cp:agent:rt:13#snapshot')"
            " WHERE holder = 'cp:agent:rt:12#snapshot'"
        ],
        "the trace names",
    ),
]

EXTRA_CASES: list[Case] = [
    Case(
        "meta",
        "value",
        lambda i: ["UPDATE meta SET value = 'goatherd.trace.v0' WHERE key = 'schema'"],
        "schema marker",
    ),
    Case(
        "path_entries",
        "kind_label",
        lambda i: [
            "UPDATE path_entries SET kind_label = 'tool:harmless'"
            f" WHERE record_id = {q(i.call)}"
        ],
        "intent 'demo:call:1'): what the commit wrote changed",
    ),
    Case(
        "checkpoint_snapshots",
        "snapshot",
        lambda i: [
            "UPDATE checkpoint_snapshots SET snapshot = (SELECT snapshot FROM"
            f" checkpoint_snapshots WHERE checkpoint_id = {q(i.checkpoint_b)})"
            f" WHERE checkpoint_id = {q(i.checkpoint_a)}"
        ],
        f"checkpoint_snapshots row {i_checkpoint_a!r} changed since commit",
    ),
    # side rows added, removed, or their step removed (ADR 0064)
    Case(
        "materialization_intents",
        "(row)",
        lambda i: [
            "INSERT INTO materialization_intents (materialize_intent_id,"
            " request_digest, receipt_json, completed_at) SELECT 'mat:forged',"
            " request_digest, receipt_json, completed_at FROM materialization_intents"
        ],
        "materialization_intents row 'mat:forged' was written by no side write",
    ),
    Case(
        "materialization_intents",
        "(row)",
        lambda i: ["DELETE FROM materialization_intents"],
        "materialization_intents row 'mat:1' is gone, but commit",
    ),
    Case(
        "checkpoint_snapshots",
        "(row)",
        lambda i: [
            "DELETE FROM checkpoint_snapshots"
            f" WHERE checkpoint_id = {q(i.checkpoint_b)}"
        ],
        f"checkpoint_snapshots row {i_checkpoint_b!r} is gone, but commit",
    ),
    Case(
        "side_writes",
        "(row)",
        lambda i: ["DELETE FROM side_writes WHERE row_key = 'mat:1'"],
        "materialization_intents row 'mat:1' was written by no side write",
    ),
    # A payload erased without a recorded redaction (ADR 0062): the body is in
    # the exact redaction form, but no committed redaction record names it.
    *[
        Case(
            "records",
            "body_json",
            (
                lambda pick: (
                    lambda i: [
                        "UPDATE records SET body_json = "
                        f"{q(REDACTED_PREFIX + pick(i) + chr(34) + '}')}"
                        f" WHERE record_id = {q(i.call)}"
                    ]
                )
            )(cited),
            "a redacted body that no redaction record names",
        )
        for cited in (
            lambda i: "sha256:" + FORGED_HEX,  # no such record
            lambda i: i.note,  # a record that is not a redaction
        )
    ],
    *BLOB_STORE_CASES,
]


def test_every_column_of_every_trace_table_has_a_case() -> None:
    covered = {(c.table, c.column) for c in CASES}
    columns = {(t.name, c.name) for t in TRACE_TABLES for c in t.columns}
    assert columns - covered == set()
    blob_store = {(c.table, c.column) for c in BLOB_STORE_CASES}
    assert {(t.name, c.name) for t in blob_tables() for c in t.columns} <= blob_store


# ------------------------------------------------------------------- SQLite


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Ids]:
    path = tmp_path_factory.mktemp("tamper") / "trace.sqlite"
    with SQLiteTraceStore(path) as store:
        ids = build(store)
        assert verify_trace(store).ok
    return path, ids


def copy_of(pristine: tuple[Path, Ids], tmp_path: Path) -> Path:
    path = tmp_path / "trace.sqlite"
    shutil.copy(pristine[0], path)
    return path


def sqlite_edit(path: Path, statements: list[str]) -> None:
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute("PRAGMA ignore_check_constraints = ON")
        for statement in statements:
            conn.execute(statement)
        conn.commit()
    finally:
        conn.close()


def verify_file(path: Path) -> IntegrityReport:
    with open_trace_store_read_only(path) as store:
        return verify_trace(store, max_problems=None)


def assert_named(report: IntegrityReport, expect: str) -> None:
    assert not report.ok
    shown = [str(p) for p in report.problems]
    assert any(expect in line for line in shown), shown


def assert_named_at(target: Path | str, expect: str) -> None:
    """Verify ``target``; a refusal by the opener names the edit just as well."""
    try:
        with open_trace_store_read_only(target) as store:
            report = verify_trace(store, max_problems=None)
    except NotATraceStoreError as refused:
        shown = [str(refused)]
    else:
        assert not report.ok
        shown = [str(p) for p in report.problems]
    assert any(expect in line for line in shown), shown


def case_id(case: Case) -> str:
    return f"{case.table}.{case.column}"


def marked(cases: list[Case]) -> list[object]:
    return [
        pytest.param(
            case,
            id=case_id(case),
            marks=[pytest.mark.xfail(strict=True, reason=case.gap)] if case.gap else [],
        )
        for case in cases
    ]


@pytest.mark.parametrize("case", marked(CASES + EXTRA_CASES))
def test_sqlite_verify_names_each_edit(
    pristine: tuple[Path, Ids], tmp_path: Path, case: Case
) -> None:
    path = copy_of(pristine, tmp_path)
    sqlite_edit(path, case.sql(pristine[1]))
    assert_named_at(path, case.expect)


WRONG = {"INTEGER": "'abc'", "BIGINT": "'abc'", "BLOB": "'abc'"}


def _sweep() -> list[tuple[str, str, str]]:
    out = []
    for table in TRACE_TABLES:
        for column in table.columns:
            kind = str(column.type.compile(dialect=sqlite3_dialect()))
            out.append((table.name, column.name, WRONG.get(kind, "X'00ff'")))
    return out


def last_row(name: str) -> str:
    """A WHERE clause for the table's last row by primary key (no rowid needed)."""
    table = next(t for t in TRACE_TABLES if t.name == name)
    keys = ", ".join(f'"{c.name}"' for c in table.primary_key.columns)
    return (
        f"({keys}) = (SELECT {keys} FROM {name} ORDER BY {keys.replace(',', ' DESC,')}"
        " DESC LIMIT 1)"
    )


def sqlite3_dialect() -> Dialect:
    return sqlite_dialect.dialect()


@pytest.mark.parametrize(
    ("table", "column", "value"), _sweep(), ids=[f"{t}.{c}" for t, c, _ in _sweep()]
)
def test_sqlite_verify_names_a_wrongly_typed_cell_in_every_column(
    pristine: tuple[Path, Ids], tmp_path: Path, table: str, column: str, value: str
) -> None:
    path = copy_of(pristine, tmp_path)
    where = "key = 'next_commit_seq'" if table == "meta" else last_row(table)
    sqlite_edit(path, [f'UPDATE {table} SET "{column}" = {value} WHERE {where}'])
    report = verify_file(path)
    assert_named(report, f"{table}.{column}")
    assert report.problems[0].check == "well-formed"


@pytest.mark.parametrize(
    ("statement", "expect"),
    [
        (
            "UPDATE path_entries SET position = 'x1' WHERE position = 1",
            "path_entries.position",
        ),
        (
            "UPDATE path_entries SET path_ref = CAST(X'6f74686572000a' AS TEXT)"
            " WHERE path_ref = 'other'",
            "contains NUL",
        ),
        (
            "UPDATE records SET schema_ref = CAST(X'ff' AS TEXT)"
            " WHERE schema_ref = 'note.v1'",
            "not UTF-8",
        ),
        (
            "UPDATE records SET body_json = '{\"payload\":'"
            " || printf('%.*c', 100000, '[')"
            " || printf('%.*c', 100000, ']') || '}' WHERE schema_ref = 'note.v1'",
            "records.body_json",
        ),
        (
            'UPDATE records SET body_json = \'{"payload": {"text": "hi"}}\''
            " WHERE schema_ref = 'note.v1'",
            "canonical storage form",
        ),
    ],
    ids=[
        "non-integer position",
        "NUL in owner",
        "not UTF-8",
        "deep JSON",
        "non-canonical JSON",
    ],
)
def test_malformed_cells_are_named_not_raised(
    pristine: tuple[Path, Ids], tmp_path: Path, statement: str, expect: str
) -> None:
    path = copy_of(pristine, tmp_path)
    sqlite_edit(path, [statement])
    assert_named(verify_file(path), expect)


def test_a_consistent_tail_truncation_is_named(
    pristine: tuple[Path, Ids], tmp_path: Path
) -> None:
    """Delete the last commit and every trace of it, fixing the counters.

    What is left is a valid shorter trace: only a head digest noted before
    (``verify --expect-head``, issue 13 item 1) can tell it from a trace that
    never had that commit.
    """
    path = copy_of(pristine, tmp_path)
    with sqlite3.connect(path) as conn:
        last = conn.execute(
            "SELECT append_intent_id FROM path_entries ORDER BY position DESC LIMIT 1"
        ).fetchone()[0]
    sqlite_edit(path, truncation(path, last))
    assert not verify_file(path).ok


def truncation(path: Path, intent: str) -> list[str]:
    with sqlite3.connect(path) as conn:
        owners = conn.execute(
            "SELECT path_ref, count(*) FROM path_entries WHERE append_intent_id = ?"
            " GROUP BY path_ref",
            (intent,),
        ).fetchall()
        logged = conn.execute(
            "SELECT count(*) FROM path_entries WHERE append_intent_id = ?"
            " AND position IS NOT NULL",
            (intent,),
        ).fetchone()[0]
    statements = [
        f"UPDATE owner_ordinals SET next_ordinal = next_ordinal - {n}"
        f" WHERE trace_owner_id = {q(owner)}"
        for owner, n in owners
    ]
    statements += [
        "DELETE FROM owner_ordinals WHERE next_ordinal = 0",
        f"UPDATE meta SET value = CAST(CAST(value AS INTEGER) - {logged} AS TEXT)"
        " WHERE key = 'next_commit_seq'",
        f"DELETE FROM record_edges WHERE child_record_id IN (SELECT record_id FROM"
        f" records WHERE append_intent_id = {q(intent)})",
        f"DELETE FROM path_entries WHERE append_intent_id = {q(intent)}",
        f"DELETE FROM records WHERE append_intent_id = {q(intent)}",
        f"DELETE FROM contexts WHERE append_intent_id = {q(intent)}",
        f"DELETE FROM append_intents WHERE append_intent_id = {q(intent)}",
    ]
    return statements


def test_verify_all_lists_every_edit_and_the_default_only_the_first(
    pristine: tuple[Path, Ids], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = copy_of(pristine, tmp_path)
    ids = pristine[1]
    sqlite_edit(
        path,
        [
            *CASES[0].sql(ids),
            f"UPDATE records SET mode = 'capture' WHERE record_id = {q(ids.call)}",
            "UPDATE path_entries SET position = 'x1' WHERE position = 1",
        ],
    )
    assert main(["verify", str(path)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("verify failed: well-formed: ")
    assert err[-1].endswith("more problems (--all lists them)")
    assert main(["verify", "--all", str(path)]) == 1
    every = capsys.readouterr().err
    assert "next_commit_sequence" in every
    assert f"record {ids.call}" in every
    assert "path_entries.position" in every


# --------------------------------------------------------------- PostgreSQL


@pytest.fixture(scope="module")
def pg_template() -> Iterator[tuple[str, str, Ids]]:
    import os

    base = os.environ.get("GOATHERD_TEST_DB_URL")
    if not base:
        pytest.skip("GOATHERD_TEST_DB_URL is not set (no PostgreSQL server)")
    url = make_url(base)
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    name = f"tamper_{uuid.uuid4().hex[:10]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    template = url.set(database=name).render_as_string(hide_password=False)
    with open_trace_store(template) as store:
        ids = build(store)
        assert verify_trace(store).ok
    try:
        yield base, name, ids
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.mark.postgres
@pytest.mark.parametrize("case", marked(CASES + EXTRA_CASES))
def test_postgres_verify_names_each_edit(
    pg_template: tuple[str, str, Ids], case: Case
) -> None:
    base, template, ids = pg_template
    url = make_url(base)
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    name = f"tamper_{uuid.uuid4().hex[:10]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{template}"'))
    target = url.set(database=name).render_as_string(hide_password=False)
    try:
        engine = create_engine(target)
        with engine.begin() as conn:
            conn.execute(text("SET session_replication_role = replica"))
            conn.execute(
                text(
                    "ALTER TABLE records"
                    " DROP CONSTRAINT IF EXISTS ck_records_id_is_digest"
                )
            )
            for statement in case.sql(ids):
                for sqlite_form, pg_form in PG_BYTES.items():
                    statement = statement.replace(sqlite_form, pg_form)
                conn.execute(text(statement))
        engine.dispose()
        assert_named_at(target, case.expect)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.mark.parametrize("stored", ['"a\x7fb"', '"a\\u007fb"'], ids=["raw", "escaped"])
def test_a_payload_with_del_verifies_in_either_stored_form(
    tmp_path: Path, stored: str
) -> None:
    """Stores before the U+007F fix kept it raw in ASCII payloads; both forms pass."""
    path = tmp_path / "trace.sqlite"
    with SQLiteTraceStore(path) as store:
        receipt = store.append(
            goatherd.TRUSTED_APPEND_CONTEXT,
            AppendBatch(
                "del:1",
                (
                    AppendGroup(
                        "agent:main",
                        fact_drafts=(
                            RecordDraft("capture", "note.v1", {"text": "a\x7fb"}),
                        ),
                    ),
                ),
            ),
        )
    body = '{"payload":{"text":' + stored + "}}"
    sqlite_edit(
        path,
        [
            f"UPDATE records SET body_json = {q(body)}"
            f" WHERE record_id = {q(receipt.fact_ids[0])}"
        ],
    )
    assert verify_file(path).ok
