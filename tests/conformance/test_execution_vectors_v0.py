"""execution_vectors_v0.json through the real task runtime, byte for byte.

Procedure of the conformance README: the run, fail and history sequences are
driven through ``start_task_sync`` (not the batch builders) on a fresh store
with the trusted internal append context, and every id, path and cutoff must
equal the reference's. The relation sequence is the projections' (engineer E).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from goatherd.application.tasks import Registry, Run, TaskControl, start_task_sync
from goatherd.domain import (
    MAX_OWNER_ORDINAL,
    TRUSTED_READ_CONTEXT,
    Cut,
    execution_id_for,
    relation_id_for,
)
from goatherd.infrastructure.store import SQLiteTraceStore
from goatherd.projections import EffectiveHistory
from tests.conformance.vectors import load_vectors

VECTORS = load_vectors("execution_vectors_v0.json")


def owner_path(store: SQLiteTraceStore, owner: str) -> list[dict[str, str]]:
    slice_ = store.read_owner_prefix(TRUSTED_READ_CONTEXT, owner, MAX_OWNER_ORDINAL)
    return [
        {
            "fact_id": rid,
            "schema_ref": slice_.facts_by_id[rid].envelope.schema_ref,
            "mode": slice_.facts_by_id[rid].envelope.mode,
            "kind_label": slice_.facts_by_id[rid].fact_kind,
        }
        for rid in slice_.owner_paths.get(owner, ())
    ]


def cutoff_dict(cut: Cut) -> dict[str, object]:
    return {
        "frontier_id": cut.frontier_id,
        "target_trace_owner_id": cut.target_trace_owner_id,
        "through_fact_id": cut.through_fact_id,
        "through_owner_ordinal": cut.through_owner_ordinal,
        "publisher_trace_owner_id": cut.publisher_trace_owner_id,
        "created_by_fact_id": cut.created_by_fact_id,
    }


class TestDerivedIds:
    @pytest.mark.parametrize("vector", VECTORS["execution_ids"])
    def test_execution_ids_hash_the_raw_intent_and_local_ref(self, vector) -> None:
        assert (
            execution_id_for(vector["append_intent_id"], vector["local_ref"])
            == vector["execution_id"]
        )

    @pytest.mark.parametrize("vector", VECTORS["relation_ids"])
    def test_relation_ids_hash_the_raw_intent_and_local_ref(self, vector) -> None:
        assert (
            relation_id_for(vector["append_intent_id"], vector["local_ref"])
            == vector["relation_id"]
        )


def vector_task(control: TaskControl) -> dict[str, object]:
    published = VECTORS["published_fact"]["payload"]
    control.publish(published["kind"], published["data"])
    return {"answer": 42, "label": "ok"}


class TestRunSequence:
    def run(self, store: SQLiteTraceStore, registry: Registry | None = None) -> Run:
        seq = VECTORS["run_sequence"]
        if registry is None:
            registry = Registry()
            registry.register(seq["task_ref"], vector_task)
        result = start_task_sync(
            store, registry, seq["task_ref"], seq["run_id"], seq["inputs"]
        )
        return result.unwrap()

    def test_the_run_allocates_the_reference_path_and_cutoff(self) -> None:
        seq = VECTORS["run_sequence"]
        with SQLiteTraceStore() as store:
            run = self.run(store)
            assert run.execution_id == seq["execution_id"]
            assert run.frontier_id == seq["frontier_id"]
            assert owner_path(store, run.execution_id) == seq["owner_path"]
            assert cutoff_dict(run.cutoff()) == seq["cutoff"]
            execution = run.wait()
            assert execution.status == "succeeded"
            assert execution.task_ref == seq["task_ref"]
            assert execution.inputs == seq["inputs"]
            assert execution.outputs == {"answer": 42, "label": "ok"}
            assert execution.cutoff is not None
            assert cutoff_dict(execution.cutoff) == seq["cutoff"]

    def test_the_published_fact_has_the_reference_draft_shape(self) -> None:
        expected = VECTORS["published_fact"]
        with SQLiteTraceStore() as store:
            run = self.run(store)
            record = store.read_fact(
                TRUSTED_READ_CONTEXT, owner_path(store, run.execution_id)[2]["fact_id"]
            )
            assert record.envelope.schema_ref == expected["schema_ref"]
            assert record.envelope.mode == expected["mode"]
            assert record.fact_kind == expected["kind_label"]
            assert record.payload == expected["payload"]  # type: ignore[union-attr]

    def test_a_finished_run_id_returns_its_handle_without_running_again(self) -> None:
        calls: list[int] = []
        seq = VECTORS["run_sequence"]

        def counted(control: TaskControl) -> dict[str, object]:
            calls.append(1)
            return vector_task(control)

        registry = Registry()
        registry.register(seq["task_ref"], counted)
        with SQLiteTraceStore() as store:
            first = self.run(store, registry)
            count = store.fact_count()
            again = self.run(store, registry)
            assert again == first
            assert calls == [1]
            assert store.fact_count() == count

    def test_reopening_the_store_file_replays_nothing_and_projects_identically(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "trace.sqlite"
        with SQLiteTraceStore(path) as store:
            before = self.run(store).wait()
        with SQLiteTraceStore(path) as reopened:
            calls: list[int] = []
            registry = Registry()
            registry.register(
                VECTORS["run_sequence"]["task_ref"], lambda c: calls.append(1)
            )
            after = self.run(reopened, registry).wait()
            assert after == before
            assert calls == []


class TestFailSequence:
    def test_a_raising_body_is_recorded_as_the_reference_failed_execution(
        self,
    ) -> None:
        seq = VECTORS["fail_sequence"]

        def boom() -> None:
            raise ValueError("boom")

        registry = Registry()
        registry.register(seq["task_ref"], boom)
        with SQLiteTraceStore() as store:
            run = start_task_sync(
                store, registry, seq["task_ref"], seq["run_id"], seq["inputs"]
            ).unwrap()
            assert run.execution_id == seq["execution_id"]
            assert owner_path(store, run.execution_id) == seq["owner_path"]
            fact_ids = [e["fact_id"] for e in seq["owner_path"]]
            create, fail, _ = seq["steps"]
            assert fact_ids[:2] == create["fact_ids"]
            assert fact_ids[2:3] == fail["fact_ids"]
            assert cutoff_dict(run.cutoff()) == seq["cutoff"]
            execution = run.wait()
            assert execution.status == "failed"
            assert execution.error == fail["error"] == "ValueError: boom"


def tree_registry(store: SQLiteTraceStore) -> tuple[Registry, Run]:
    seq = VECTORS["history_sequence"]
    parent_ref, child_ref = seq["task_refs"]["parent"], seq["task_refs"]["child"]
    registry = Registry()
    registry.register(child_ref, lambda: {"leaf": True})
    external = start_task_sync(
        store, registry, child_ref, "vector:tree:external", {}
    ).unwrap()

    def parent(control: TaskControl) -> dict[str, object]:
        control.publish("phase", {"at": "start"})
        control.await_terminal(control.spawn(child_ref, {}))
        control.abandon(control.spawn(child_ref, {}))
        control.adopt(external.execution_id, external.frontier_id)
        control.publish("phase", {"at": "end"})
        return {"leaves": 2}

    registry.register(parent_ref, parent)
    return registry, external


def start_tree(store: SQLiteTraceStore, registry: Registry) -> Run:
    seq = VECTORS["history_sequence"]
    return start_task_sync(
        store, registry, seq["task_refs"]["parent"], seq["run_id"], {}
    ).unwrap()


def history_summary(history: EffectiveHistory) -> dict[str, Any]:
    return {
        "root_status": history.root.status.value,
        "root_task_ref": history.root.task_ref,
        "children": [
            {
                "execution_id": child.execution.execution_id,
                "frontier_id": child.relation.child_frontier_id,
                "kind": child.relation.relation_kind.value,
                "relation_id": child.relation.relation_id,
                "status": child.execution.status.value,
                "task_ref": child.execution.task_ref,
            }
            for child in history.children
        ],
        "published": [fact.kind for fact in history.published_facts],
    }


class TestHistorySequence:
    def test_the_tree_run_allocates_the_reference_parent_path(self) -> None:
        seq = VECTORS["history_sequence"]
        with SQLiteTraceStore() as store:
            registry, _ = tree_registry(store)
            run = start_tree(store, registry)
            assert run.execution_id == seq["execution_id"]
            assert run.frontier_id == seq["frontier_id"]
            assert owner_path(store, run.execution_id) == seq["parent_owner_path"]

    def test_the_effective_history_drops_the_abandoned_child(self) -> None:
        seq = VECTORS["history_sequence"]
        expected = {k: seq[k] for k in ("root_status", "root_task_ref", "children")}
        expected["published"] = seq["published"]
        with SQLiteTraceStore() as store:
            registry, _ = tree_registry(store)
            history = start_tree(store, registry).history()
            assert history_summary(history) == expected
            kinds = [r.relation_kind.value for r in history.relations]
            assert kinds == ["spawned", "spawned", "abandoned", "adopted"]

    def test_reopening_the_store_file_re_projects_the_tree_identically(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "tree.sqlite"
        with SQLiteTraceStore(path) as store:
            registry, _ = tree_registry(store)
            run = start_tree(store, registry)
            before = run.history()
            path_before = owner_path(store, run.execution_id)
        with SQLiteTraceStore(path) as reopened:
            calls: list[int] = []
            registry = Registry()
            registry.register(
                VECTORS["history_sequence"]["task_refs"]["parent"],
                lambda: calls.append(1),
            )
            again = start_tree(reopened, registry)
            assert calls == []
            assert again.history() == before
            assert owner_path(reopened, again.execution_id) == path_before
