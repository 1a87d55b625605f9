"""A recorded task-runtime trace: write it once, replay it forever.

``python -m tests.application.tasks.golden`` runs a session of the task
runtime on a fresh SQLite file and writes ``golden/tasks_v1.json`` (it refuses
to overwrite it: committed fixtures never change, a new format gets a new
file). The session leaves runs in every state a trace can hold: finished
(succeeded, failed, a tree with spawned, abandoned, failing and adopted
children), ended by a rival process, ended but killed before its frontier,
and killed in the middle of its body.

The fixture holds every batch in commit order, exactly as appended (group
parents, kind labels, payloads, the record ids the store gave), and each
frontier as the cut that published it, plus what the kernel projections
answered for every execution when it was recorded.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from goatherd.application import Registry, TaskControl, start_task_sync
from goatherd.domain import (
    FRONTIER_SCHEMA_REF,
    MAX_OWNER_ORDINAL,
    TRUSTED_APPEND_CONTEXT,
    TRUSTED_READ_CONTEXT,
    AppendBatch,
    AppendContext,
    AppendGroup,
    AppendReceipt,
    CutSpec,
    LogEntry,
    OperationContext,
    RecordDraft,
    TraceStore,
    execution_id_for,
)
from goatherd.infrastructure.store import SQLiteTraceStore
from goatherd.projections import project_effective_history
from tests.application.tasks.scripts import Crashing, ProcessDied, execution_ids

FIXTURE = Path(__file__).resolve().parent / "golden" / "tasks_v1.json"
RUNS = (
    "run:leaf",
    "run:tree",
    "run:failed",
    "run:raced",
    "run:ended-no-cut",
    "run:mid-body",
)


def registry(
    calls: Counter[str], *, die_mid_body: bool = False, rival: bool = False
) -> Registry:
    """Return the bodies of the recorded session (``calls`` counts each).

    ``Race`` answers as the rival process when ``rival``, else as ours.
    """
    reg = Registry()

    def counted(ref: str, body: Any) -> None:
        def run(control: TaskControl) -> object:
            calls[ref] += 1
            return body(control)

        reg.register(ref, run)

    def tree(c: TaskControl) -> dict[str, object]:
        c.publish("start", {"n": 1})
        c.await_terminal(c.spawn("Leaf", {"n": 1}))
        c.abandon(c.spawn("Leaf", {"n": 2}))
        c.spawn("Broken")
        c.adopt(execution_id_for("run:leaf:create"), "frontier:run:leaf:terminal")
        c.publish("end", {})
        return {"children": 3}

    def broken(c: TaskControl) -> None:
        raise ValueError("broken leaf")

    def halfway(c: TaskControl) -> dict[str, object]:
        c.publish("half", {})
        if die_mid_body:
            raise ProcessDied("killed mid-body")
        return {"whole": True}

    counted("Leaf", lambda c: {"leaf": True})
    counted("Tree", tree)
    counted("Broken", broken)
    counted("Fails", lambda c: broken(c))
    counted("Race", lambda c: {"who": "rival" if rival else "us"})
    counted("Halfway", halfway)
    return reg


TASKS = {
    "run:leaf": "Leaf",
    "run:tree": "Tree",
    "run:failed": "Fails",
    "run:raced": "Race",
    "run:ended-no-cut": "Leaf",
    "run:mid-body": "Halfway",
}


def session(path: Path) -> None:
    """Run the recorded session on the store file ``path``."""
    calls: Counter[str] = Counter()
    with SQLiteTraceStore(path) as store:
        for run_id in ("run:leaf", "run:tree", "run:failed"):
            start_task_sync(store, registry(calls), TASKS[run_id], run_id).unwrap()
    _raced(path, calls)
    with Crashing(path, lambda _, n: n.startswith("cut frontier:run:ended")) as dying:
        _dies(dying, registry(calls), "run:ended-no-cut")
    with SQLiteTraceStore(path) as store:
        _dies(store, registry(calls, die_mid_body=True), "run:mid-body")


def _dies(store: TraceStore, reg: Registry, run_id: str) -> None:
    try:
        start_task_sync(store, reg, TASKS[run_id], run_id)
    except ProcessDied:
        return
    raise AssertionError(f"{run_id} should have died")


def _raced(path: Path, calls: Counter[str]) -> None:
    # The rival process ends the run between our decision and our append.
    class Racing(SQLiteTraceStore):
        def append(
            self,
            context: AppendContext | OperationContext,
            batch: AppendBatch,
            *,
            expected_heads: Mapping[str, int] | None = None,
        ) -> AppendReceipt:
            if batch.append_intent_id == "run:raced:complete":
                with SQLiteTraceStore(path) as rival:
                    theirs = registry(calls, rival=True)
                    start_task_sync(rival, theirs, "Race", "run:raced").unwrap()
            return super().append(context, batch, expected_heads=expected_heads)

    with Racing(path) as store:
        lost = start_task_sync(store, registry(calls), "Race", "run:raced")
        assert lost.failure().__class__.__name__ == "ExecutionTerminalError"


# ------------------------------------------------------------------ format


def dump(store: SQLiteTraceStore) -> list[dict[str, Any]]:
    """Return every batch of the trace in commit order (witnesses aside)."""
    return [_op(entries) for entries in _batches(store)]


def _batches(store: SQLiteTraceStore) -> Iterator[list[LogEntry]]:
    current: list[LogEntry] = []
    for entry in store.read_log(-1, 1_000_000):
        if current and entry.append_intent_id != current[0].append_intent_id:
            yield current
            current = []
        current.append(entry)
    if current:
        yield current


def _op(entries: list[LogEntry]) -> dict[str, Any]:
    first = entries[0].record
    if first.envelope.schema_ref == FRONTIER_SCHEMA_REF:
        payload = first.payload
        return {
            "cut": {
                "intent": entries[0].append_intent_id,
                "frontier_id": payload["frontier_id"],
                "target": payload["target_trace_owner_id"],
                "through": payload["through_fact_id"],
                "publisher": payload["publisher_trace_owner_id"],
                "caused_by": list(first.envelope.caused_by_record_ids[1:]),
                "record_id": first.record_id,
            }
        }
    groups: dict[str, dict[str, Any]] = {}
    for entry in entries:
        record, view = entry.record, entry.record.view
        assert view is not None
        group = groups.setdefault(
            view.trace_owner_id,
            {
                "owner": view.trace_owner_id,
                "parents": list(record.envelope.caused_by_record_ids),
                "records": [],
            },
        )
        assert group["parents"] == list(record.envelope.caused_by_record_ids)
        group["records"].append(
            {
                "record_id": record.record_id,
                "mode": record.envelope.mode,
                "schema": record.envelope.schema_ref,
                "kind": view.kind_label,
                "payload": record.payload,
            }
        )
    return {
        "append": {
            "intent": entries[0].append_intent_id,
            "groups": list(groups.values()),
        }
    }


def replay(store: TraceStore, ops: list[Mapping[str, Any]]) -> None:
    """Append the fixture's batches and cuts, checking every record id."""
    for op in ops:
        if "cut" in op:
            cut = op["cut"]
            made = store.publish_cut(
                TRUSTED_APPEND_CONTEXT,
                CutSpec(
                    frontier_id=cut["frontier_id"],
                    target_trace_owner_id=cut["target"],
                    through_fact_id=cut["through"],
                    publisher_trace_owner_id=cut["publisher"],
                    append_intent_id=cut["intent"],
                    caused_by=tuple(cut["caused_by"]),
                ),
            )
            assert made.created_by_fact_id == cut["record_id"]
            continue
        batch = op["append"]
        groups = tuple(
            AppendGroup(
                group["owner"],
                None,
                tuple(group["parents"]),
                tuple(
                    RecordDraft(r["mode"], r["schema"], r["payload"], r["kind"])
                    for r in group["records"]
                ),
            )
            for group in batch["groups"]
        )
        receipt = store.append(
            TRUSTED_APPEND_CONTEXT, AppendBatch(batch["intent"], groups)
        )
        recorded = [r["record_id"] for g in batch["groups"] for r in g["records"]]
        assert list(receipt.fact_ids) == recorded


def answers(store: TraceStore) -> dict[str, Any]:
    """Return what the kernel projections answer for every execution."""
    out: dict[str, Any] = {}
    for execution in execution_ids(store):  # type: ignore[arg-type]
        slice_ = store.read_owner_prefix(
            TRUSTED_READ_CONTEXT, execution, MAX_OWNER_ORDINAL
        )
        history = project_effective_history(slice_, execution)
        root = history.root
        out[execution] = {
            "task_ref": root.task_ref,
            "status": root.status.value,
            "outputs": dict(root.outputs),
            "error": root.error,
            "parent": root.parent_execution_id,
            "relations": [
                [r.relation_kind.value, r.relation_id] for r in history.relations
            ],
            "published": [f.kind for f in history.published_facts],
        }
    return out


def main() -> None:
    if FIXTURE.exists():
        sys.exit(f"{FIXTURE} exists; committed fixtures never change")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.sqlite"
        session(path)
        with SQLiteTraceStore(path) as store:
            fixture = {
                "description": __doc__.split("\n\n")[1].replace("\n", " "),
                "ops": dump(store),
                "expected": answers(store),
            }
    FIXTURE.parent.mkdir(exist_ok=True)
    FIXTURE.write_text(json.dumps(fixture, indent=1, sort_keys=True) + "\n")
    print(f"wrote {FIXTURE}")


if __name__ == "__main__":
    main()
