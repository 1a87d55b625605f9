"""Two managers on one trace, crashes at every write boundary (Hypothesis).

Two managers run commands on one SQLite file, each over its own store object
(so each keeps its own fold of the log, as a second process would); any step
may reopen one of them from scratch. A command may crash at its N-th write
boundary (before or after a commit, after its blob, after its workspace
effect); the crashed manager is reopened and the command retried under the
same ``seq``, and it must then finish exactly once.

After every step both managers, and a fold of the trace made from nothing,
give the same answers; the read model kept up by a runner since the start
equals the one rebuilt from the log; no output is settled twice and no
checkpoint restored twice; a select that won found its parent at the
baseline, and a failed command left every workspace as it was.

The host's sandbox objects (memory sandboxes) are shared by both managers
through their resolvers, as one host would re-adopt them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from returns.result import Failure, Result, Success

from goatherd.application import SandboxSpec, ScopeManager
from goatherd.domain import (
    CheckpointRestored,
    OutputSettled,
    OutputState,
    ReservedSchemaError,
    ScopeAggregate,
    ScopeDiscarded,
    ScopeState,
    SnapshotReleasedError,
)
from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.projections.runner import ProjectionRunner
from goatherd.infrastructure.projections.views import (
    SqlUiIndexView,
    runtime_state_view_factory,
)
from goatherd.infrastructure.sandbox.memory import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.store import SQLiteTraceStore
from goatherd.projections import RuntimeStateProjection, UiIndexProjection
from goatherd.testing import assert_replay_equivalent

ROOT = "agent:main"
BOUNDARIES = st.none() | st.integers(0, 7)
FILES = st.sampled_from(["a.txt", "b.txt", "c.txt", "d.txt"])
SCHEMAS = st.sampled_from(
    [
        "app.note.v1",
        "app.tool.bash.v1",
        "goatherd.scope.merged.v1",
        "goatherd.run_output.settled.v1",
        "goatherd.checkpoint.restored.v2",
        "shepherd.scope.discarded.v1",
    ]
)


class Crash(BaseException):
    """A simulated process death at a write boundary."""


@dataclass
class Host:
    """The host's sandbox objects by scope id (what a resolver re-adopts)."""

    sandboxes: dict[str, MemorySandbox] = field(default_factory=dict)

    def resolve(self, scope_id: str, backend: str, path: str) -> MemorySandbox | None:
        return self.sandboxes.get(scope_id)


def files_of(sandbox: MemorySandbox) -> dict[str, bytes]:
    return {path: sandbox.read_file(path) for path in sandbox.list_files()}


@dataclass
class Output:
    id: str
    scope: str
    parent: str
    baseline: dict[str, bytes]
    sealed: dict[str, bytes]


@dataclass
class Checkpoint:
    id: str
    scope: str
    files: dict[str, bytes]
    snapshot: bytes


class RuntimeMachine(RuleBasedStateMachine):
    scopes = Bundle("scopes")
    outputs = Bundle("outputs")
    checkpoints = Bundle("checkpoints")

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp())
        self.db = self.tmp / "trace.db"
        self.host = Host()
        self.stores: list[SQLiteTraceStore] = []
        self.managers: list[ScopeManager] = []
        self.seq = 10_000
        self.count = 0
        self.settled: set[str] = set()
        self.restored: set[str] = set()
        self.crashes = 0
        self.crashed_at = ""
        self.steps = 0
        for _ in range(2):
            self._open()
        self.watcher = SQLiteTraceStore(self.db)
        self.runner = ProjectionRunner(
            self.watcher,
            [
                RuntimeStateProjection(runtime_state_view_factory("kept_")),
                UiIndexProjection(SqlUiIndexView.bind),
            ],
            batch_size=3,
        )

    # ------------------------------------------------------------ plumbing

    def _open(self, index: int | None = None) -> None:
        store = SQLiteTraceStore(self.db)
        manager = scope_manager_for(store, resolver=self.host.resolve)
        if index is None:
            self.stores.append(store)
            self.managers.append(manager)
        else:
            self.stores[index].close()
            self.stores[index], self.managers[index] = store, manager

    def _next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def _crashing_at(self, index: int, crash: int | None) -> None:
        calls: list[str] = []

        def hook(boundary: str, intent: str) -> None:
            calls.append(boundary)
            if crash is not None and len(calls) - 1 == crash:
                raise Crash(f"{boundary} {intent}")

        self.managers[index].context.faults = hook

    def run(
        self,
        by: int,
        crash: int | None,
        command: Callable[[ScopeManager], Result[Any, Any]],
    ) -> Result[Any, Any]:
        """Run ``command`` on manager ``by``; after a crash, reopen and retry it."""
        self._crashing_at(by, crash)
        self.crashed_at = ""
        try:
            return command(self.managers[by])
        except Crash as crashed:
            note(f"crash: {crashed}")
            boundary, intent = str(crashed).split(" ", 1)
            event(f"crash {boundary} of {_verb_of(intent)}")
            self.crashes += 1
            self.crashed_at = boundary
            self._open(by)
            return command(self.managers[by])
        finally:
            self.managers[by].context.faults = None

    def agg(self, by: int, scope_id: str) -> ScopeAggregate:
        """The scope as manager ``by``'s fold has it (pruned ones too)."""
        model = self.managers[by].context.model
        model.refresh()
        return model.scope(scope_id.removeprefix("scope:"))

    def active(self, by: int, scope_id: str) -> bool:
        """Whether the scope exists and is active in manager ``by``'s fold."""
        scope = self.agg(by, scope_id)
        return scope.listed and scope.state is ScopeState.ACTIVE

    def claim_needs(self, by: int, scope_id: str) -> bool:
        """Whether an unfinished settle or restore claim needs the scope (ADR 0068).

        A crash after a claim leaves it open until the same seq finishes it;
        the scope it names (the child, the parent, the restored scope, the
        workspace owner) may not end meanwhile.
        """
        model = self.managers[by].context.model
        model.refresh()
        owner = scope_id.removeprefix("scope:")
        for out in model.outputs():
            if out.claimed_by and out.state is OutputState.UNCONSUMED:
                ws = model.workspace_owner(out.claim_parent)
                if owner in (out.scope_owner, out.claim_parent, ws):
                    return True
        for cp in model.checkpoints():
            if cp.claimed_by and cp.is_valid:
                ws = model.workspace_owner(cp.scope_owner)
                if owner in (cp.scope_owner, ws):
                    return True
        return False

    def discarded_by_its_parent(self, by: int, scope_id: str) -> bool:
        """Whether a ``scope.discarded`` record (a discard or a settle) ended it."""
        scope = self.agg(by, scope_id)
        if scope.state is not ScopeState.DISCARDED or scope.parent_owner is None:
            return False
        return any(
            e.record.record_id == scope.terminal_record
            and e.record.envelope.schema_ref == ScopeDiscarded.SCHEMA
            for e in self.stores[by].read_log(-1, 1_000_000)
        )

    def alive(self, by: int, scope_id: str) -> bool:
        """Whether the scope exists, is active and its workspace still stands.

        A shared child of a discarded isolated child stays active in the
        trace, but the sandbox it worked in is gone.
        """
        scope = self.agg(by, scope_id)
        if not scope.listed or scope.state is not ScopeState.ACTIVE:
            return False
        model = self.managers[by].context.model
        owner = model.workspace_owner(scope.owner)
        if model.scope(owner).state is not ScopeState.ACTIVE:
            return False  # the sandbox went with the isolated scope that ended
        sandbox = self.host.sandboxes.get(f"scope:{owner}")
        return sandbox is not None and sandbox._files is not None

    def workspace_of(self, scope_id: str) -> MemorySandbox:
        model = self.managers[0].context.model
        model.refresh()
        owner = model.workspace_owner(scope_id.removeprefix("scope:"))
        return self.host.sandboxes[f"scope:{owner}"]

    def snapshot_all(self) -> dict[str, dict[str, bytes]]:
        return {
            sid: files_of(sb)
            for sid, sb in self.host.sandboxes.items()
            if sb._files is not None  # a destroyed sandbox has no files
        }

    # ------------------------------------------------------------ rules

    @initialize(target=scopes)
    def root(self) -> str:
        main = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"0\n"}))
        main.create(SandboxSpec())
        self.host.sandboxes[f"scope:{ROOT}"] = main
        self.managers[0].create(ROOT, main).unwrap()
        return f"scope:{ROOT}"

    @rule(
        target=scopes,
        parent=scopes,
        isolated=st.booleans(),
        by=st.integers(0, 1),
        crash=BOUNDARIES,
    )
    def fork(self, parent: str, isolated: bool, by: int, crash: int | None) -> str:
        self.count += 1
        owner = (
            f"{parent.removeprefix('scope:')}:{'iso' if isolated else 'sh'}{self.count}"
        )
        child_id = f"scope:{owner}"
        seq = self._next_seq()
        alive = self.alive(by, parent)
        sandbox = None
        if isolated and alive:
            base = self.workspace_of(parent)
            sandbox = MemorySandbox(MemorySandboxConfig(repository=base.repository))
            sandbox.create(SandboxSpec())
            sandbox.apply(base.capture())
            self.host.sandboxes[child_id] = sandbox

        def command(mgr: ScopeManager) -> Result[Any, Any]:
            if sandbox is None:
                return mgr.fork(parent, owner, seq=seq)
            return mgr.fork_isolated(parent, owner, None, sandbox, seq=seq)

        result = self.run(by, crash, command)
        if alive:
            assert isinstance(result, Success), result
        else:
            assert isinstance(result, Failure)
        return child_id

    @rule(scope=scopes, name=FILES, data=st.binary(min_size=1, max_size=4))
    def write(self, scope: str, name: str, data: bytes) -> None:
        if not self.alive(0, scope):
            return
        self.workspace_of(scope).write_file(name, data)

    @rule(
        target=checkpoints,
        scope=scopes,
        snapshot=st.binary(max_size=8),
        by=st.integers(0, 1),
        crash=BOUNDARIES,
    )
    def checkpoint(self, scope: str, snapshot: bytes, by: int, crash: int | None):
        active = self.alive(by, scope)
        before = files_of(self.workspace_of(scope)) if active else {}
        seq = self._next_seq()
        result = self.run(
            by, crash, lambda m: m.create_checkpoint(scope, snapshot, seq=seq)
        )
        if not active:
            assert isinstance(result, Failure)
            return Checkpoint("cp:none", scope, {}, b"")
        assert isinstance(result, Success), result
        cp = result.unwrap()
        assert cp.snapshot == snapshot
        return Checkpoint(cp.id, scope, before, snapshot)

    @rule(cp=checkpoints, by=st.integers(0, 1), crash=BOUNDARIES)
    def restore(self, cp: Checkpoint, by: int, crash: int | None) -> None:
        if cp.id == "cp:none":
            return
        mgr = self.managers[by]
        view = mgr.checkpoint(cp.id)
        expect = (
            view is not None
            and view.state.value == "valid"
            and self.alive(by, cp.scope)
        )
        before = self.snapshot_all()
        seq = self._next_seq()
        result = self.run(by, crash, lambda m: m.restore_checkpoint(cp.id, seq=seq))
        if expect and isinstance(result, Failure):
            # ADR 0056: the restore committed and released its bytes before
            # the crash; the retry says so (identical bytes held elsewhere
            # would have been returned instead).
            assert isinstance(result.failure(), SnapshotReleasedError), result
            assert self.crashed_at == "after-release"
            assert cp.snapshot
            self.restored.add(cp.id)
            assert files_of(self.workspace_of(cp.scope)) == cp.files
        elif expect:
            assert result == Success(cp.snapshot), result
            self.restored.add(cp.id)
            assert files_of(self.workspace_of(cp.scope)) == cp.files
        else:
            assert isinstance(result, Failure), result
            assert self.snapshot_all() == before  # a refused restore touches nothing

    @rule(target=outputs, scope=scopes, by=st.integers(0, 1), crash=BOUNDARIES)
    def seal(self, scope: str, by: int, crash: int | None) -> Output:
        found = self.agg(by, scope)
        parent = found.parent_owner
        ok = self.alive(by, scope) and found.baseline is not None
        sealed = files_of(self.workspace_of(scope)) if ok else {}
        baseline: dict[str, bytes] = {}
        if ok:
            state = found.baseline
            assert state is not None
            probe = MemorySandbox(
                MemorySandboxConfig(repository=self.workspace_of(scope).repository)
            )
            probe.create(SandboxSpec())
            probe.apply(state)
            baseline = files_of(probe)
        seq = self._next_seq()
        result = self.run(by, crash, lambda m: m.seal(scope, seq=seq))
        if not ok:
            assert isinstance(result, Failure)
            return Output("out:none", scope, "", {}, {})
        assert isinstance(result, Success), result
        assert parent is not None
        return Output(result.unwrap().id, scope, f"scope:{parent}", baseline, sealed)

    @rule(
        out=outputs,
        action=st.sampled_from(["selected", "applied", "released", "discarded"]),
        by=st.integers(0, 1),
        crash=BOUNDARIES,
    )
    def settle(self, out: Output, action: str, by: int, crash: int | None) -> None:
        if out.id == "out:none":
            return
        mgr = self.managers[by]
        handle = mgr.output(out.id)
        assert handle is not None
        consumed = handle.state is not OutputState.UNCONSUMED
        child_alive = self.active(by, out.scope)
        parent_alive = self.active(by, out.parent)
        parent_files = (
            files_of(self.workspace_of(out.parent))
            if self.alive(by, out.parent)
            else {}
        )
        before = self.snapshot_all()
        seq = self._next_seq()
        result = self.run(by, crash, lambda m: m.settle(out.id, action, seq=seq))
        note(f"settle {out.id} {action}: {result}")
        effect = action in ("selected", "applied")
        if consumed or (action != "released" and not child_alive):
            assert isinstance(result, Failure), result
        if (effect or action == "discarded") and not parent_alive:
            assert isinstance(result, Failure), result  # never into a halted parent
        if action == "selected" and parent_files != out.baseline:
            assert isinstance(result, Failure), result  # strictly fast-forward
        if action == "released" and not consumed:
            assert isinstance(result, Success), result
        if isinstance(result, Failure):
            if crash is None:
                assert self.snapshot_all() == before  # a loser touches nothing
            return
        assert out.id not in self.settled, "settled twice"
        self.settled.add(out.id)
        if action == "selected":
            # fast-forward: the parent was exactly at the baseline, and now
            # holds exactly the sealed state
            assert parent_files == out.baseline
            assert files_of(self.workspace_of(out.parent)) == out.sealed
        elif action == "applied":
            now = files_of(self.workspace_of(out.parent))
            for name, data in out.sealed.items():
                if out.baseline.get(name) != data:
                    assert now.get(name) == data

    @rule(
        target=outputs,
        parent=scopes,
        name=FILES,
        action=st.sampled_from(["selected", "applied", "released", "discarded"]),
        by=st.integers(0, 1),
        crash=BOUNDARIES,
    )
    def attempt(
        self, parent: str, name: str, action: str, by: int, crash: int | None
    ) -> Output:
        """Fork an isolated child, change a file, seal and settle it (one step)."""
        if not self.alive(by, parent):
            return Output("out:none", parent, "", {}, {})
        child = self.fork(parent, True, by, None)
        self.write(child, name, b"attempt")
        out = self.seal(child, by, None)
        assert isinstance(out, Output)
        self.settle(out, action, by, crash)
        return out

    @rule(scope=scopes, name=FILES, by=st.integers(0, 1), crash=BOUNDARIES)
    def rewind(self, scope: str, name: str, by: int, crash: int | None) -> None:
        """Checkpoint, change a file, restore (the restore changes something)."""
        if not self.alive(by, scope):
            return
        cp = self.checkpoint(scope, b"chat", by, None)
        assert isinstance(cp, Checkpoint)
        self.write(scope, name, b"later")
        self.restore(cp, by, crash)

    @rule(scope=scopes, by=st.integers(0, 1))
    def halt(self, scope: str, by: int) -> None:
        found = self.agg(by, scope)
        claimed = found.is_active and self.claim_needs(by, scope)
        result = self.managers[by].halt(scope, seq=self._next_seq())
        if not found.listed or found.state is ScopeState.MERGED or claimed:
            assert isinstance(result, Failure)
        else:
            assert result == Success(None)
            assert self.agg(1 - by, scope).state is ScopeState.DISCARDED

    @rule(
        scope=scopes, verb=st.sampled_from(["merge", "discard"]), by=st.integers(0, 1)
    )
    def end_child(self, scope: str, verb: str, by: int) -> None:
        mgr = self.managers[by]
        found = self.agg(by, scope)
        parent = found.parent_owner
        # Ending a child does not touch its parent's workspace: a parent whose
        # own workspace ended (a shared scope of a discarded isolated one) may
        # still merge or discard its children (ADR 0065).
        ok = self.alive(by, scope) and parent is not None and self.active(by, parent)
        ok = ok and not self.claim_needs(by, scope)
        # Discarding a child its parent's discard ended is that discard again
        # (ADR 0075): it succeeds and records nothing new.
        ok = ok or (verb == "discard" and self.discarded_by_its_parent(by, scope))
        command = mgr.merge if verb == "merge" else mgr.discard
        result = command(scope, seq=self._next_seq())
        assert isinstance(result, Success) == ok, result

    @rule(scope=scopes, schema=SCHEMAS, by=st.integers(0, 1))
    def fact(self, scope: str, schema: str, by: int) -> None:
        before = self.agg(by, scope).state
        listed = self.agg(by, scope).listed
        result = self.managers[by].append_fact(
            scope, schema, "fact", {"child_owner": scope.removeprefix("scope:")}
        )
        if schema.startswith("app.") and listed:
            assert isinstance(result, Success)
        else:
            assert isinstance(result, Failure)
            if listed:
                assert isinstance(result.failure(), ReservedSchemaError)
        assert self.agg(1 - by, scope).state is before

    @rule(by=st.integers(0, 1))
    def reopen(self, by: int) -> None:
        self._open(by)

    @precondition(lambda self: self.count > 3)
    @rule(by=st.integers(0, 1))
    def prune(self, by: int) -> None:
        self.managers[by].prune_terminal()

    # ------------------------------------------------------------ invariants

    @invariant()
    def every_fold_and_the_kept_read_model_agree(self) -> None:
        # Three managers answer through the public API (a query per scope and
        # output each): every third step and the last one (teardown) catch a
        # fold that went its own way at a fraction of the cost; the kept read
        # model then catches up a few commands at once.
        self.steps += 1
        if self.steps % 3 == 0:
            self._every_fold_answers_alike()
            self._the_kept_read_model_equals_the_runtime_fold()

    def _every_fold_answers_alike(self) -> None:
        fresh_store = SQLiteTraceStore(self.db)
        try:
            fresh = scope_manager_for(fresh_store, resolver=self.host.resolve)
            answers = [self._answers(m) for m in (*self.managers, fresh)]
        finally:
            fresh_store.close()
        assert answers[0] == answers[1] == answers[2]

    def _answers(self, mgr: ScopeManager) -> object:
        scopes = []
        for scope in mgr.all_scopes():
            outs = [
                (
                    o.id,
                    o.state.value,
                    tuple(tuple(sorted(c.items())) for c in o.changes()),
                )
                for o in mgr.outputs_for_scope(scope.id)
            ]
            cps = [(c.id, c.state.value) for c in mgr.checkpoints_for_scope(scope.id)]
            parent = scope.parent
            scopes.append(
                (
                    scope.id,
                    scope.state.value,
                    None if parent is None else parent.id,
                    tuple(c.id for c in scope.children),
                    tuple(outs),
                    tuple(cps),
                )
            )
        return scopes

    @invariant()
    def consume_once_holds_in_the_trace(self) -> None:
        settled: dict[str, set[str]] = {}
        restored: dict[str, set[str]] = {}
        for entry in self.watcher.read_log(-1, 100_000):
            record = entry.record
            schema = record.envelope.schema_ref
            if schema == OutputSettled.SCHEMA:
                key = str(record.payload["output_id"])
                settled.setdefault(key, set()).add(record.record_id)
            elif schema == CheckpointRestored.SCHEMA:
                key = str(record.payload["checkpoint_id"])
                restored.setdefault(key, set()).add(record.record_id)
        assert all(len(ids) == 1 for ids in settled.values()), settled
        assert all(len(ids) == 1 for ids in restored.values()), restored
        assert set(settled) == self.settled
        assert set(restored) == self.restored

    def _the_kept_read_model_equals_the_runtime_fold(self) -> None:
        self.runner.catch_up()
        with self.runner.read(RuntimeStateProjection.name) as view:
            kept = {s.owner: s for s in view.scope_rows()}
            outputs = {o.output_id: o for o in view.output_rows()}
        model = self.managers[0].context.model
        model.refresh()
        assert kept == {s.owner: s for s in model.scopes()}
        assert outputs == {o.output_id: o for o in model.outputs()}

    def teardown(self) -> None:
        try:
            self._every_fold_answers_alike()
            self._the_kept_read_model_equals_the_runtime_fold()
            for make in (
                lambda: RuntimeStateProjection(runtime_state_view_factory("r_")),
                lambda: UiIndexProjection(SqlUiIndexView.bind),
            ):
                assert_replay_equivalent(
                    self.watcher, make, snapshot=_view_rows, stops=(2, 5)
                )
        finally:
            for store in (*self.stores, self.watcher):
                store.close()
            shutil.rmtree(self.tmp, ignore_errors=True)


_VERBS = (
    "fork",
    "checkpoint",
    "seal",
    "settle",
    "restore",
    "sandbox-destroyed",
    "invalidate",
)


def _verb_of(intent: str) -> str:
    parts = intent.split(":")
    verb = next((p for p in reversed(parts) if p in _VERBS), "?")
    return f"{verb} claim" if "claim" in parts else verb


def _view_rows(view: Any) -> object:
    if hasattr(view, "scope_rows"):
        return (view.scope_rows(), view.checkpoint_rows(), view.output_rows())
    rows = view.connection.exec_driver_sql(
        "SELECT position, owner, ordinal, record_id, schema_ref, mode, record_json"
        " FROM traceui_entries ORDER BY position"
    ).all()
    return [tuple(row) for row in rows]


# Each example runs about 30 commands with a full comparison after each: the
# profiles' example counts are for cheap properties, so this machine takes its own.
EXAMPLES = {"dev": 30, "ci": 60, "deep": 300, "mutate": 8}.get(
    os.environ.get("HYPOTHESIS_PROFILE", "dev"), 30
)
# The examples run as PARTS test items of EXAMPLES / PARTS each (the same
# machine, drawn independently). One item running all of them took about 2 s
# an example: 60 in CI, and on a loaded 2-core machine (the suite's other
# worker and other processes sharing the cores) the item outran
# pytest-timeout's 600 s per test. The timeout's SIGALRM then raised inside
# whatever ran, nearly always SQLAlchemy's connection code; Hypothesis took
# that for a failure, replayed the example, and the replay drew past the point
# where the interrupted run had stopped: FlakyStrategyDefinition, with the
# interrupted connection's error beside it. Parts keep every example and step,
# each well inside the timeout, and let both workers take some.
PARTS = 4
PART_SETTINGS = settings(
    max_examples=max(1, -(-EXAMPLES // PARTS)),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


class RuntimeMachinePart1(RuntimeMachine):
    """The machine, first quarter of the examples."""


class RuntimeMachinePart2(RuntimeMachine):
    """The machine, second quarter of the examples."""


class RuntimeMachinePart3(RuntimeMachine):
    """The machine, third quarter of the examples."""


class RuntimeMachinePart4(RuntimeMachine):
    """The machine, last quarter of the examples."""


MACHINE_PARTS = (
    RuntimeMachinePart1,
    RuntimeMachinePart2,
    RuntimeMachinePart3,
    RuntimeMachinePart4,
)
assert len(MACHINE_PARTS) == PARTS
for _part in MACHINE_PARTS:
    _part.TestCase.settings = PART_SETTINGS
TestRuntimeMachinePart1 = RuntimeMachinePart1.TestCase
TestRuntimeMachinePart2 = RuntimeMachinePart2.TestCase
TestRuntimeMachinePart3 = RuntimeMachinePart3.TestCase
TestRuntimeMachinePart4 = RuntimeMachinePart4.TestCase
