"""The supervisor engine on the real bus, store and scope manager."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping

import pytest

from goatherd.application.manager import ScopeManager
from goatherd.application.supervisor import (
    INTERVENTION_SCHEMA_REF,
    InterventionQueue,
    ReviewEvent,
    Supervisor,
)
from goatherd.domain import (
    MAX_OWNER_ORDINAL,
    TRUSTED_APPEND_CONTEXT,
    TRUSTED_READ_CONTEXT,
    AppendBatch,
    AppendGroup,
    Intervention,
    InterventionType,
    MergeProposal,
    Record,
    RecordDraft,
    ScopeNotFoundError,
    SupervisedEvent,
    SupervisionRule,
    destructive_tool_guard,
    destructive_tool_rule,
    high_error_rate_rule,
    stuck_detection_rule,
)
from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.bus.effect_bus import EffectBus
from goatherd.infrastructure.store import SQLiteTraceStore

OWNER = "agent:main"


@pytest.fixture
def bus() -> Iterator[EffectBus]:
    with EffectBus() as effect_bus:
        yield effect_bus


@pytest.fixture
def store(bus: EffectBus) -> Iterator[SQLiteTraceStore]:
    with SQLiteTraceStore() as trace:
        yield trace.with_bus(bus)


@pytest.fixture
def manager(store: SQLiteTraceStore) -> ScopeManager:
    manager = scope_manager_for(store)
    manager.create(OWNER).unwrap()
    return manager


@pytest.fixture
def supervisor(manager, bus, store) -> Iterator[Supervisor]:
    sup = Supervisor(manager, bus, recorder=store)
    yield sup
    sup.close()


_counter = iter(range(1_000_000))


def tool_call(
    store: SQLiteTraceStore,
    payload: Mapping[str, object],
    *,
    label: str = "bash",
    schema: str = "yaah.tool.bash.v1",
    mode: str = "declaration",
) -> str:
    draft = RecordDraft(mode, schema, dict(payload), label)
    intent = f"{OWNER}:tool:{next(_counter)}"
    batch = AppendBatch(intent, (AppendGroup(OWNER, None, (), (draft,)),))
    return store.append(TRUSTED_APPEND_CONTEXT, batch).fact_ids[0]


def path_records(store: SQLiteTraceStore, schema: str) -> list[Record]:
    slice_ = store.read_owner_prefix(TRUSTED_READ_CONTEXT, OWNER, MAX_OWNER_ORDINAL)
    records = [slice_.facts_by_id[rid] for rid in slice_.owner_paths.get(OWNER, ())]
    return [
        r for r in records if isinstance(r, Record) and r.envelope.schema_ref == schema
    ]


def counting_rule(calls: list[str], verdict: Intervention | None = None):
    def action(event: SupervisedEvent) -> Intervention | None:
        calls.append(event.kind_label)
        return verdict

    return SupervisionRule("counting", lambda event: True, action)


class TestWatching:
    def test_a_destructive_call_on_the_bus_yields_a_recorded_inject(
        self, supervisor: Supervisor, store: SQLiteTraceStore
    ) -> None:
        for rule in (
            destructive_tool_rule(),
            destructive_tool_guard(),
            high_error_rate_rule(0.5, 10),
            stuck_detection_rule(3),
        ):
            supervisor.add_rule(rule)
        supervisor.start("orchestrator")
        trigger = tool_call(store, {"cmd": "rm -rf build"})
        intervention = supervisor.interventions().get(timeout=10)
        assert intervention is not None
        assert intervention.type is InterventionType.INJECT
        assert intervention.scope_id == f"scope:{OWNER}"
        assert intervention.payload == (
            "WARNING: destructive operation detected (bash). Proceed with caution."
        )
        assert intervention.time is not None
        supervisor.close()  # joins the loop, so the record is committed
        (record,) = path_records(store, INTERVENTION_SCHEMA_REF)
        assert record.envelope.mode == "capture"
        assert record.envelope.caused_by_record_ids == (trigger,)
        assert record.payload["rule"] == "destructive_file_guard"
        assert record.payload["type"] == "inject"
        assert record.payload["source"] == "watch"
        assert record.payload["trigger_record_id"] == trigger

    def test_every_rule_sees_every_event_even_after_an_earlier_verdict(
        self, supervisor: Supervisor, store: SQLiteTraceStore
    ) -> None:
        calls: list[str] = []
        supervisor.add_rule(destructive_tool_rule())
        supervisor.add_rule(counting_rule(calls))
        supervisor.start("orchestrator")
        for _ in range(3):
            tool_call(store, {"cmd": "rm x"})
        for _ in range(3):
            assert supervisor.interventions().get(timeout=10) is not None
        supervisor.close()
        # The counting rule saw every call although an earlier rule had already
        # decided each one (it also saw the recorded interventions themselves).
        assert calls.count("bash") == 3
        assert len(path_records(store, INTERVENTION_SCHEMA_REF)) == 3

    def test_a_slow_supervisor_never_blocks_the_agent(
        self, supervisor: Supervisor, store: SQLiteTraceStore
    ) -> None:
        release = threading.Event()
        seen: list[str] = []

        def stall(event: SupervisedEvent) -> None:
            seen.append(event.kind_label)
            release.wait(30)

        supervisor.add_rule(SupervisionRule("stall", lambda e: True, stall))
        supervisor.start("orchestrator")
        # The supervisor is stuck in its first event; the agent keeps going.
        for n in range(300):
            tool_call(store, {"cmd": f"echo {n}"}, label="note", schema="note.v1")
        assert len(path_records(store, "note.v1")) == 300
        release.set()
        supervisor.close()
        # Drop-oldest: it saw the first event and at most one buffer's worth.
        assert 1 <= len(seen) <= 1 + 64

    def test_closing_ends_the_interventions_and_is_idempotent(
        self, supervisor: Supervisor
    ) -> None:
        supervisor.start("orchestrator")
        supervisor.close()
        supervisor.close()
        assert list(supervisor.interventions()) == []
        supervisor.start("again")  # a closed supervisor does not restart
        assert supervisor.interventions().closed

    def test_without_a_bus_start_is_a_no_op(self, manager: ScopeManager) -> None:
        sup = Supervisor(manager, None)
        sup.start("x")
        sup.close()


class TestCheckCall:
    def event(self, cmd: str) -> ReviewEvent:
        return ReviewEvent(
            trace_owner_id=OWNER,
            payload={"cmd": cmd},
            schema_ref="yaah.tool.bash.v1",
            kind_label="bash",
        )

    def test_the_first_verdict_wins_and_later_rules_are_not_consulted(
        self, supervisor: Supervisor, store: SQLiteTraceStore
    ) -> None:
        calls: list[str] = []
        supervisor.add_rule(destructive_tool_guard())
        supervisor.add_rule(counting_rule(calls))
        verdict = supervisor.check_call(self.event("ls"))
        assert verdict is not None
        assert verdict.type is InterventionType.DENY
        assert verdict.payload == (
            "Blocked destructive operation (bash). Supervisor denied."
        )
        assert calls == []
        (record,) = path_records(store, INTERVENTION_SCHEMA_REF)
        assert record.payload["source"] == "gate"
        assert record.payload["trigger_record_id"] is None
        assert record.envelope.caused_by_record_ids == ()

    def test_no_matching_rule_means_proceed_and_records_nothing(
        self, supervisor: Supervisor, store: SQLiteTraceStore
    ) -> None:
        supervisor.add_rule(destructive_tool_rule())
        count = store.fact_count()
        assert supervisor.check_call(self.event("ls")) is None
        assert store.fact_count() == count


class TestReviewMerge:
    def test_a_proposal_is_presented_as_a_merge_proposed_event(
        self, supervisor: Supervisor
    ) -> None:
        seen: list[SupervisedEvent] = []

        def verdict(event: SupervisedEvent) -> Intervention:
            seen.append(event)
            return Intervention(InterventionType.DISCARD, "", "too big")

        supervisor.add_rule(
            SupervisionRule("size", lambda e: e.kind_label == "merge:proposed", verdict)
        )
        proposal = MergeProposal("scope:agent:child", "sha256:base")
        result = supervisor.review_merge("scope:agent:child", proposal)
        assert result is not None
        assert result.type is InterventionType.DISCARD
        assert result.scope_id == "scope:agent:child"
        (event,) = seen
        assert event.trace_owner_id == "agent:child"
        assert event.mode == "declaration"
        assert event.schema_ref == "goatherd.merge.proposed.v1"
        assert event.payload == {
            "child_scope": "scope:agent:child",
            "baseline_digest": "sha256:base",
            "paths": [],
            "change_count": 0,
        }

    def test_an_approving_rule_set_returns_none(self, supervisor: Supervisor) -> None:
        supervisor.add_rule(destructive_tool_guard())
        proposal = MergeProposal("scope:agent:child", "sha256:base")
        assert supervisor.review_merge("scope:agent:child", proposal) is None


class TestActions:
    def test_inject_records_guidance_on_the_scope(
        self, supervisor: Supervisor, store: SQLiteTraceStore
    ) -> None:
        assert supervisor.inject(f"scope:{OWNER}", "try another way").unwrap() is None
        (record,) = path_records(store, "goatherd.supervisor.inject.v1")
        assert record.payload == {"guidance": "try another way"}

    def test_halt_discards_the_scope(
        self, supervisor: Supervisor, manager: ScopeManager, store: SQLiteTraceStore
    ) -> None:
        supervisor.halt(f"scope:{OWNER}").unwrap()
        assert len(path_records(store, "goatherd.supervisor.halt.v1")) == 1
        scope = manager.get(f"scope:{OWNER}")
        assert scope is not None
        assert scope.state.value == "discarded"

    def test_an_unknown_scope_is_a_failure_and_records_nothing(
        self, supervisor: Supervisor, store: SQLiteTraceStore
    ) -> None:
        count = store.fact_count()
        for result in (
            supervisor.inject("scope:nobody", "x"),
            supervisor.halt("scope:nobody"),
        ):
            error = result.failure()
            assert isinstance(error, ScopeNotFoundError)
            assert str(error) == "scope scope:nobody not found"
        assert store.fact_count() == count


class TestInterventionQueue:
    def test_a_full_queue_drops_its_oldest_intervention(self) -> None:
        queue = InterventionQueue(2)
        items = [Intervention(InterventionType.INJECT, f"s{n}") for n in range(3)]
        for item in items:
            queue.put(item)
        assert queue.dropped == 1
        assert queue.drain() == tuple(items[1:])
        assert queue.get(timeout=0.01) is None

    def test_a_non_positive_capacity_means_64(self) -> None:
        queue = InterventionQueue(0)
        for n in range(70):
            queue.put(Intervention(InterventionType.HALT, str(n)))
        assert len(queue) == 64
        assert queue.dropped == 6
