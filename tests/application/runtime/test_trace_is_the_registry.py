"""Everything a manager answers comes from the trace: other managers, other
processes and a restart see the same; what the trace does not vouch for is
refused.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from returns.result import Failure, Success
from sqlalchemy import text

from goatherd.application import (
    RecoverOptions,
    SandboxError,
    SandboxSpec,
    ScopeManager,
    recover_scopes,
)
from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    BlobIntegrityError,
    CheckpointNotFoundError,
    CheckpointState,
    OutputConsumedError,
    OutputSettled,
    OutputState,
    RecordDraft,
    ReservedSchemaError,
    RuntimeRecordRefusedError,
    ScopeState,
)
from goatherd.infrastructure.bootstrap import runtime_context_for, scope_manager_for
from goatherd.infrastructure.sandbox.memory import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.store import SQLiteTraceStore

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def path(tmp_path):
    return tmp_path / "trace.db"


def sandbox(repository=None) -> MemorySandbox:
    if repository is not None:
        sb = MemorySandbox(MemorySandboxConfig(repository=repository))
    else:
        sb = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"1\n"}))
    sb.create(SandboxSpec())
    return sb


def failure_of(result):
    assert isinstance(result, Failure), result
    return result.failure()


def sealed(mgr: ScopeManager):
    main = sandbox()
    root = mgr.create("root", main).unwrap()
    wt = sandbox(main.repository)
    child = mgr.fork_isolated(root.id, "try", None, wt).unwrap()
    wt.write_file("b.txt", b"child\n")
    return main, wt, mgr.seal(child.id).unwrap()


def in_another_process(db: Path, body: str) -> str:
    script = textwrap.dedent(
        f"""
        from goatherd.infrastructure.bootstrap import scope_manager_for
        from goatherd.infrastructure.store import SQLiteTraceStore
        with SQLiteTraceStore({str(db)!r}) as store:
            mgr = scope_manager_for(store)
        """
    ) + textwrap.indent(textwrap.dedent(body), "    ")
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


class TestEveryProcessSeesTheSame:
    def test_a_root_created_in_one_process_is_a_scope_in_another(self, path):
        with SQLiteTraceStore(path) as store:
            scope_manager_for(store).create("agent:main", sandbox()).unwrap()
        out = in_another_process(
            path,
            """
            scope = mgr.get("scope:agent:main")
            print(scope.state.value, [s.id for s in mgr.all_scopes()])
            """,
        )
        assert out.strip() == "active ['scope:agent:main']"

    def test_a_second_manager_answers_every_query_like_the_first(self, path):
        with SQLiteTraceStore(path) as one, SQLiteTraceStore(path) as two:
            first = scope_manager_for(one)
            _, _, out = sealed(first)
            cp = first.create_checkpoint("scope:root", b"snap").unwrap()
            second = scope_manager_for(two)
            assert [s.id for s in second.all_scopes()] == ["scope:root", "scope:try"]
            again = second.output(out.id)
            assert again is not None
            assert (
                again.changes()
                == out.changes()
                == [{"path": "b.txt", "kind": "create"}]
            )
            assert again.diff() == out.diff()
            assert "+child" in again.diff()
            assert again.sealed_at() == out.sealed_at() is not None
            view = second.checkpoint(cp.id)
            assert view is not None
            assert (view.snapshot, view.state) == (b"snap", CheckpointState.VALID)
            assert view.created_at == cp.created_at

    def test_the_output_s_diff_and_times_survive_a_restart(self, path):
        with SQLiteTraceStore(path) as store:
            _, _, out = sealed(scope_manager_for(store))
            diff, sealed_at = out.diff(), out.sealed_at()
        with SQLiteTraceStore(path) as store:
            mgr = recover_scopes(runtime_context_for(store)).unwrap()
            again = mgr.output(out.id)
            assert again is not None
            assert (again.diff(), again.sealed_at()) == (diff, sealed_at)
            assert again.settled_at() is None

    def test_pruned_checkpoints_are_gone_everywhere_and_their_bytes_too(self, path):
        with SQLiteTraceStore(path) as store:
            mgr = scope_manager_for(store)
            root = mgr.create("root", sandbox()).unwrap()
            cp = mgr.create_checkpoint(root.id, b"unique bytes 1234").unwrap()
            assert mgr.prune_checkpoints(root.id) == 1
            with store.engine.connect() as conn:
                blobs = conn.execute(
                    text("SELECT count(*) FROM content_blobs")
                ).scalar()
            assert blobs == 0
        out = in_another_process(
            path,
            f"""
            print(mgr.checkpoint({cp.id!r}), mgr.latest_checkpoint("scope:root"))
            print(type(mgr.restore_checkpoint({cp.id!r}).failure()).__name__)
            """,
        )
        assert out.split() == ["None", "None", CheckpointNotFoundError.__name__]

    def test_a_failed_restore_burns_the_checkpoint_for_every_process(self, path):
        with SQLiteTraceStore(path) as store:
            mgr = scope_manager_for(store)
            main = sandbox()
            root = mgr.create("root", main).unwrap()
            cp = mgr.create_checkpoint(root.id, b"s").unwrap()

            def broken_apply(state):
                raise SandboxError("disk gone")

            main.apply = broken_apply  # type: ignore[method-assign]
            assert isinstance(failure_of(mgr.restore_checkpoint(cp.id)), SandboxError)
        out = in_another_process(path, f"print(mgr.checkpoint({cp.id!r}).state.value)")
        assert out.strip() == "invalid"

    def test_pruned_terminal_scopes_are_hidden_in_every_process(self, path):
        with SQLiteTraceStore(path) as store:
            mgr = scope_manager_for(store)
            root = mgr.create("root", sandbox()).unwrap()
            child = mgr.fork(root.id, "gone").unwrap()
            mgr.discard(child.id).unwrap()
            assert mgr.prune_terminal() == 1
            assert mgr.prune_terminal() == 0
        out = in_another_process(path, "print([s.id for s in mgr.all_scopes()])")
        assert out.strip() == "['scope:root']"


class TestWhatTheTraceDoesNotVouchFor:
    def test_an_edited_snapshot_row_makes_restore_refuse_and_change_nothing(self, path):
        with SQLiteTraceStore(path) as store:
            mgr = scope_manager_for(store)
            main = sandbox()
            root = mgr.create("root", main).unwrap()
            cp = mgr.create_checkpoint(root.id, b"the real conversation").unwrap()
            main.write_file("a.txt", b"changed\n")
            with store.transaction() as conn:
                conn.execute(text("UPDATE content_blobs SET data = :d"), {"d": b"fake"})
            before = store.fact_count(), store.max_position()
            refused = failure_of(mgr.restore_checkpoint(cp.id))
            assert isinstance(refused, BlobIntegrityError)
            assert "do not match the trace's digest" in str(refused)
            assert main.read_file("a.txt") == b"changed\n"  # nothing applied
            assert (store.fact_count(), store.max_position()) == before  # no claim
            view = mgr.checkpoint(cp.id)
            assert view is not None
            assert view.state is CheckpointState.VALID

    def test_a_deleted_snapshot_row_makes_restore_refuse(self, path):
        with SQLiteTraceStore(path) as store:
            mgr = scope_manager_for(store)
            root = mgr.create("root", sandbox()).unwrap()
            cp = mgr.create_checkpoint(root.id, b"x").unwrap()
            with store.transaction() as conn:
                conn.execute(text("DELETE FROM content_blobs"))
            refused = failure_of(mgr.restore_checkpoint(cp.id))
            assert isinstance(refused, BlobIntegrityError)
            assert "missing" in str(refused)

    def test_an_edited_diff_row_is_refused_when_read(self, path):
        with SQLiteTraceStore(path) as store:
            _, _, out = sealed(scope_manager_for(store))
            with store.transaction() as conn:
                conn.execute(text("UPDATE content_blobs SET data = :d"), {"d": b"x"})
            with pytest.raises(BlobIntegrityError):
                _ = out.diff()

    def test_a_settled_record_with_an_extra_key_consumes_the_output(self, path):
        with SQLiteTraceStore(path) as store:
            mgr = scope_manager_for(store)
            _, _, out = sealed(mgr)
            forged = RecordDraft(
                "capture",
                OutputSettled.SCHEMA,
                {
                    "output_id": out.id,
                    "action": "released",
                    "state_digest": out.workspace().digest(),
                    "written_by": "another implementation",
                },
            )
            store.append(
                TRUSTED_APPEND_CONTEXT,
                AppendBatch(
                    "other:settle", (AppendGroup(out.id, fact_drafts=(forged,)),)
                ),
            )
            assert out.state is OutputState.RELEASED
            again = failure_of(mgr.settle(out.id, "selected"))
            assert isinstance(again, OutputConsumedError)
            with SQLiteTraceStore(path) as other:
                second = scope_manager_for(other)
                assert isinstance(
                    failure_of(second.settle(out.id, "discarded")), OutputConsumedError
                )

    def test_a_malformed_runtime_record_is_refused_at_the_door(self, path):
        with SQLiteTraceStore(path) as store:
            mgr = scope_manager_for(store)
            _, _, out = sealed(mgr)
            before = store.fact_count()
            forged = RecordDraft(
                "capture", OutputSettled.SCHEMA, {"output_id": out.id, "action": 5}
            )
            with pytest.raises(RuntimeRecordRefusedError) as refused:
                store.append(
                    TRUSTED_APPEND_CONTEXT,
                    AppendBatch(
                        "other:bad", (AppendGroup(out.id, fact_drafts=(forged,)),)
                    ),
                )
            assert "payload.action must be a string, got an integer" in str(
                refused.value
            )
            assert store.fact_count() == before
        with SQLiteTraceStore(path) as store:
            recovered = recover_scopes(runtime_context_for(store), RecoverOptions())
            assert isinstance(recovered, Success)
            released = scope_manager_for(store).settle(out.id, "released")
            assert isinstance(released, Success)

    def test_lifecycle_schemas_cannot_be_appended_as_facts(self, path):
        with SQLiteTraceStore(path) as store:
            mgr = scope_manager_for(store)
            root = mgr.create("root", sandbox()).unwrap()
            child = mgr.fork(root.id, "c").unwrap()
            before = store.fact_count()
            for schema in (
                "goatherd.scope.merged.v1",
                "goatherd.run_output.settled.v1",
                "shepherd.scope.forked.v1",
                "goatherd.my.own.v1",
            ):
                refused = failure_of(
                    child.append_fact(schema, "x", {"child_owner": "c"})
                )
                assert isinstance(refused, ReservedSchemaError)
            assert store.fact_count() == before
            assert child.state is ScopeState.ACTIVE
            assert isinstance(
                child.append_fact("app.note.v1", "note", {"n": 1}), Success
            )


def _stranding(manager):
    """A root, its isolated child, and a shared scope working in that child."""
    main = sandbox()
    root = manager.create("root", main).unwrap()
    iso = manager.fork_isolated(
        root.id, "root:iso", None, sandbox(main.repository)
    ).unwrap()
    return main, iso, manager.fork(iso.id, "root:iso:sh").unwrap()


class TestAScopeWhoseWorkspaceEnded:
    """A shared child of an isolated scope outlives the sandbox it worked in."""

    def test_it_cannot_fork_in_any_manager_or_process(self, path):
        with SQLiteTraceStore(path) as one, SQLiteTraceStore(path) as two:
            first, second = scope_manager_for(one), scope_manager_for(two)
            _main, iso, shared = _stranding(first)
            assert isinstance(first.discard(iso.id), Success)
            seen = second.get(shared.id)
            assert seen is not None
            assert seen.state is ScopeState.ACTIVE
            for mgr in (first, second):
                error = failure_of(mgr.fork(shared.id, "root:iso:sh:next"))
                assert str(error) == (
                    "cannot fork scope scope:root:iso:sh: it works in the "
                    "workspace of scope:root:iso, which is discarded"
                )
        out = in_another_process(
            path,
            """
            print(mgr.fork("scope:root:iso:sh", "root:iso:sh:other"))
            """,
        )
        assert "which is discarded" in out
        with SQLiteTraceStore(path) as store:
            heads = [store.head(o) for o in ("root:iso:sh:next", "root:iso:sh:other")]
        assert heads == [0, 0]

    def test_it_cannot_checkpoint_seal_or_restore_once_its_root_is_halted(self, path):
        """Found by the runtime state machine: only fork was refused before."""
        with SQLiteTraceStore(path) as one, SQLiteTraceStore(path) as two:
            first, second = scope_manager_for(one), scope_manager_for(two)
            main = sandbox()
            root = first.create("root", main).unwrap()
            shared = first.fork(root.id, "root:sh").unwrap()
            main.write_file("a.txt", b"changed\n")
            kept = first.create_checkpoint(shared.id, b"before").unwrap()
            first.halt(root.id)
            files = dict(main._files or {})
            for mgr in (first, second):
                for result, verb in (
                    (mgr.create_checkpoint(shared.id, b"after"), "checkpoint scope"),
                    (mgr.seal(shared.id), "seal scope"),
                    (mgr.restore_checkpoint(kept.id), "restore in scope"),
                ):
                    assert str(failure_of(result)) == (
                        f"cannot {verb} scope:root:sh: it works in the workspace "
                        "of scope:root, which is discarded"  # halting discards it
                    )
            assert main._files == files  # nothing was applied
        with SQLiteTraceStore(path) as store:
            assert store.head("root:sh") == 2  # the fork and the first checkpoint

    def test_its_isolated_children_can_still_be_discarded(self, path):
        """Ending a child leaves the parent's workspace alone: no stranded sandbox."""
        with SQLiteTraceStore(path) as one, SQLiteTraceStore(path) as two:
            first, second = scope_manager_for(one), scope_manager_for(two)
            main, iso, shared = _stranding(first)
            child = first.fork_isolated(
                shared.id, "root:iso:sh:iso", None, sandbox(main.repository)
            ).unwrap()
            assert isinstance(first.discard(iso.id), Success)
            assert isinstance(second.discard(child.id), Success)
            ended = first.get(child.id)
            assert ended is not None
            assert ended.state is ScopeState.DISCARDED
