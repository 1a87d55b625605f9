"""Model vs the real runtime on a SQLite file, with crashes at every write boundary.

Each command may crash at its n-th write boundary (the manager's fault hook:
before/after every commit, after a checkpoint blob, after a workspace
effect). A crash drops the manager and the store like a dead process; the
test reopens the file, recovers (sandboxes come back through the resolver:
they stand for the disk), checks the recovered state against the model and
retries the command under the same ``seq``, which must finish it exactly once.
"""

from __future__ import annotations

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from returns.result import Failure, Success

from goatherd.application import RecoverOptions, ScopeManager, recover_scopes
from goatherd.application.ports import SandboxSpec
from goatherd.domain import (
    CheckpointAggregate,
    CheckpointState,
    OutputConsumedError,
    OutputState,
    RetainedOutputAggregate,
    ScopeAggregate,
    ScopeState,
    TraceAggregate,
)
from goatherd.infrastructure.eventstore import TraceEventStore
from goatherd.infrastructure.sandbox.memory import MemorySandbox, MemorySandboxConfig
from goatherd.infrastructure.store import SQLiteTraceStore

ROOT = "root"
CRASH = st.none() | st.integers(min_value=0, max_value=5)
# Settle and restore also aim at their effect boundary by name.
EFFECT_CRASH = CRASH | st.just("after-effect")


class Crash(BaseException):
    """Raised by the fault hook: the process dies here."""


class Faults:
    """Crash at the n-th write boundary, or at the first one with a given name."""

    def __init__(self, at: int | str | None) -> None:
        self.at = at
        self.seen = 0
        self.fired = False

    def __call__(self, boundary: str, intent: str) -> None:
        hit = self.seen == self.at if isinstance(self.at, int) else boundary == self.at
        if self.at is not None and not self.fired and hit:
            self.fired = True
            event(f"crash at {boundary}")
            raise Crash(f"{boundary} {intent}")
        self.seen += 1


class RuntimeMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        import tempfile
        from pathlib import Path

        self._dir = tempfile.TemporaryDirectory()
        self.path = Path(self._dir.name) / "trace.db"
        self.seq = 1000
        self.main = MemorySandbox(MemorySandboxConfig(files={"base.txt": b"0\n"}))
        self.main.create(SandboxSpec())
        self.sandboxes: dict[str, MemorySandbox] = {ROOT: self.main}
        # the model
        self.scopes: dict[str, ScopeState] = {ROOT: ScopeState.ACTIVE}
        self.files: dict[str, dict[str, bytes]] = {ROOT: {"base.txt": b"0\n"}}
        self.baselines: dict[str, dict[str, bytes]] = {}
        self.outputs: dict[str, tuple[str, dict[str, bytes], OutputState]] = {}
        self.checkpoints: dict[
            str, tuple[dict[str, bytes], bytes, CheckpointState]
        ] = {}
        self.crashes = 0
        self._open()

    def _open(self) -> None:
        self.store = SQLiteTraceStore(self.path)
        self.events = TraceEventStore(self.store)

    def teardown(self) -> None:
        self.store.close()
        self._dir.cleanup()

    def _next(self) -> int:
        self.seq += 1
        return self.seq

    # ------------------------------------------------------------ crash + retry

    def run(self, command, crash_at: int | str | None):
        """Run ``command(manager)``; on a crash restart, recover, check, retry."""
        faults = Faults(crash_at)
        self.mgr._faults = faults
        try:
            return command(self.mgr)
        except Crash:
            self.crashes += 1
            self._restart()
            return command(self.mgr)
        finally:
            self.mgr._faults = None

    def _restart(self) -> None:
        self.store.close()
        self._open()
        self.mgr = recover_scopes(
            self.events, RecoverOptions(resolver=self._resolve)
        ).unwrap()
        if self.mgr.get(f"scope:{ROOT}") is None:  # a root with no record yet
            self.mgr.create(ROOT, self.main).unwrap()
        # The command in flight may or may not have committed: the model is
        # compared after its retry (the invariants run on the recovered manager).

    def _resolve(self, scope_id: str, backend: str, path: str) -> MemorySandbox | None:
        return self.sandboxes.get(scope_id.removeprefix("scope:"))

    # ------------------------------------------------------------ rules

    @initialize()
    def start(self) -> None:
        self.mgr = ScopeManager(self.events)
        self.mgr.create(ROOT, self.main).unwrap()

    def _active_children(self) -> list[str]:
        return [
            o for o, s in self.scopes.items() if o != ROOT and s is ScopeState.ACTIVE
        ]

    @rule(crash=CRASH)
    def fork(self, crash: int | None) -> None:
        child = f"c{len(self.scopes)}"
        sandbox = MemorySandbox(MemorySandboxConfig(repository=self.main.repository))
        sandbox.create(SandboxSpec())
        sandbox.apply(self.main.capture())
        self.sandboxes[child] = sandbox
        seq = self._next()
        result = self.run(
            lambda m: m.fork_isolated(f"scope:{ROOT}", child, None, sandbox, seq=seq),
            crash,
        )
        assert isinstance(result, Success), result
        self.scopes[child] = ScopeState.ACTIVE
        self.files[child] = dict(self.files[ROOT])
        self.baselines[child] = dict(self.files[ROOT])

    @precondition(lambda self: self._active_children())
    @rule(data=st.data(), content=st.binary(min_size=1, max_size=4))
    def write(self, data: st.DataObject, content: bytes) -> None:
        child = data.draw(st.sampled_from(self._active_children()))
        self.sandboxes[child].write_file(f"{child}.txt", content)
        self.files[child][f"{child}.txt"] = content

    @precondition(lambda self: self._active_children())
    @rule(
        data=st.data(), verb=st.sampled_from(["merge", "discard", "halt"]), crash=CRASH
    )
    def end_child(self, data: st.DataObject, verb: str, crash: int | None) -> None:
        child = data.draw(st.sampled_from(self._active_children()))
        seq = self._next()
        if verb == "halt":
            result = self.run(lambda m: m.halt(f"scope:{child}", seq=seq), crash)
        else:
            command = getattr(self.mgr.__class__, verb)
            result = self.run(lambda m: command(m, f"scope:{child}", seq=seq), crash)
        assert isinstance(result, Success), result
        self.scopes[child] = (
            ScopeState.MERGED if verb == "merge" else ScopeState.DISCARDED
        )

    @rule(data=st.data(), crash=CRASH)
    def append_fact(self, data: st.DataObject, crash: int | None) -> None:
        owner = data.draw(st.sampled_from(sorted(self.scopes)))
        seq = self._next()
        result = self.run(
            lambda m: m.append_fact(
                f"scope:{owner}", "test.note.v1", "note", {"n": seq}, seq=seq
            ),
            crash,
        )
        assert isinstance(result, Success), result

    @precondition(lambda self: self._active_children())
    @rule(data=st.data(), crash=CRASH)
    def seal(self, data: st.DataObject, crash: int | None) -> None:
        child = data.draw(st.sampled_from(self._active_children()))
        seq = self._next()
        result = self.run(lambda m: m.seal(f"scope:{child}", seq=seq), crash)
        assert isinstance(result, Success), result
        out_id = result.unwrap().id
        self.outputs[out_id] = (child, dict(self.files[child]), OutputState.UNCONSUMED)

    @precondition(lambda self: self.outputs)
    @rule(
        data=st.data(),
        verb=st.sampled_from(["selected", "applied", "released", "discarded"]),
        crash=EFFECT_CRASH,
    )
    def settle(self, data: st.DataObject, verb: str, crash: int | str | None) -> None:
        out_id = data.draw(st.sampled_from(sorted(self.outputs)))
        child, sealed, state = self.outputs[out_id]
        seq = self._next()
        ok = self._settle_allowed(child, state, verb, sealed)
        before = self.store.fact_count()
        result = self.run(
            lambda m: m.settle(out_id, verb, seq=seq), crash if ok else None
        )
        if not ok:
            assert isinstance(result, Failure), (verb, result)
            if state is not OutputState.UNCONSUMED:
                assert isinstance(result.failure(), OutputConsumedError)
            assert self.store.fact_count() == before
            return
        assert isinstance(result, Success), (verb, result)
        self.outputs[out_id] = (child, sealed, OutputState(verb))
        if verb == "selected":
            self.files[ROOT] = dict(sealed)
        elif verb == "applied":
            base = self.baselines[child]
            self.files[ROOT].update(
                {p: v for p, v in sealed.items() if base.get(p) != v}
            )
        if verb != "released":
            self.scopes[child] = (
                ScopeState.MERGED if verb != "discarded" else ScopeState.DISCARDED
            )

    def _settle_allowed(
        self, child: str, state: OutputState, verb: str, sealed
    ) -> bool:
        if state is not OutputState.UNCONSUMED:
            return False
        if verb == "released":
            return True
        if self.scopes[child] is not ScopeState.ACTIVE:
            return False
        if verb == "selected":
            return self.files[ROOT] == self.baselines[child]
        return True

    @rule(snapshot=st.binary(max_size=3), crash=CRASH)
    def checkpoint(self, snapshot: bytes, crash: int | None) -> None:
        seq = self._next()
        result = self.run(
            lambda m: m.create_checkpoint(f"scope:{ROOT}", snapshot, seq=seq), crash
        )
        assert isinstance(result, Success), result
        self.checkpoints[result.unwrap().id] = (
            dict(self.files[ROOT]),
            snapshot,
            CheckpointState.VALID,
        )

    @precondition(lambda self: self.checkpoints)
    @rule(data=st.data(), crash=EFFECT_CRASH)
    def restore(self, data: st.DataObject, crash: int | str | None) -> None:
        cp_id = data.draw(st.sampled_from(sorted(self.checkpoints)))
        files, snapshot, state = self.checkpoints[cp_id]
        seq = self._next()
        ok = state is CheckpointState.VALID
        result = self.run(
            lambda m: m.restore_checkpoint(cp_id, seq=seq), crash if ok else None
        )
        if not ok:
            assert isinstance(result, Failure), result
            return
        assert result == Success(snapshot), result
        self.checkpoints[cp_id] = (files, snapshot, CheckpointState.USED)
        self.files[ROOT] = dict(files)

    # ------------------------------------------------------------ invariants

    def check_against_model(self) -> None:
        for owner, scope_state in self.scopes.items():
            scope = self.mgr.get(f"scope:{owner}")
            assert scope is not None, owner
            assert scope.state is scope_state, owner
        for out_id, (_, _, out_state) in self.outputs.items():
            output = self.mgr.output(out_id)
            assert output is not None, out_id
            assert output.state is out_state, out_id
        for cp_id, (_, _, cp_state) in self.checkpoints.items():
            checkpoint = self.mgr.checkpoint(cp_id)
            assert checkpoint is not None, cp_id
            assert checkpoint.state is cp_state, cp_id

    @invariant()
    def live_state_matches_the_model(self) -> None:
        if hasattr(self, "mgr"):
            self.check_against_model()

    @invariant()
    def every_effect_landed_exactly_once(self) -> None:
        live = {p: self.main.read_file(p) for p in self.main.list_files()}
        assert live == self.files[ROOT]

    @invariant()
    def ordinals_are_contiguous_and_a_rebuild_equals_the_live_folds(self) -> None:
        rebuild = TraceEventStore(self.store, cache_size=0, snapshot_every=0)
        owners: list[tuple[type[TraceAggregate], str]] = [
            (ScopeAggregate, o) for o in self.scopes
        ]
        owners += [(RetainedOutputAggregate, o) for o in self.outputs]
        owners += [(CheckpointAggregate, c) for c in self.checkpoints]
        for cls, owner in owners:
            ordinals = [e.record.owner_ordinal for e in self.store.read_path(owner)]
            assert ordinals == list(range(len(ordinals))), owner
            assert rebuild.load(cls, owner) == self.events.load(cls, owner), owner


RuntimeMachine.TestCase.settings = settings(
    settings.default, stateful_step_count=12, deadline=None
)
test_runtime_machine = RuntimeMachine.TestCase
