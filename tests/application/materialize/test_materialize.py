"""The materialize orchestrator on a real store: laws, honesty, idempotency."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from pathlib import Path

import pytest

from goatherd.application import (
    EchoSubstrate,
    MaterializationRefusedError,
    SubstrateError,
    SubstrateRegistry,
    UnknownSubstrateError,
    materialize,
)
from goatherd.application.ports import SandboxSpec
from goatherd.domain import (
    MAX_OWNER_ORDINAL,
    TRUSTED_READ_CONTEXT,
    AppendBatch,
    AppendContext,
    AppendGroup,
    AppendIntentConflictError,
    MaterializationOutcome,
    MaterializationRequest,
    MaterializationRequestError,
    MaterializationResult,
    OperationContext,
    Record,
    RecordDraft,
    RetainedContextDraft,
)
from goatherd.infrastructure.sandbox import MemorySandbox
from goatherd.infrastructure.store import SqlAlchemyTraceStore, SQLiteTraceStore
from goatherd.infrastructure.substrates import SQLiteKVSubstrate, WorkspaceSubstrate

CONTEXT = AppendContext(
    "agent:host", ("trusted:internal",), "shepherd2-slice-a", "internal"
)
MATERIALIZE = CONTEXT.to_operation_context("materialize")
OWNER = "agent:main"


def declare(
    store: SqlAlchemyTraceStore,
    intent: str,
    payloads: Sequence[dict[str, object]],
    *,
    substrate_ref: str = "echo.v1",
    schema_ref: str = "note.write.v1",
    mode: str = "declaration",
    owner: str = OWNER,
) -> tuple[str, ...]:
    group = AppendGroup(
        owner,
        RetainedContextDraft(substrate_ref=substrate_ref),
        (),
        tuple(RecordDraft(mode, schema_ref, p, "write") for p in payloads),
    )
    return store.append(CONTEXT, AppendBatch(intent, (group,))).fact_ids


def echo_registry() -> SubstrateRegistry:
    registry = SubstrateRegistry()
    registry.register(EchoSubstrate("echo.v1", ["note.write.v1"]))
    return registry


def request(
    targets: Sequence[str], intent: str = "apply:1", **kw
) -> MaterializationRequest:
    return MaterializationRequest(intent, kw.pop("owner", OWNER), tuple(targets), **kw)


class Scripted:
    """A substrate that returns a fixed result (to exercise the orchestrator's laws)."""

    substrate_ref = "echo.v1"
    declaration_schemas = frozenset({"note.write.v1"})
    capture_schemas = frozenset({"note.applied.v1"})
    containment = "contained"

    def __init__(
        self,
        outcome: str,
        *,
        drafts: int = 0,
        mode: str = "capture",
        schema: str = "note.applied.v1",
        reason: str = "",
    ) -> None:
        self.outcome, self.drafts, self.mode, self.schema = (
            outcome,
            drafts,
            mode,
            schema,
        )
        self.reason = reason
        self.calls = 0

    def materialize(self, records: Sequence[Record]) -> MaterializationResult:
        self.calls += 1
        drafts = tuple(
            RecordDraft(
                self.mode,
                self.schema,
                {"n": i, "call": self.calls},
                "applied",
                caused_by_fact_ids=(records[0].record_id,),
            )
            for i in range(self.drafts)
        )
        return MaterializationResult(self.outcome, drafts, self.reason)  # type: ignore[arg-type]


def registry_of(substrate: object) -> SubstrateRegistry:
    registry = SubstrateRegistry()
    registry.register(substrate)  # type: ignore[arg-type]
    return registry


def unchanged(store: SQLiteTraceStore, count: int, intent: str = "apply:1") -> None:
    assert store.fact_count() == count
    assert store.read_completed_materialization(intent) is None
    assert store.read_append_intent(intent) is None


class TestRefusals:
    @pytest.mark.parametrize(
        ("context", "message"),
        [
            (CONTEXT.to_operation_context("append"), "requires OperationContext with"),
            (OperationContext("agent:x", "materialize"), "trusted internal witness"),
        ],
    )
    def test_a_wrong_or_untrusted_context_is_refused(self, context, message) -> None:
        with SQLiteTraceStore() as store:
            ids = declare(store, "d", [{"a": 1}])
            count = store.fact_count()
            result = materialize(store, context, request(ids), echo_registry())
            assert isinstance(result.failure(), MaterializationRefusedError)
            assert message in str(result.failure())
            unchanged(store, count)

    def test_a_malformed_request_is_refused(self) -> None:
        with SQLiteTraceStore() as store:
            result = materialize(store, MATERIALIZE, request([]), echo_registry())
            assert isinstance(result.failure(), MaterializationRequestError)

    def test_records_of_another_owner_are_not_materialized(self) -> None:
        with SQLiteTraceStore() as store:
            ids = declare(store, "d", [{"a": 1}], owner="agent:other")
            count = store.fact_count()
            result = materialize(store, MATERIALIZE, request(ids), echo_registry())
            assert str(result.failure()) == (
                f"materialize target '{ids[0]}' is not present on owner path "
                "'agent:main'"
            )
            unchanged(store, count)

    def test_the_through_ordinal_bounds_what_can_be_targeted(self) -> None:
        with SQLiteTraceStore() as store:
            first = declare(store, "d1", [{"a": 1}])
            later = declare(store, "d2", [{"a": 2}])
            refused = materialize(
                store,
                MATERIALIZE,
                request(later, target_through_owner_ordinal=0),
                echo_registry(),
            )
            assert "is not present on owner path" in str(refused.failure())
            ok = materialize(
                store,
                MATERIALIZE,
                request(first, target_through_owner_ordinal=0),
                echo_registry(),
            )
            assert ok.unwrap().outcome is MaterializationOutcome.SUCCESS

    def test_captures_are_not_targets(self) -> None:
        with SQLiteTraceStore() as store:
            ids = declare(store, "d", [{"a": 1}], mode="capture")
            result = materialize(store, MATERIALIZE, request(ids), echo_registry())
            assert str(result.failure()) == (
                "materialize targets must be declaration records"
            )

    def test_an_unknown_substrate_fails_closed(self) -> None:
        with SQLiteTraceStore() as store:
            ids = declare(store, "d", [{"a": 1}], substrate_ref="nobody.v1")
            count = store.fact_count()
            result = materialize(store, MATERIALIZE, request(ids), echo_registry())
            assert isinstance(result.failure(), UnknownSubstrateError)
            assert str(result.failure()) == "unknown substrate: nobody.v1"
            unchanged(store, count)

    def test_a_batch_naming_two_substrates_is_refused(self) -> None:
        with SQLiteTraceStore() as store:
            a = declare(store, "d1", [{"a": 1}])
            b = declare(store, "d2", [{"b": 1}], substrate_ref="other.v1")
            result = materialize(store, MATERIALIZE, request(a + b), echo_registry())
            assert str(result.failure()) == (
                "materialize batch must target exactly one substrate"
            )

    def test_schemas_the_substrate_does_not_accept_are_named(self) -> None:
        with SQLiteTraceStore() as store:
            a = declare(store, "d1", [{"a": 1}], schema_ref="z.v1")
            b = declare(store, "d2", [{"a": 1}], schema_ref="y.v1")
            result = materialize(store, MATERIALIZE, request(a + b), echo_registry())
            assert str(result.failure()) == (
                "substrate 'echo.v1' does not accept schemas: y.v1, z.v1"
            )

    @pytest.mark.parametrize(
        ("substrate", "message"),
        [
            (Scripted("exploded"), "unknown materialization outcome"),
            (
                Scripted("success", drafts=1, mode="declaration"),
                "may only emit capture drafts",
            ),
            (
                Scripted("success", drafts=1, schema="other.v1"),
                "unsupported capture schema: other.v1",
            ),
            (Scripted("clean_failure", drafts=1), "claimed clean_failure but emitted"),
        ],
    )
    def test_a_dishonest_or_malformed_result_is_refused_before_any_append(
        self, substrate: Scripted, message: str
    ) -> None:
        with SQLiteTraceStore() as store:
            ids = declare(store, "d", [{"a": 1}])
            count = store.fact_count()
            result = materialize(
                store, MATERIALIZE, request(ids), registry_of(substrate)
            )
            assert isinstance(result.failure(), MaterializationRefusedError)
            assert message in str(result.failure())
            unchanged(store, count)

    def test_a_refused_clean_failure_stays_retryable(self) -> None:
        with SQLiteTraceStore() as store:
            ids = declare(store, "d", [{"a": 1}])
            liar = registry_of(Scripted("clean_failure", drafts=1))
            assert materialize(store, MATERIALIZE, request(ids), liar).failure()
            receipt = materialize(store, MATERIALIZE, request(ids), echo_registry())
            assert receipt.unwrap().outcome is MaterializationOutcome.SUCCESS

    def test_a_substrate_refusal_records_nothing(self, tmp_path: Path) -> None:
        with SQLiteTraceStore() as store, SQLiteKVSubstrate(tmp_path / "w") as kv:
            ids = declare(
                store,
                "d",
                [{"key": "", "value": 1}],
                substrate_ref="kv.sqlite.local.v1",
                schema_ref="shepherd2.kv.put.v1",
            )
            count = store.fact_count()
            result = materialize(store, MATERIALIZE, request(ids), registry_of(kv))
            assert isinstance(result.failure(), SubstrateError)
            unchanged(store, count)


class TestOutcomes:
    def test_captures_land_on_the_capture_owner_witnessed_by_the_substrate(
        self,
    ) -> None:
        with SQLiteTraceStore() as store:
            ids = declare(store, "d", [{"a": 1}, {"a": 2}])
            receipt = materialize(
                store,
                MATERIALIZE,
                request(ids, capture_trace_owner_id="agent:world"),
                echo_registry(),
            ).unwrap()
            assert receipt.target_record_ids == ids
            world = store.read_owner_prefix(
                TRUSTED_READ_CONTEXT, "agent:world", MAX_OWNER_ORDINAL
            )
            assert world.owner_paths["agent:world"] == receipt.produced_record_ids
            capture = world.facts_by_id[receipt.produced_record_ids[1]]
            assert capture.envelope.caused_by_record_ids == (ids[1],)
            witness = store.read_fact(
                TRUSTED_READ_CONTEXT, capture.envelope.witness_ref
            )
            assert isinstance(witness, Record)
            assert witness.payload["substrate_ref"] == "echo.v1"
            assert witness.payload["actor_ref"] == "agent:host"
            assert witness.payload["authority_refs"] == ["trusted:internal"]

    def test_a_clean_failure_is_recorded_in_the_ledger_without_captures(self) -> None:
        substrate = Scripted("clean_failure", reason="nothing attempted")
        with SQLiteTraceStore() as store:
            ids = declare(store, "d", [{"a": 1}])
            count = store.fact_count()
            receipt = materialize(
                store, MATERIALIZE, request(ids), registry_of(substrate)
            ).unwrap()
            assert receipt.outcome is MaterializationOutcome.CLEAN_FAILURE
            assert receipt.produced_record_ids == ()
            assert receipt.failure_reason == "nothing attempted"
            assert store.fact_count() == count
            again = materialize(
                store, MATERIALIZE, request(ids), registry_of(substrate)
            )
            assert again.unwrap() == receipt
            assert substrate.calls == 1

    def test_a_split_state_appends_what_landed_and_says_so(self) -> None:
        sandbox = MemorySandbox()
        sandbox.create(SandboxSpec())
        sandbox.write_file("a.txt", b"file")
        good = base64.b64encode(b"ok").decode()
        with SQLiteTraceStore() as store:
            ids = declare(
                store,
                "d",
                [
                    {"path": "b.txt", "content_b64": good},
                    {"path": "a.txt/x", "content_b64": good},
                ],
                substrate_ref="workspace.sandbox.v1",
                schema_ref="workspace.file.write.v1",
            )
            receipt = materialize(
                store,
                MATERIALIZE,
                request(ids),
                registry_of(WorkspaceSubstrate(sandbox)),
            ).unwrap()
            assert receipt.outcome is MaterializationOutcome.SPLIT_STATE
            assert receipt.failure_reason.startswith(f"record {ids[1]}: ")
            (produced,) = receipt.produced_record_ids
            capture = store.read_fact(TRUSTED_READ_CONTEXT, produced)
            assert capture.envelope.caused_by_record_ids == (ids[0],)
            witness = store.read_fact(
                TRUSTED_READ_CONTEXT, capture.envelope.witness_ref
            )
            assert isinstance(witness, Record)
            assert witness.payload["containment"] == "buffered"
            assert sandbox.read_file("b.txt") == b"ok"


class TestIdempotency:
    def test_a_same_intent_retry_replays_the_receipt_without_dispatch(self) -> None:
        substrate = Scripted("success", drafts=1)
        with SQLiteTraceStore() as store:
            ids = declare(store, "d", [{"a": 1}])
            first = materialize(
                store, MATERIALIZE, request(ids), registry_of(substrate)
            )
            count = store.fact_count()
            second = materialize(
                store, MATERIALIZE, request(ids), registry_of(substrate)
            )
            assert second.unwrap() == first.unwrap()
            assert substrate.calls == 1
            assert store.fact_count() == count

    def test_a_same_intent_with_other_content_conflicts_before_dispatch(self) -> None:
        substrate = Scripted("success", drafts=1)
        with SQLiteTraceStore() as store:
            a = declare(store, "d1", [{"a": 1}])
            b = declare(store, "d2", [{"a": 2}])
            materialize(store, MATERIALIZE, request(a), registry_of(substrate)).unwrap()
            count = store.fact_count()
            result = materialize(store, MATERIALIZE, request(b), registry_of(substrate))
            assert isinstance(result.failure(), AppendIntentConflictError)
            assert str(result.failure()) == (
                "materialize intent 'apply:1' was already committed with "
                "different content"
            )
            assert substrate.calls == 1
            assert store.fact_count() == count


class ProcessDied(BaseException):
    """Stands for the process dying: nothing after it runs."""


class DiesBeforeLedger(SQLiteTraceStore):
    """A real file store whose process dies between capture append and ledger row."""

    def record_completed_materialization(self, intent, request_digest, receipt_json):
        raise ProcessDied


class TestCrashWindow:
    def crash_then_restart(self, path: Path, registry: SubstrateRegistry):
        with DiesBeforeLedger(path) as store:
            ids = declare(store, "d", [{"a": 1}])
            with pytest.raises(ProcessDied):
                materialize(store, MATERIALIZE, request(ids), registry)
            # The captures committed; the ledger row did not.
            assert store.read_append_intent("apply:1") is not None
            assert store.read_completed_materialization("apply:1") is None
            produced = store.read_append_intent("apply:1").fact_ids  # type: ignore[union-attr]
        restarted = SQLiteTraceStore(path)
        return restarted, ids, produced

    def test_a_deterministic_substrate_converges_to_the_same_receipt(
        self, tmp_path: Path
    ) -> None:
        echo = EchoSubstrate("echo.v1", ["note.write.v1"])
        restarted, ids, produced = self.crash_then_restart(
            tmp_path / "t.sqlite", registry_of(echo)
        )
        with restarted as store:
            count = store.fact_count()
            receipt = materialize(
                store, MATERIALIZE, request(ids), registry_of(echo)
            ).unwrap()
            assert receipt.produced_record_ids == produced
            assert store.fact_count() == count  # nothing written twice
            assert store.read_completed_materialization("apply:1") is not None

    def test_a_non_deterministic_substrate_fails_loudly_instead_of_writing_twice(
        self, tmp_path: Path
    ) -> None:
        counting = Scripted("success", drafts=1)  # payload carries the call count
        restarted, ids, _ = self.crash_then_restart(
            tmp_path / "t.sqlite", registry_of(counting)
        )
        with restarted as store:
            count = store.fact_count()
            result = materialize(
                store, MATERIALIZE, request(ids), registry_of(counting)
            )
            assert isinstance(result.failure(), AppendIntentConflictError)
            assert counting.calls == 2  # at-least-once dispatch in the window
            assert store.fact_count() == count
            assert store.read_completed_materialization("apply:1") is None
