"""The seed's "Materialize recorded intents" example, end to end through ``goatherd``.

Declarations are appended with a witness whose ``substrate_ref`` names the
substrate; ``materialize`` reads them from the owner path, lets the substrate
act on a real world (a git worktree, a memory workspace, a SQLite KV file),
appends the captures and writes the completed-intent ledger row. Everything
here goes through the public facade (``import goatherd``) on a file store.

The git backend owns git state only: it has no file IO, so recorded file
writes are refused with an honest ``clean_failure`` (as the seed says), and it
executes only through a containment backend, here Landlock.
"""

from __future__ import annotations

import base64
import hashlib
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
from returns.result import Failure

import goatherd as g
import goatherd.application as ga
import goatherd.domain as gd
import goatherd.infrastructure as gi
from tests.infrastructure.sandbox.gitfixtures import make_repo, snapshot

CONTEXT = gd.AppendContext("agent:host", ("trusted:internal",), trust_mode="internal")
MATERIALIZE = CONTEXT.to_operation_context("materialize")
OWNER = "agent:main"
INTENT = "run:42:materialize"
WORKSPACE = "workspace.sandbox.v1"

needs_landlock = pytest.mark.skipif(
    gi.landlock_abi() < 1,
    reason="this kernel does not provide Landlock, so a confined exec refuses "
    "to run (fail-closed); the refusal itself is tested without the skip",
)


# ---------------------------------------------------------------- helpers


def declare(
    store: g.SQLiteTraceStore,
    intent: str,
    substrate_ref: str,
    drafts: Sequence[g.RecordDraft],
) -> tuple[str, ...]:
    """Append declarations whose witness names ``substrate_ref``."""
    group = g.AppendGroup(
        OWNER, g.RetainedContextDraft(substrate_ref=substrate_ref), (), tuple(drafts)
    )
    return store.append(CONTEXT, g.AppendBatch(intent, (group,))).fact_ids


def file_write(path: str, data: bytes) -> g.RecordDraft:
    payload = {"path": path, "content_b64": base64.b64encode(data).decode()}
    return g.RecordDraft("declaration", "workspace.file.write.v1", payload, "write")


def shell(script: str) -> g.RecordDraft:
    payload = {"command": "sh", "args": ["-c", script]}
    return g.RecordDraft("declaration", "workspace.exec.v1", payload, "exec")


def kv_put(key: str, value: object) -> g.RecordDraft:
    payload = {"key": key, "value": value}
    return g.RecordDraft("declaration", "shepherd2.kv.put.v1", payload, "put")


def seed_request(ids: Sequence[str], intent: str = INTENT) -> g.MaterializationRequest:
    return g.MaterializationRequest(
        append_intent_id=intent,
        target_trace_owner_id=OWNER,
        target_record_ids=tuple(ids),
        target_through_owner_ordinal=g.MAX_OWNER_ORDINAL,
    )


def registry_of(substrate: ga.Substrate) -> g.SubstrateRegistry:
    registry = g.SubstrateRegistry()
    registry.register(substrate)
    return registry


def trace_size(store: g.SQLiteTraceStore) -> tuple[int, int]:
    return store.fact_count(), store.max_position()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def produced_captures(
    store: g.SQLiteTraceStore,
    receipt: gd.MaterializationReceipt,
    *,
    containment: str,
) -> list[g.Record]:
    """Read the receipt's captures, checking the seed's two promises on each.

    Each capture is caused by its declaration (in request order) and is
    witness-stamped with the substrate that applied it.
    """
    captures = []
    for target, produced in zip(
        receipt.target_record_ids, receipt.produced_record_ids, strict=True
    ):
        record = store.read_fact(g.TRUSTED_READ_CONTEXT, produced)
        assert isinstance(record, g.Record)
        assert record.envelope.mode == "capture"
        assert record.envelope.caused_by_record_ids == (target,)
        assert record.view is not None
        assert record.view.trace_owner_id == OWNER
        witness = store.read_fact(g.TRUSTED_READ_CONTEXT, record.envelope.witness_ref)
        assert isinstance(witness, g.Record)
        assert witness.payload["substrate_ref"] == receipt.substrate_ref
        assert witness.payload["containment"] == containment
        captures.append(record)
    return captures


# ---------------------------------------------------------------- fixtures


@pytest.fixture
def store(tmp_path: Path) -> Iterator[g.SQLiteTraceStore]:
    with g.SQLiteTraceStore(tmp_path / "trace.db") as trace:
        yield trace


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside"
    path.mkdir()
    return path


@contextmanager
def worktree(
    repo: Path, path: Path, backend: ga.ContainmentBackend | None
) -> Iterator[gi.GitSandbox]:
    sandbox = g.new_worktree_sandbox(repo, path, exec_backend=backend)
    sandbox.create(g.SandboxSpec())
    try:
        yield sandbox
    finally:
        sandbox.destroy()


@pytest.fixture
def confined(repo: Path, tmp_path: Path) -> Iterator[gi.GitSandbox]:
    """A detached git worktree whose exec is confined by Landlock."""
    with worktree(repo, tmp_path / "wt", gi.LandlockBackend()) as sandbox:
        yield sandbox


# ---------------------------------------------------------------- git


@pytest.mark.integration
class TestWorkspaceOnAGitWorktree:
    """``WorkspaceSubstrate(sandbox)`` over a real git worktree."""

    def test_recorded_file_writes_get_an_honest_clean_failure_from_git(
        self, store: g.SQLiteTraceStore, confined: gi.GitSandbox
    ) -> None:
        registry = registry_of(gi.WorkspaceSubstrate(confined))
        # The exec would run (the backend can exec), but the capability gate
        # covers the whole batch first: nothing is attempted.
        ids = declare(
            store,
            "declare",
            WORKSPACE,
            [file_write("notes/a.txt", b"a\n"), shell("printf ran > ran.txt")],
        )
        before, world = trace_size(store), snapshot(confined.workdir)

        receipt = g.materialize(store, MATERIALIZE, seed_request(ids), registry)

        assert receipt.unwrap() == gd.MaterializationReceipt(
            outcome=gd.MaterializationOutcome.CLEAN_FAILURE,
            substrate_ref=WORKSPACE,
            target_record_ids=ids,
            produced_record_ids=(),
            failure_reason='sandbox backend "git" does not support file IO',
        )
        assert trace_size(store) == before
        assert snapshot(confined.workdir) == world
        # The honest failure is a completed intent: a retry replays it.
        again = g.materialize(store, MATERIALIZE, seed_request(ids), registry)
        assert again.unwrap() == receipt.unwrap()

    @needs_landlock
    def test_recorded_execs_run_confined_and_come_back_as_captures(
        self,
        store: g.SQLiteTraceStore,
        confined: gi.GitSandbox,
        outside: Path,
    ) -> None:
        registry = registry_of(gi.WorkspaceSubstrate(confined))
        escape = outside / "escape.txt"
        ids = declare(
            store,
            "declare",
            WORKSPACE,
            [shell("printf hello > out.txt; echo done"), shell(f"echo x > {escape}")],
        )

        receipt = g.materialize(store, MATERIALIZE, seed_request(ids), registry)

        result = receipt.unwrap()
        assert result.outcome is gd.MaterializationOutcome.SUCCESS
        assert result.substrate_ref == WORKSPACE
        assert result.failure_reason == ""
        anchor = {
            "kind": "workspace_exec",
            "command": "sh",
            "substrate_ref": WORKSPACE,
            "backend": "git",
        }
        assert result.world_side_anchors == (anchor, anchor)
        wrote, escaped = produced_captures(store, result, containment="contained")
        assert wrote.envelope.schema_ref == "workspace.exec.applied.v1"
        assert wrote.fact_kind == "workspace_exec_applied"
        assert wrote.payload == {
            "command": "sh",
            "exit_code": 0,
            "stdout_digest": sha256_hex(b"done\n"),
            "stderr_digest": sha256_hex(b""),
        }
        assert (confined.workdir / "out.txt").read_bytes() == b"hello"
        # Landlock denied the write outside the worktree; the exec still ran to
        # completion, so it is a success that records the failing exit code.
        assert escaped.payload["exit_code"] != 0
        assert escaped.payload["stderr_digest"] != sha256_hex(b"")
        assert not escape.exists()

    @needs_landlock
    def test_a_same_intent_retry_replays_the_receipt_without_running_again(
        self,
        tmp_path: Path,
        store: g.SQLiteTraceStore,
        confined: gi.GitSandbox,
    ) -> None:
        registry = registry_of(gi.WorkspaceSubstrate(confined))
        runs = confined.workdir / "runs.log"
        ids = declare(store, "declare", WORKSPACE, [shell("echo run >> runs.log")])
        first = g.materialize(store, MATERIALIZE, seed_request(ids), registry)
        after_first = trace_size(store)

        retry = g.materialize(store, MATERIALIZE, seed_request(ids), registry)

        assert retry.unwrap() == first.unwrap()
        assert trace_size(store) == after_first
        assert runs.read_text() == "run\n"
        # The ledger survives a restart: a reopened store replays it too.
        store.close()
        with g.SQLiteTraceStore(tmp_path / "trace.db") as reopened:
            replay = g.materialize(reopened, MATERIALIZE, seed_request(ids), registry)
            assert replay.unwrap() == first.unwrap()
            assert trace_size(reopened) == after_first
        assert runs.read_text() == "run\n"

    @needs_landlock
    def test_a_same_intent_request_with_other_content_is_a_conflict(
        self, store: g.SQLiteTraceStore, confined: gi.GitSandbox
    ) -> None:
        registry = registry_of(gi.WorkspaceSubstrate(confined))
        runs = confined.workdir / "runs.log"
        ids = declare(
            store,
            "declare",
            WORKSPACE,
            [shell("echo first >> runs.log"), shell("echo second >> runs.log")],
        )
        g.materialize(store, MATERIALIZE, seed_request(ids[:1]), registry).unwrap()
        before = trace_size(store)

        conflict = g.materialize(store, MATERIALIZE, seed_request(ids[1:]), registry)

        assert isinstance(conflict, Failure)
        error = conflict.failure()
        assert isinstance(error, gd.AppendIntentConflictError)
        assert str(error) == (
            f"materialize intent '{INTENT}' was already committed "
            "with different content"
        )
        assert trace_size(store) == before
        assert runs.read_text() == "first\n"

    def test_an_exec_that_cannot_be_confined_is_split_state_and_never_runs(
        self, store: g.SQLiteTraceStore, repo: Path, tmp_path: Path
    ) -> None:
        # A kernel without Landlock (simulated by capping the ABI at 0): the
        # backend refuses to run unconfined. The sandbox call was made, so the
        # substrate cannot claim a clean failure (runtime-spec 14.4).
        with worktree(repo, tmp_path / "wt", gi.LandlockBackend(max_abi=0)) as sandbox:
            registry = registry_of(gi.WorkspaceSubstrate(sandbox))
            ids = declare(store, "declare", WORKSPACE, [shell("printf ran > ran.txt")])
            before = trace_size(store)

            receipt = g.materialize(store, MATERIALIZE, seed_request(ids), registry)

            assert not (sandbox.workdir / "ran.txt").exists()

        result = receipt.unwrap()
        assert result.outcome is gd.MaterializationOutcome.SPLIT_STATE
        assert result.produced_record_ids == ()
        assert result.failure_reason.startswith(f"record {ids[0]}: landlock: ")
        assert "does not provide Landlock" in result.failure_reason
        assert trace_size(store) == before

    def test_without_an_exec_backend_git_refuses_execs_cleanly(
        self, store: g.SQLiteTraceStore, repo: Path, tmp_path: Path
    ) -> None:
        with worktree(repo, tmp_path / "wt", None) as sandbox:
            registry = registry_of(gi.WorkspaceSubstrate(sandbox))
            ids = declare(store, "declare", WORKSPACE, [shell("printf x > ran.txt")])

            result = g.materialize(store, MATERIALIZE, seed_request(ids), registry)

            assert not (sandbox.workdir / "ran.txt").exists()
        assert result.unwrap().outcome is gd.MaterializationOutcome.CLEAN_FAILURE
        assert result.unwrap().failure_reason == (
            'sandbox backend "git" does not support exec'
        )


# ---------------------------------------------------------------- file IO


class TestWorkspaceFileWrites:
    """The seed's file-write declarations on a backend that has file IO."""

    def test_recorded_file_writes_land_and_come_back_as_captures(
        self, store: g.SQLiteTraceStore
    ) -> None:
        sandbox = g.MemorySandbox(gi.MemorySandboxConfig(files={"README": b"hi\n"}))
        sandbox.create(g.SandboxSpec())
        registry = registry_of(gi.WorkspaceSubstrate(sandbox))
        writes = {"notes/a.txt": b"alpha\n", "README": b"rewritten\n"}
        ids = declare(
            store, "declare", WORKSPACE, [file_write(p, d) for p, d in writes.items()]
        )

        receipt = g.materialize(store, MATERIALIZE, seed_request(ids), registry)

        result = receipt.unwrap()
        assert result.outcome is gd.MaterializationOutcome.SUCCESS
        captures = produced_captures(store, result, containment="buffered")
        assert [c.payload for c in captures] == [
            {"path": p, "digest": sha256_hex(d)} for p, d in writes.items()
        ]
        assert {c.envelope.schema_ref for c in captures} == {
            "workspace.file.write.applied.v1"
        }
        for path, data in writes.items():
            assert sandbox.read_file(path) == data
        # A retry does not write again: the world keeps a later change.
        sandbox.write_file("README", b"later\n")
        again = g.materialize(store, MATERIALIZE, seed_request(ids), registry)
        assert again.unwrap() == result
        assert sandbox.read_file("README") == b"later\n"


# ---------------------------------------------------------------- KV + echo


class TestKVAndEcho:
    """The seed's other reference substrates: the SQLite KV world and echo."""

    def test_kv_puts_land_in_a_world_database_separate_from_the_trace(
        self, tmp_path: Path, store: g.SQLiteTraceStore
    ) -> None:
        world_path = tmp_path / "world.db"
        with gi.SQLiteKVSubstrate(world_path) as kv:
            registry = registry_of(kv)
            ids = declare(
                store,
                "declare",
                "kv.sqlite.local.v1",
                [kv_put("answer", 42), kv_put("ratio", 0.5), kv_put("tags", ["a"])],
            )

            result = g.materialize(store, MATERIALIZE, seed_request(ids), registry)

            receipt = result.unwrap()
            assert receipt.outcome is gd.MaterializationOutcome.SUCCESS
            captures = produced_captures(store, receipt, containment="contained")
            assert [c.payload for c in captures] == [
                {"key": "answer", "value": 42},
                {"key": "ratio", "value": 0.5},
                {"key": "tags", "value": ["a"]},
            ]
            assert [a["key"] for a in receipt.world_side_anchors] == [
                "answer",
                "ratio",
                "tags",
            ]
            assert (kv.get("answer"), kv.get("ratio"), kv.get("tags")) == (
                42,
                0.5,
                ["a"],
            )
        assert table_names(world_path) == {"kv", "applied_intents"}
        assert "kv" not in table_names(tmp_path / "trace.db")

    def test_kv_retry_after_a_restart_replays_without_writing_the_world(
        self, tmp_path: Path, store: g.SQLiteTraceStore
    ) -> None:
        world_path = tmp_path / "world.db"
        with gi.SQLiteKVSubstrate(world_path) as kv:
            ids = declare(store, "declare", "kv.sqlite.local.v1", [kv_put("k", 1)])
            first = g.materialize(
                store, MATERIALIZE, seed_request(ids), registry_of(kv)
            ).unwrap()
        store.close()
        # Someone changes the world; a re-dispatch would overwrite it.
        with sqlite3.connect(world_path) as world:
            world.execute("UPDATE kv SET value_json = '2' WHERE key = 'k'")
        world.close()
        with (
            g.SQLiteTraceStore(tmp_path / "trace.db") as reopened,
            gi.SQLiteKVSubstrate(world_path) as kv,
        ):
            before = trace_size(reopened)
            replay = g.materialize(
                reopened, MATERIALIZE, seed_request(ids), registry_of(kv)
            )
            assert replay.unwrap() == first
            assert trace_size(reopened) == before
            assert kv.get("k") == 2
            other = declare(
                reopened, "declare-2", "kv.sqlite.local.v1", [kv_put("k", 3)]
            )
            conflict = g.materialize(
                reopened, MATERIALIZE, seed_request(other), registry_of(kv)
            )
            assert isinstance(conflict.failure(), gd.AppendIntentConflictError)
            assert kv.get("k") == 2

    def test_echo_captures_mirror_their_declarations(
        self, store: g.SQLiteTraceStore
    ) -> None:
        echo = ga.EchoSubstrate("echo.v1", ["note.write.v1"])
        drafts = [
            g.RecordDraft("declaration", "note.write.v1", {"text": t}, "note")
            for t in ("one", "two")
        ]
        ids = declare(store, "declare", "echo.v1", drafts)

        result = g.materialize(store, MATERIALIZE, seed_request(ids), registry_of(echo))

        receipt = result.unwrap()
        assert receipt.outcome is gd.MaterializationOutcome.SUCCESS
        captures = produced_captures(store, receipt, containment=gd.DEFAULT_CONTAINMENT)
        assert [(c.envelope.schema_ref, c.payload) for c in captures] == [
            ("note.write.v1", {"text": "one"}),
            ("note.write.v1", {"text": "two"}),
        ]
        assert [c.fact_kind for c in captures] == ["note", "note"]

    def test_the_substrate_is_chosen_by_the_witness_never_by_the_schema(
        self, store: g.SQLiteTraceStore
    ) -> None:
        # A file-write declaration stamped for the echo substrate is echoed;
        # the workspace (which accepts that schema too) is never touched.
        sandbox = g.MemorySandbox()
        sandbox.create(g.SandboxSpec())
        registry = g.SubstrateRegistry()
        registry.register(gi.WorkspaceSubstrate(sandbox))
        registry.register(ga.EchoSubstrate("echo.v1", ["workspace.file.write.v1"]))
        ids = declare(store, "declare", "echo.v1", [file_write("a.txt", b"a")])

        result = g.materialize(store, MATERIALIZE, seed_request(ids), registry)

        assert result.unwrap().substrate_ref == "echo.v1"
        assert sandbox.list_files() == []
        unknown = declare(store, "declare-2", "nowhere.v1", [file_write("b", b"b")])
        before = trace_size(store)
        refused = g.materialize(
            store, MATERIALIZE, seed_request(unknown, "run:43"), registry
        )
        error = refused.failure()
        assert isinstance(error, ga.UnknownSubstrateError)
        assert str(error) == "unknown substrate: nowhere.v1"
        assert trace_size(store) == before
        assert store.read_completed_materialization("run:43") is None


def table_names(path: Path) -> set[str]:
    with sqlite3.connect(path) as connection:
        rows = connection.execute("SELECT name FROM sqlite_master WHERE type='table'")
        names = {row[0] for row in rows}
    connection.close()
    return names
