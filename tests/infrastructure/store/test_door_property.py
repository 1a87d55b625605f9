"""The door is one function: what the store accepts, ``verify`` accepts.

Hostile batches (special schemas on ordinary paths and ordinary schemas on
special paths, runtime-schema records whose payload does not decode, bodies
in redaction form, oversized identifiers, values of the wrong type, bad
parents) go to ``append`` on SQLite and PostgreSQL. Each one either commits,
and the whole trace still verifies, or is refused with a ``TraceStoreError``
subclass (a malformed batch too: an ``AppendRefusedError``), leaving every
table as it was. A draft ``verify`` would name is therefore never stored: it
is refused at the door. That holds for the checkpoint and sealed-output
records of real sessions too, whose bytes the test puts in the blob store
first, or not, or under another holder, or other bytes, or releases again.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from goatherd import new_local_git_sandbox, open_runtime
from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    CutSpec,
    Record,
    RecordDraft,
)
from goatherd.domain.errors import BatchShapeError, TraceStoreError, UnheldBlobError
from goatherd.domain.events.checkpoint import CheckpointCreated
from goatherd.domain.events.output import OutputSealed
from goatherd.domain.identity import ROOT_WITNESS_SCHEMA_REF, WITNESS_SCHEMA_REF
from goatherd.domain.records import (
    FRONTIER_SCHEMA_REF,
    REDACTION_OWNER,
    REDACTION_SCHEMA_REF,
    WITNESS_OWNER,
)
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.blobs.store import SqlBlobStore
from goatherd.infrastructure.store import (
    SqlAlchemyTraceStore,
    SQLiteTraceStore,
    open_trace_store,
)
from tests.faults.conftest import postgres_url  # noqa: F401 (a fixture)
from tests.fuzz.strategies import any_text, hostile_values, json_objects
from tests.fuzz.tables import table_rows
from tests.golden.traces import HERE as GOLDEN
from tests.golden.traces import load

REFUSALS = (TraceStoreError,)  # every refusal, whatever its cause
_HUGE = "x" * 1100  # over the 1 KiB identifier limit
OWNERS = (
    "agent:a",
    "agent:a:b",
    WITNESS_OWNER,
    REDACTION_OWNER,
    "goatherd:other",
    "kernel:other",
    "",
    _HUGE,
)
RUNTIME_SCHEMAS = (
    "goatherd.scope.created.v1",
    "goatherd.checkpoint.created.v2",
    "goatherd.run_output.sealed.v1",
    "shepherd2.execution.created.v1",
    "goatherd.supervisor.halt.v1",
)
SCHEMAS = (
    "app.step.v1",
    WITNESS_SCHEMA_REF,
    ROOT_WITNESS_SCHEMA_REF,
    REDACTION_SCHEMA_REF,
    FRONTIER_SCHEMA_REF,
    *RUNTIME_SCHEMAS,
    "",
    _HUGE,
)
MODES = ("capture", "declaration", "observation", "")
_WRONG: st.SearchStrategy[Any] = st.sampled_from((7, 1.5, b"x", None, ("a",)))


def _maybe_wrong(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.integers(0, 9).flatmap(lambda k: _WRONG if k == 9 else values)


def _mostly(usual: Any, hostile: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``usual`` four times in five, so that hostile batches still commit often."""
    return st.integers(0, 4).flatmap(lambda k: hostile if k == 4 else st.just(usual))


def _payloads(known: list[str]) -> st.SearchStrategy[Any]:
    ids = st.sampled_from(known) if known else st.just("sha256:" + "0" * 64)
    return st.one_of(
        st.just({}),
        json_objects,
        st.dictionaries(any_text, hostile_values, max_size=2),
        st.builds(lambda i: {"erased": [i], "reason": "r"}, ids),
        st.builds(lambda i: {"redacted_by": i}, ids),
        st.just({"scope_id": "scope:x", "seq": 1}),
        st.just({"owner": "agent:a", "through_fact_id": "sha256:" + "1" * 64}),
        _WRONG,
    )


@st.composite
def _drafts(draw: st.DrawFn, known: list[str]) -> RecordDraft:
    parents = (st.sampled_from(known) if known else st.nothing()) | st.sampled_from(
        ("sha256:" + "2" * 64, "", "not-an-id", _HUGE)
    )
    return RecordDraft(
        mode=draw(_mostly("capture", _maybe_wrong(st.sampled_from(MODES)))),
        schema_ref=draw(
            st.integers(0, 2).flatmap(
                lambda k: (
                    st.just("app.step.v1")
                    if k == 0
                    else _maybe_wrong(st.sampled_from(SCHEMAS))
                )
            )
        ),
        payload=draw(_payloads(known)),
        kind_label=draw(_mostly("", _maybe_wrong(st.sampled_from(("step", _HUGE))))),
        append_local_id=draw(_mostly(None, st.sampled_from(("l1", "l2", _HUGE)))),
        caused_by_fact_ids=tuple(
            draw(_mostly((), st.lists(parents, min_size=1, max_size=2)))
        ),
        caused_by_local_refs=tuple(
            draw(_mostly((), st.lists(st.sampled_from(("l1", "nope")), max_size=1)))
        ),
    )


@st.composite
def hostile_batches(draw: st.DrawFn, known: list[str], n: int) -> AppendBatch:
    groups = draw(
        st.lists(
            st.builds(
                AppendGroup,
                trace_owner_id=_mostly(
                    "agent:a", _maybe_wrong(st.sampled_from(OWNERS))
                ),
                fact_drafts=st.lists(_drafts(known), min_size=1, max_size=2).map(tuple),
            ),
            min_size=1,
            max_size=2,
        )
    )
    intent = draw(_mostly(f"door:{n}", _maybe_wrong(st.sampled_from(("", _HUGE)))))
    return AppendBatch(intent, tuple(groups))


def _one_batch(
    store: SqlAlchemyTraceStore, batch: AppendBatch, known: list[str], nonce: str = ""
) -> bool:
    """Append ``batch``: refused and nothing written, or stored and verified."""
    if nonce and isinstance(batch.append_intent_id, str) and batch.append_intent_id:
        # A store shared by every example: each example's intents are its own,
        # so no example meets another's (the draws never see the nonce; a
        # wrong-typed intent stays as drawn).
        intent = nonce + batch.append_intent_id
        batch = dataclasses.replace(batch, append_intent_id=intent)
    before = table_rows(store.engine)
    try:
        receipt = store.append(TRUSTED_APPEND_CONTEXT, batch)
    except REFUSALS:
        assert table_rows(store.engine) == before, "a refused append wrote rows"
        return False
    # Anything else (a bare TypeError, a driver error) propagates and fails.
    known.extend(receipt.fact_ids)
    report = verify_trace(store)
    assert report.ok, (batch, report.problems)
    return True


def _property(
    store: SqlAlchemyTraceStore, data: st.DataObject, nonce: str = ""
) -> None:
    known: list[str] = []  # this example's records only: the draws depend on them
    for _ in range(data.draw(st.integers(1, 3), label="batches")):
        batch = data.draw(hostile_batches(known, len(known)))
        _one_batch(store, batch, known, nonce)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_what_the_sqlite_store_accepts_verify_accepts(data: st.DataObject) -> None:
    with SQLiteTraceStore() as store:
        _property(store, data)


@pytest.fixture
def pg_store(
    postgres_url: str,  # noqa: F811 (a fixture)
) -> Iterator[SqlAlchemyTraceStore]:
    with open_trace_store(postgres_url) as store:
        yield store


@pytest.mark.postgres
def test_what_the_postgres_store_accepts_verify_accepts(
    pg_store: SqlAlchemyTraceStore,
) -> None:
    # One database for every example (a database per example is too slow):
    # each accepted batch must leave the whole trace verifying. What an example
    # draws depends only on its own records, never on earlier examples', so
    # Hypothesis can replay any example exactly.
    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def run(data: st.DataObject) -> None:
        _property(pg_store, data, f"x{uuid.uuid4().hex[:12]}:")

    run()


def _session_records(directory: Path) -> list[Record]:
    """Every record a short real runtime session writes (scopes, a checkpoint)."""
    repo = directory / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "f.txt").write_text("one\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    runtime = open_runtime(str(directory / "session.sqlite"))
    try:
        mgr = runtime.new_manager()
        parent = mgr.create("agent:main", new_local_git_sandbox(repo)).unwrap()
        child = mgr.fork(parent.id, "agent:child").unwrap()
        checkpoint = mgr.create_checkpoint(parent.id, b"[]").unwrap()
        mgr.restore_checkpoint(checkpoint.id).unwrap()
        parent.discard(child).unwrap()
        return [entry.record for entry in runtime.store.read_log()]
    finally:
        runtime.close()


@pytest.fixture(scope="module")
def all_session_records(tmp_path_factory: pytest.TempPathFactory) -> list[Record]:
    return _session_records(tmp_path_factory.mktemp("session"))


_NAMING = {
    CheckpointCreated.SCHEMA: ("checkpoint_id", "snapshot_digest", "#snapshot"),
    OutputSealed.SCHEMA: ("output_id", "diff_blob", "#diff"),
}
_SNAPSHOT = b"[]"  # what the session's checkpoint holds


def _names_a_blob(record: Record) -> bool:
    naming = _NAMING.get(record.envelope.schema_ref)
    return naming is not None and bool(record.body.payload.get(naming[1]))


def _address(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="module")
def session_records(all_session_records: list[Record]) -> list[Record]:
    """The session's records but those naming a blob (``naming_records``)."""
    return [r for r in all_session_records if not _names_a_blob(r)]


@dataclasses.dataclass(frozen=True)
class _Naming:
    """A real runtime record naming a blob, and the bytes it names."""

    owner: str
    mode: str
    schema_ref: str
    kind_label: str
    payload: dict[str, Any]
    data: bytes


@pytest.fixture(scope="module")
def naming_records(all_session_records: list[Record]) -> list[_Naming]:
    """The session's checkpoint, and the golden session's checkpoints and seals."""
    found = []
    for record in all_session_records:
        if _names_a_blob(record):
            assert record.view is not None
            found.append(
                _Naming(
                    record.view.trace_owner_id,
                    record.envelope.mode,
                    record.envelope.schema_ref,
                    record.view.kind_label,
                    dict(record.body.payload),
                    _SNAPSHOT,
                )
            )
    golden = load(GOLDEN / "current_runtime.json")
    for batch in golden["batches"]:
        for group in batch["groups"]:
            for entry in group["records"]:
                naming = _NAMING.get(entry["schema"])
                digest = entry["payload"].get(naming[1]) if naming else None
                if digest:
                    data = base64.b64decode(golden["blobs"][digest])
                    found.append(
                        _Naming(
                            group["owner"],
                            entry["mode"],
                            entry["schema"],
                            entry.get("kind", ""),
                            entry["payload"],
                            data,
                        )
                    )
    for item in found:
        naming = _NAMING[item.schema_ref]
        assert _address(item.data) == item.payload[naming[1]], item
    assert {item.schema_ref for item in found} == set(_NAMING)
    return found


_PUTS = ("right", "right", "none", "other holder", "other bytes", "released")


@st.composite
def _blob_cases(
    draw: st.DrawFn, pool: list[_Naming], nonce: str
) -> tuple[AppendBatch, str, bytes, str]:
    """A record naming a blob (maybe changed), its holder, its bytes, the put."""
    item = draw(st.sampled_from(pool))
    id_key, digest_key, suffix = _NAMING[item.schema_ref]
    payload: Any = dict(item.payload)
    payload[id_key] = nonce + payload[id_key]
    holder = payload[id_key] + suffix
    change = draw(st.sampled_from(("as is", "as is", "other", "none", "mutated")))
    if change == "other":
        payload[digest_key] = "sha256:" + "0" * 64
    elif change == "none":
        del payload[digest_key]
    elif change == "mutated":
        payload = _mutated(draw, payload)
    draft = RecordDraft(
        mode=draw(_mostly(item.mode, st.sampled_from(MODES))),
        schema_ref=item.schema_ref,
        payload=payload,
        kind_label=item.kind_label,
    )
    owner = draw(_mostly(item.owner, st.sampled_from(OWNERS)))
    batch = AppendBatch(
        f"blob:{draw(st.integers(0, 10**6))}",
        (AppendGroup(owner, fact_drafts=(draft,)),),
    )
    return batch, holder, item.data, draw(st.sampled_from(_PUTS))


def _blob_example(
    store: SqlAlchemyTraceStore,
    case: tuple[AppendBatch, str, bytes, str],
    nonce: str = "",
) -> None:
    batch, holder, data, put = case
    blobs = store.shared("goatherd.blob_store", lambda: SqlBlobStore(store))
    if put == "right":
        blobs.put(holder, data)
    elif put == "other holder":
        blobs.put(f"{nonce}cp:elsewhere#snapshot", data)
    elif put == "other bytes":
        blobs.put(holder, data + b"!")
    elif put == "released":
        blobs.put(holder, data)
        blobs.release(holder, _address(data))
    stored = _one_batch(store, batch, [], nonce)
    event(f"put {put}: {'stored' if stored else 'refused'}")


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_records_naming_blobs_obey_the_door_sqlite(
    naming_records: list[_Naming], data: st.DataObject
) -> None:
    # Put first (as the runtime does), the record is stored and the trace
    # verifies; not put, put elsewhere, other bytes, released again: the
    # record names bytes verify would miss, and the door refuses it.
    with SQLiteTraceStore() as store:
        _blob_example(store, data.draw(_blob_cases(naming_records, "")))


@pytest.mark.postgres
def test_records_naming_blobs_obey_the_door_postgres(
    naming_records: list[_Naming], pg_store: SqlAlchemyTraceStore
) -> None:
    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def run(data: st.DataObject) -> None:
        # Each example's checkpoint and output ids (so its holders) are its own.
        nonce = f"x{uuid.uuid4().hex[:12]}:"
        _blob_example(pg_store, data.draw(_blob_cases(naming_records, nonce)), nonce)

    run()


def test_a_checkpoint_record_naming_a_snapshot_no_holder_holds_is_refused(
    all_session_records: list[Record],
) -> None:
    (record,) = [r for r in all_session_records if _names_a_blob(r)][:1]
    assert record.view is not None
    draft = RecordDraft(
        record.envelope.mode,
        record.envelope.schema_ref,
        dict(record.body.payload),
        kind_label=record.view.kind_label,
    )
    batch = AppendBatch(
        "replay:blob", (AppendGroup(record.view.trace_owner_id, fact_drafts=(draft,)),)
    )
    with SQLiteTraceStore() as store:
        before = table_rows(store.engine)
        with pytest.raises(UnheldBlobError, match="#snapshot"):
            store.append(TRUSTED_APPEND_CONTEXT, batch)
        assert table_rows(store.engine) == before
        SqlBlobStore(store).put(
            str(draft.payload["checkpoint_id"]) + "#snapshot", _SNAPSHOT
        )
        _one_batch(store, batch, [])


def _mutated(draw: st.DrawFn, payload: dict[str, Any]) -> Any:
    """The payload as recorded, or with one key dropped, retyped or added."""
    how = draw(st.sampled_from(("as is", "as is", "drop", "retype", "add", "junk")))
    keys = sorted(payload)
    if how == "drop" and keys:
        return {k: v for k, v in payload.items() if k != draw(st.sampled_from(keys))}
    if how == "retype" and keys:
        return payload | {draw(st.sampled_from(keys)): draw(_WRONG | st.just([]))}
    if how == "add":
        return payload | {"extra": 1}
    if how == "junk":
        return draw(_payloads([]))
    return payload


@st.composite
def _replayed(draw: st.DrawFn, records: list[Record]) -> AppendBatch:
    """A real runtime record appended again, elsewhere or changed."""
    record = draw(st.sampled_from(records))
    assert record.view is not None
    envelope = record.envelope
    draft = RecordDraft(
        mode=draw(_mostly(envelope.mode, st.sampled_from(MODES))),
        schema_ref=envelope.schema_ref,
        payload=_mutated(draw, dict(record.body.payload)),
        kind_label=record.view.kind_label,
    )
    owner = draw(_mostly(record.view.trace_owner_id, st.sampled_from(OWNERS)))
    return AppendBatch(
        f"replay:{draw(st.integers(0, 10**6))}",
        (AppendGroup(owner, fact_drafts=(draft,)),),
    )


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_real_runtime_records_replayed_elsewhere_or_changed_obey_the_door(
    session_records: list[Record], data: st.DataObject
) -> None:
    # Whatever verify would name in such a record (a payload the runtime
    # cannot read, a kernel record on an ordinary path) the store must refuse;
    # whatever it stores must verify.
    known: list[str] = []
    with SQLiteTraceStore() as store:
        for _ in range(data.draw(st.integers(1, 3), label="batches")):
            _one_batch(store, data.draw(_replayed(session_records)), known)


@pytest.mark.postgres
def test_real_runtime_records_replayed_on_postgres_obey_the_door(
    session_records: list[Record], pg_store: SqlAlchemyTraceStore
) -> None:
    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def run(data: st.DataObject) -> None:
        nonce = f"x{uuid.uuid4().hex[:12]}:"
        _one_batch(pg_store, data.draw(_replayed(session_records)), [], nonce)

    run()


def _frontier_batch() -> AppendBatch:
    drafts = (
        RecordDraft("capture", "app.step.v1", {}),
        RecordDraft("capture", FRONTIER_SCHEMA_REF, {}),
    )
    return AppendBatch("door:frontier", (AppendGroup("agent:a", fact_drafts=drafts),))


def _refuses_a_frontier_record(store: SqlAlchemyTraceStore) -> None:
    # Found by the property above: it used to be stored, and verify then named
    # "a frontier record without its index row" (only publish_cut writes one).
    before = table_rows(store.engine)
    with pytest.raises(BatchShapeError, match="only publish_cut records a frontier"):
        store.append(TRUSTED_APPEND_CONTEXT, _frontier_batch())
    assert table_rows(store.engine) == before
    first = store.append(
        TRUSTED_APPEND_CONTEXT,
        AppendBatch(
            "door:ok",
            (
                AppendGroup(
                    "agent:a", fact_drafts=(RecordDraft("capture", "app.step.v1", {}),)
                ),
            ),
        ),
    ).fact_ids[0]
    store.publish_cut(TRUSTED_APPEND_CONTEXT, CutSpec("cut:1", "agent:a", first))
    assert verify_trace(store).ok


def test_a_frontier_record_outside_publish_cut_is_refused_sqlite() -> None:
    with SQLiteTraceStore() as store:
        _refuses_a_frontier_record(store)


@pytest.mark.postgres
def test_a_frontier_record_outside_publish_cut_is_refused_postgres(
    pg_store: SqlAlchemyTraceStore,
) -> None:
    _refuses_a_frontier_record(pg_store)
