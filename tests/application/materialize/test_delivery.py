"""Delivery of an interrupted materialization: at least, at most, exactly once.

On a SQLite file and on PostgreSQL. A run "killed" after its start is a
substrate raising a ``BaseException`` that is no ``Exception`` (nothing after
it runs, as after a SIGKILL); the real kills are in
``tests/faults/test_materialize_kills.py``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from returns.result import Failure, Success

from goatherd.application import (
    InDoubtResolution,
    MaterializationInDoubtError,
    MaterializationRefusedError,
    SubstrateError,
    delivery_of,
    materialize,
    resolve_in_doubt,
)
from goatherd.application.ports import SandboxSpec
from goatherd.domain import (
    TRUSTED_READ_CONTEXT,
    AppendIntentConflictError,
    MaterializationDelivery,
    MaterializationOutcome,
    MaterializationResult,
    Record,
    materialization_request_digest,
)
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.sandbox import MemorySandbox
from goatherd.infrastructure.store import (
    SqlAlchemyTraceStore,
    SQLiteTraceStore,
    open_trace_store,
)
from goatherd.infrastructure.substrates import SQLiteKVSubstrate, WorkspaceSubstrate
from tests.application.materialize.test_materialize import (
    MATERIALIZE,
    Scripted,
    declare,
    registry_of,
    request,
)
from tests.infrastructure.backends import DURABLE_BACKENDS, backend_url


class Killed(BaseException):
    """Stands for the process dying inside the substrate."""


class AtMostOnce(Scripted):
    """A scripted substrate delivered at most once, killed on its first call."""

    def __init__(self, *, kill_first: bool = True, error: bool = False) -> None:
        super().__init__("success", drafts=1)
        self.kill_first, self.error = kill_first, error

    def delivery_for(self, records: Sequence[Record]) -> MaterializationDelivery:
        return MaterializationDelivery.AT_MOST_ONCE

    def materialize(self, records: Sequence[Record]) -> MaterializationResult:
        result = super().materialize(records)
        if self.kill_first and self.calls == 1:
            raise Killed
        if self.error:
            raise SubstrateError("refused before touching anything")
        return result


@pytest.fixture(params=DURABLE_BACKENDS)
def store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[SqlAlchemyTraceStore]:
    """A SQLite file, and a fresh PostgreSQL database when a server is named."""
    for url in backend_url(request.param, tmp_path):  # yields one url
        with open_trace_store(url) as opened:
            yield opened


def killed_once(store: SqlAlchemyTraceStore, substrate: AtMostOnce) -> tuple[str, ...]:
    ids = declare(store, "d", [{"a": 1}])
    with pytest.raises(Killed):
        materialize(store, MATERIALIZE, request(ids), registry_of(substrate))
    return ids


class TestAtMostOnce:
    def test_a_run_killed_after_its_start_is_in_doubt_and_never_redispatched(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        substrate = AtMostOnce()
        ids = killed_once(store, substrate)
        for _ in range(3):
            again = materialize(
                store, MATERIALIZE, request(ids), registry_of(substrate)
            )
            assert isinstance(again, Failure)
            error = again.failure()
            assert isinstance(error, MaterializationInDoubtError)
            assert error.intent == "apply:1"
            assert "is in doubt" in str(error)
        assert substrate.calls == 1
        assert verify_trace(store).ok

    def test_abandon_completes_the_intent_without_running_it(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        substrate = AtMostOnce()
        ids = killed_once(store, substrate)
        resolved = resolve_in_doubt(
            store, MATERIALIZE, request(ids), InDoubtResolution.ABANDON
        ).unwrap()
        assert resolved is not None
        assert resolved.outcome is MaterializationOutcome.SPLIT_STATE
        assert resolved.substrate_ref == "echo.v1"
        assert resolved.failure_reason.endswith("abandoned by agent:host")
        again = materialize(store, MATERIALIZE, request(ids), registry_of(substrate))
        assert again.unwrap() == resolved
        assert substrate.calls == 1
        assert verify_trace(store).ok

    def test_retry_withdraws_the_marker_and_the_next_run_dispatches(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        substrate = AtMostOnce()
        ids = killed_once(store, substrate)
        retried = resolve_in_doubt(store, MATERIALIZE, request(ids), "retry")
        assert retried == Success(None)
        assert store.read_completed_materialization("apply:1") is None
        receipt = materialize(
            store, MATERIALIZE, request(ids), registry_of(substrate)
        ).unwrap()
        assert receipt.outcome is MaterializationOutcome.SUCCESS
        assert len(receipt.produced_record_ids) == 1
        assert substrate.calls == 2
        assert verify_trace(store).ok

    def test_a_run_killed_after_its_captures_can_only_be_abandoned(
        self, store: SqlAlchemyTraceStore, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        substrate = AtMostOnce(kill_first=False)
        ids = declare(store, "d", [{"a": 1}])

        def die(*args: object) -> bool:
            raise Killed  # between the captures' append and the ledger swap

        monkeypatch.setattr(store, "replace_materialization", die)
        with pytest.raises(Killed):
            materialize(store, MATERIALIZE, request(ids), registry_of(substrate))
        monkeypatch.undo()
        appended = store.read_append_intent("apply:1")
        assert appended is not None
        retried = resolve_in_doubt(store, MATERIALIZE, request(ids), "retry")
        assert isinstance(retried, Failure)
        assert "its captures were recorded, so its effect ran" in str(retried.failure())
        abandoned = resolve_in_doubt(
            store, MATERIALIZE, request(ids), "abandon"
        ).unwrap()
        assert abandoned is not None
        assert abandoned.produced_record_ids == appended.fact_ids
        assert "(its captures were recorded)" in abandoned.failure_reason
        assert substrate.calls == 1
        assert verify_trace(store).ok

    def test_a_completed_run_replaces_its_marker(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        substrate = AtMostOnce(kill_first=False)
        ids = declare(store, "d", [{"a": 1}])
        first = materialize(store, MATERIALIZE, request(ids), registry_of(substrate))
        again = materialize(store, MATERIALIZE, request(ids), registry_of(substrate))
        assert again.unwrap() == first.unwrap()
        assert substrate.calls == 1
        row = store.read_completed_materialization("apply:1")
        assert row is not None
        assert row[1] == first.unwrap().to_json()
        assert verify_trace(store).ok

    def test_a_substrate_that_raises_withdraws_the_marker(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        substrate = AtMostOnce(kill_first=False, error=True)
        ids = declare(store, "d", [{"a": 1}])
        refused = materialize(store, MATERIALIZE, request(ids), registry_of(substrate))
        assert isinstance(refused, Failure)
        assert isinstance(refused.failure(), SubstrateError)
        assert store.read_completed_materialization("apply:1") is None
        substrate.error = False
        assert materialize(store, MATERIALIZE, request(ids), registry_of(substrate))
        assert substrate.calls == 2

    def test_a_second_run_while_the_first_is_running_is_in_doubt(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        inner: list[object] = []
        ids = declare(store, "d", [{"a": 1}])

        class Reentrant(AtMostOnce):
            def materialize(self, records: Sequence[Record]) -> MaterializationResult:
                inner.append(
                    materialize(store, MATERIALIZE, request(ids), registry_of(self))
                )
                return super().materialize(records)

        substrate = Reentrant(kill_first=False)
        outer = materialize(store, MATERIALIZE, request(ids), registry_of(substrate))
        assert outer.unwrap().outcome is MaterializationOutcome.SUCCESS
        (concurrent,) = inner
        assert isinstance(concurrent, Failure)
        assert isinstance(concurrent.failure(), MaterializationInDoubtError)
        assert substrate.calls == 1

    def test_resolving_what_is_not_in_doubt_is_refused(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        substrate = AtMostOnce(kill_first=False)
        ids = declare(store, "d", [{"a": 1}])
        never = resolve_in_doubt(store, MATERIALIZE, request(ids), "abandon")
        assert isinstance(never, Failure)
        assert str(never.failure()) == "materialize intent 'apply:1' is not in doubt"
        materialize(store, MATERIALIZE, request(ids), registry_of(substrate)).unwrap()
        done = resolve_in_doubt(store, MATERIALIZE, request(ids), "retry")
        assert isinstance(done, Failure)
        assert isinstance(done.failure(), MaterializationRefusedError)
        unknown = resolve_in_doubt(store, MATERIALIZE, request(ids), "forget")
        assert isinstance(unknown, Failure)
        assert "unknown in-doubt resolution 'forget'" in str(unknown.failure())

    def test_another_request_under_an_in_doubt_intent_conflicts(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        substrate = AtMostOnce()
        ids = killed_once(store, substrate)
        other = request(ids, capture_trace_owner_id="agent:other")
        for outcome in (
            materialize(store, MATERIALIZE, other, registry_of(substrate)),
            resolve_in_doubt(store, MATERIALIZE, other, "retry"),
        ):
            assert isinstance(outcome, Failure)
            assert isinstance(outcome.failure(), AppendIntentConflictError)
        assert substrate.calls == 1


class TestExactlyOnce:
    def test_the_substrate_receives_the_request_digest_as_its_key(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        keys: list[str] = []

        class Keyed(Scripted):
            def delivery_for(self, records: Sequence[Record]) -> str:
                return "exactly_once"

            def materialize_once(
                self, records: Sequence[Record], idempotency_key: str
            ) -> MaterializationResult:
                keys.append(idempotency_key)
                return self.materialize(records)

        ids = declare(store, "d", [{"a": 1}])
        materialize(
            store, MATERIALIZE, request(ids), registry_of(Keyed("success", drafts=1))
        ).unwrap()
        assert keys == [materialization_request_digest(request(ids), MATERIALIZE)]

    def test_kv_applies_a_key_once_even_if_the_world_changed_since(
        self, tmp_path: Path
    ) -> None:
        with SQLiteTraceStore() as store, SQLiteKVSubstrate(tmp_path / "kv") as kv:
            ids = declare(
                store,
                "d",
                [{"key": "k", "value": 1}],
                substrate_ref="kv.sqlite.local.v1",
                schema_ref="shepherd2.kv.put.v1",
            )
            targets = tuple(store.read_fact(TRUSTED_READ_CONTEXT, i) for i in ids)
            records = [t for t in targets if isinstance(t, Record)]
            first = kv.materialize_once(records, "key:1")
            assert kv.applied("key:1")
            with sqlite3.connect(tmp_path / "kv") as other:  # another writer
                other.execute("UPDATE kv SET value_json = '2'")
            other.close()
            again = kv.materialize_once(records, "key:1")
            assert again == first
            assert kv.get("k") == 2  # not written again
            assert kv.materialize_once(records, "key:2") == first
            assert kv.get("k") == 1
            with pytest.raises(SubstrateError, match="idempotency key is empty"):
                kv.materialize_once(records, "")
            assert delivery_of(kv, records) is MaterializationDelivery.EXACTLY_ONCE


class TestDeclaredDelivery:
    def test_a_plain_substrate_is_at_least_once(self) -> None:
        assert (
            delivery_of(Scripted("success"), ())
            is MaterializationDelivery.AT_LEAST_ONCE
        )

    def test_exactly_once_without_materialize_once_is_refused(self) -> None:
        class Claims(Scripted):
            def delivery_for(self, records: Sequence[Record]) -> str:
                return self.outcome

        with pytest.raises(SubstrateError, match="has no materialize_once"):
            delivery_of(Claims("exactly_once"), ())
        with pytest.raises(SubstrateError, match="unknown delivery: 'twice'"):
            delivery_of(Claims("twice"), ())

    def test_the_workspace_exec_mode_is_given_at_construction(self) -> None:
        sandbox = MemorySandbox()
        sandbox.create(SandboxSpec())
        assert (
            WorkspaceSubstrate(sandbox).exec_delivery
            is MaterializationDelivery.AT_LEAST_ONCE
        )
        once = WorkspaceSubstrate(sandbox, exec_delivery="at_most_once")
        assert once.exec_delivery is MaterializationDelivery.AT_MOST_ONCE
        with pytest.raises(SubstrateError, match="cannot be made exactly once"):
            WorkspaceSubstrate(sandbox, exec_delivery="exactly_once")
        with pytest.raises(SubstrateError, match="exec_delivery must be"):
            WorkspaceSubstrate(sandbox, exec_delivery="never")

    def test_only_a_batch_with_an_exec_gets_the_exec_delivery(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        sandbox = MemorySandbox()
        sandbox.create(SandboxSpec())
        once = WorkspaceSubstrate(sandbox, exec_delivery="at_most_once")
        writes = declare(
            store,
            "w",
            [{"path": "a.txt", "content_b64": ""}],
            substrate_ref="workspace.sandbox.v1",
            schema_ref="workspace.file.write.v1",
        )
        execs = declare(
            store,
            "x",
            [{"command": "true"}],
            substrate_ref="workspace.sandbox.v1",
            schema_ref="workspace.exec.v1",
        )
        records = [store.read_fact(TRUSTED_READ_CONTEXT, i) for i in writes + execs]
        batch = [r for r in records if isinstance(r, Record)]
        assert delivery_of(once, batch[:1]) is MaterializationDelivery.AT_LEAST_ONCE
        assert delivery_of(once, batch) is MaterializationDelivery.AT_MOST_ONCE
