"""A stateful proof of the task runtime on one trace file, with deaths and retries.

Rules start scripted runs (publish, spawn, abandon, failing children, adopt a
finished run, end or fail), each in a fresh store object (a new process) that
may die right before or after any of its writes; retry unfinished runs (which
may die again); and restart finished ones. A long-lived second store keeps an
:class:`~goatherd.application.ExecutionPath` per execution, caught up
incrementally. After every step, for every execution in the trace:

- the aggregate an ``ExecutionPath`` keeps, a fresh fold of the path, one kept
  entry by entry from the global log, and the kernel projections
  (``project_execution``, relations, published facts) agree;
- the path holds at most one terminal record and nothing but frontier records
  after it, and never contradicts itself;
- a finished run published exactly its script's facts, once, and ended as its
  script says; restarting it runs nothing and appends nothing.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from hypothesis import event, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)

from goatherd.application import ExecutionPath, start_task_sync
from goatherd.domain import (
    MAX_OWNER_ORDINAL,
    TRUSTED_READ_CONTEXT,
    ExecutionAggregate,
    ExecutionCompleted,
    ExecutionFailed,
    ExecutionStatus,
    OpaqueRecord,
    decode_fact,
    execution_id_for,
)
from goatherd.infrastructure.store import SQLiteTraceStore
from goatherd.projections import (
    project_effective_history,
    project_execution,
    project_execution_relations,
)
from tests.application.tasks.scripts import (
    OPS,
    Crashing,
    DeathPoint,
    ProcessDied,
    Script,
    Side,
    execution_ids,
    path_events,
    registry_for,
)

# Where a run dies: aimed at each kind of write of the run (its opening, a
# fact, a relation, any write of a child, its end, its frontier) or at a
# write index, on either side of the write; or not at all.
WHERE = ("create", "publish", "relation", "child", "end", "cut")
DEATHS = st.none() | st.tuples(
    st.sampled_from(WHERE) | st.integers(0, 16), st.sampled_from(["before", "after"])
)


def death_point(run_id: str, where: str | int) -> int | DeathPoint:
    if isinstance(where, int):
        return where
    names: dict[str, DeathPoint] = {
        "create": lambda _, n: n == f"{run_id}:create",
        "publish": lambda _, n: n.startswith(f"{run_id}:publish:"),
        "relation": lambda _, n: (
            n.startswith(f"{run_id}:relation:") or n.endswith(":relation:spawned")
        ),
        "child": lambda _, n: (
            n.startswith(f"{run_id}:child:") and ":relation:" not in n
        ),
        "end": lambda _, n: n in (f"{run_id}:complete", f"{run_id}:fail"),
        "cut": lambda _, n: n == f"cut frontier:{run_id}:terminal",
    }
    return names[where]


@dataclass
class Started:
    run_id: str
    task_ref: str
    script: Script
    finished: bool = False


class TaskRuntimeMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="goatherd-tasks-"))
        self.db = self.dir / "t.sqlite"
        self.reader = SQLiteTraceStore(self.db)
        self.kept: dict[str, ExecutionPath] = {}
        self.scripts: dict[str, Script] = {}
        self.calls: Counter[str] = Counter()
        self.runs: dict[str, Started] = {}
        # Aggregates kept from the global log, entry by entry (a read model).
        self.from_log: dict[str, ExecutionAggregate] = {}
        self.position = -1

    def teardown(self) -> None:
        self.reader.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # ------------------------------------------------------------- rules

    def _finished_root(self) -> tuple[str, str] | None:
        done = [r for r in self.runs.values() if r.finished]
        if not done:
            return None
        run_id = done[0].run_id
        return execution_id_for(f"{run_id}:create"), f"frontier:{run_id}:terminal"

    @rule(
        ops=st.lists(st.sampled_from(OPS), max_size=5).map(tuple),
        fails=st.booleans(),
        death=DEATHS,
    )
    def start_run(self, ops, fails, death) -> None:
        number = len(self.runs)
        script = Script(ops, fails, self._finished_root())
        started = Started(f"run:{number}", f"Script{number}", script)
        self.scripts[started.task_ref] = script
        self.runs[started.run_id] = started
        self._attempt(started, death)

    @precondition(lambda self: any(not r.finished for r in self.runs.values()))
    @rule(data=st.data(), death=DEATHS)
    def retry(self, data, death) -> None:
        waiting = sorted(r for r, s in self.runs.items() if not s.finished)
        self._attempt(self.runs[data.draw(st.sampled_from(waiting))], death)

    @precondition(lambda self: any(r.finished for r in self.runs.values()))
    @rule(data=st.data())
    def restart_finished(self, data) -> None:
        done = sorted(r for r, s in self.runs.items() if s.finished)
        started = self.runs[data.draw(st.sampled_from(done))]
        before, calls = self.reader.max_position(), Counter(self.calls)
        registry = registry_for(self.scripts, self.calls)
        with SQLiteTraceStore(self.db) as store:
            run = start_task_sync(store, registry, started.task_ref, started.run_id)
            history = run.unwrap().history()
        again = start_task_sync(
            self.reader, registry, started.task_ref, started.run_id
        ).unwrap()
        assert self.reader.max_position() == before
        assert self.calls == calls
        assert again.history() == history

    def _attempt(self, started: Started, death: tuple[str | int, Side] | None) -> None:
        note(f"{started.run_id} {started.script} dies at {death}")
        registry = registry_for(self.scripts, self.calls)
        at = None if death is None else death_point(started.run_id, death[0])
        side: Side = "before" if death is None else death[1]
        with Crashing(self.db, at, side) as store:
            try:
                result = start_task_sync(
                    store, registry, started.task_ref, started.run_id
                )
            except ProcessDied:
                assert death is not None
                event(f"died {death[1]} {death[0]}")
                return
            run = result.unwrap()
            assert run.done()
            started.finished = True

    # -------------------------------------------------------- invariants

    def _catch_up_from_log(self) -> None:
        while entries := self.reader.read_log(self.position, 500):
            for entry in entries:
                owner = entry.record.view
                if owner is not None and owner.trace_owner_id.startswith("exec:"):
                    key = owner.trace_owner_id
                    fact = decode_fact(entry.record, entry.position)
                    before = self.from_log.get(key, ExecutionAggregate(key))
                    self.from_log[key] = before.with_fact(fact)
                self.position = entry.position

    @invariant()
    def every_execution_folds_the_same_four_ways_and_ends_once(self) -> None:
        self._catch_up_from_log()
        executions = execution_ids(self.reader)
        assert sorted(executions) == sorted(self.from_log)
        for execution in executions:
            kept = self.kept.setdefault(
                execution, ExecutionPath(self.reader, execution)
            )
            state = kept.state()
            assert state == ExecutionPath(self.reader, execution).state()
            assert state == self.from_log[execution]
            assert not state.inconsistent
            slice_ = self.reader.read_owner_prefix(
                TRUSTED_READ_CONTEXT, execution, MAX_OWNER_ORDINAL
            )
            kernel = project_execution(slice_, execution)
            assert (state.status, state.terminal_record, state.error) == (
                kernel.status,
                kernel.terminal_fact_id,
                kernel.error,
            )
            assert state.relations == project_execution_relations(slice_, execution)
            facts = project_effective_history(slice_, execution).published_facts
            assert state.published_count == len(facts)
            self._ends_once(execution)

    def _ends_once(self, execution: str) -> None:
        events = path_events(self.reader, execution)
        ends = [
            n
            for n, e in enumerate(events)
            if isinstance(e, ExecutionCompleted | ExecutionFailed)
        ]
        assert len(ends) <= 1
        if ends:
            assert all(isinstance(e, OpaqueRecord) for e in events[ends[0] + 1 :])

    @invariant()
    def a_finished_run_published_its_script_once_and_ended_as_scripted(self) -> None:
        for started in self.runs.values():
            if not started.finished:
                continue
            execution = execution_id_for(f"{started.run_id}:create")
            slice_ = self.reader.read_owner_prefix(
                TRUSTED_READ_CONTEXT, execution, MAX_OWNER_ORDINAL
            )
            history = project_effective_history(slice_, execution)
            assert [f.kind for f in history.published_facts] == (
                started.script.publishes
            )
            wanted = (
                ExecutionStatus.FAILED
                if started.script.fails
                else ExecutionStatus.SUCCEEDED
            )
            assert history.root.status is wanted


TaskRuntimeMachine.TestCase.settings = settings(
    max_examples=40, stateful_step_count=10, deadline=None
)
TestTaskRuntime = TaskRuntimeMachine.TestCase
