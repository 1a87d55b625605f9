"""Every refusal of ``append`` is a ``TraceStoreError``; the blob-holder rule.

On every backend: a wrong context (``None``, a read context), a batch, group
or draft of the wrong type, a field of the wrong type, a payload that is not
canonical JSON, bad ``expected_heads``: each is refused with a
``TraceStoreError`` subclass whose message names what was wrong, and nothing
is written. A ``checkpoint.created`` or ``run_output.sealed`` record naming
bytes no blob holder holds is refused with ``UnheldBlobError``; put first
(also from another process), it is appended and the trace verifies (ADR 0088).
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    TRUSTED_READ_CONTEXT,
    AppendBatch,
    AppendGroup,
    CheckpointCreated,
    OutputSealed,
    RecordDraft,
    WorkspaceState,
)
from goatherd.errors import (
    AppendRefusedError,
    BatchRefusedError,
    BatchShapeError,
    CanonicalEncodingError,
    CanonicalTypeError,
    CanonicalValueError,
    ContextTypeError,
    PayloadTypeRefusedError,
    PayloadValueRefusedError,
    TraceStoreError,
    UnheldBlobError,
)
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.blobs.store import SqlBlobStore
from goatherd.infrastructure.store import SqlAlchemyTraceStore
from tests.infrastructure.backends import (  # noqa: F401 (fixtures)
    open_store,
    store,
    store_url,
)
from tests.infrastructure.store.helpers import dump

STATE = WorkspaceState("git", "1" * 40, {"head": "1" * 40})
OTHER = WorkspaceState("git", "2" * 40, {"head": "2" * 40})
SNAPSHOT = b"the conversation so far"
DIFF = b"diff --git a/a.txt b/a.txt\n"


def _address(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _step(**change: Any) -> RecordDraft:
    fields: dict[str, Any] = {
        "mode": "capture",
        "schema_ref": "app.step.v1",
        "payload": {"n": 1},
    }
    fields.update(change)
    return RecordDraft(**fields)


def _batch(*drafts: Any, owner: Any = "agent:a", intent: Any = "i:1") -> AppendBatch:
    return AppendBatch(intent, (AppendGroup(owner, fact_drafts=tuple(drafts)),))


def _group(drafts: Any) -> AppendBatch:
    return AppendBatch("i:1", (AppendGroup("agent:a", fact_drafts=drafts),))


Call = Callable[[SqlAlchemyTraceStore], object]
OK = _batch(_step())
CASES: dict[str, tuple[Call, type[TraceStoreError], str]] = {
    "a read context": (
        lambda s: s.append(TRUSTED_READ_CONTEXT, OK),  # type: ignore[arg-type]
        ContextTypeError,
        "a ReadContext cannot authorize a write",
    ),
    "no context": (
        lambda s: s.append(None, OK),  # type: ignore[arg-type]
        ContextTypeError,
        "got NoneType",
    ),
    "a string context": (
        lambda s: s.append("trusted", OK),  # type: ignore[arg-type]
        ContextTypeError,
        "got str",
    ),
    "no batch": (
        lambda s: s.append(TRUSTED_APPEND_CONTEXT, None),  # type: ignore[arg-type]
        BatchRefusedError,
        "batch must be an AppendBatch, got NoneType",
    ),
    "a dict for a batch": (
        lambda s: s.append(TRUSTED_APPEND_CONTEXT, {"groups": []}),  # type: ignore[arg-type]
        BatchRefusedError,
        "batch must be an AppendBatch, got dict",
    ),
    "a string for a group": (
        lambda s: s.append(TRUSTED_APPEND_CONTEXT, AppendBatch("i:1", ("g",))),  # type: ignore[arg-type]
        BatchRefusedError,
        r"groups\[0\] must be a AppendGroup, got str",
    ),
    "a dict for a draft": (
        lambda s: s.append(TRUSTED_APPEND_CONTEXT, _group(({"mode": "capture"},))),
        BatchRefusedError,
        r"groups\[0\].fact_drafts\[0\] must be a RecordDraft, got dict",
    ),
    "no drafts": (
        lambda s: s.append(TRUSTED_APPEND_CONTEXT, _group(None)),
        BatchRefusedError,
        r"groups\[0\].fact_drafts must be a tuple, got NoneType",
    ),
    "an int intent": (
        lambda s: s.append(TRUSTED_APPEND_CONTEXT, _batch(_step(), intent=7)),
        BatchRefusedError,
        "append_intent_id must be a string, got int",
    ),
    "an empty owner": (
        lambda s: s.append(TRUSTED_APPEND_CONTEXT, _batch(_step(), owner="")),
        BatchRefusedError,
        "owner",
    ),
    "a None schema": (
        lambda s: s.append(TRUSTED_APPEND_CONTEXT, _batch(_step(schema_ref=None))),
        BatchRefusedError,
        r"fact_drafts\[0\].schema_ref must be a string, got NoneType",
    ),
    "parents as one string": (
        lambda s: s.append(
            TRUSTED_APPEND_CONTEXT, _batch(_step(caused_by_fact_ids="sha256:0"))
        ),
        BatchRefusedError,
        "caused_by_fact_ids must be a tuple of strings, got str",
    ),
    "a set for a payload": (
        lambda s: s.append(TRUSTED_APPEND_CONTEXT, _batch(_step(payload={1, 2}))),
        BatchRefusedError,
        "fact payload must be a JSON object, got set",
    ),
    "an int key": (
        lambda s: s.append(TRUSTED_APPEND_CONTEXT, _batch(_step(payload={1: 2}))),
        PayloadTypeRefusedError,
        r"payload\[1\]: object key of type int",
    ),
    "bytes in a payload": (
        lambda s: s.append(TRUSTED_APPEND_CONTEXT, _batch(_step(payload={"b": b"x"}))),
        PayloadTypeRefusedError,
        "bytes",
    ),
    "NaN in a payload": (
        lambda s: s.append(
            TRUSTED_APPEND_CONTEXT, _batch(_step(payload={"x": float("nan")}))
        ),
        PayloadValueRefusedError,
        "NaN",
    ),
    "expected heads of a list": (
        lambda s: s.append(TRUSTED_APPEND_CONTEXT, OK, expected_heads=[1]),  # type: ignore[arg-type]
        BatchRefusedError,
        "expected_heads must be a mapping, got list",
    ),
    "an expected head of text": (
        lambda s: s.append(
            TRUSTED_APPEND_CONTEXT,
            OK,
            expected_heads={"agent:a": "0"},  # type: ignore[dict-item]
        ),
        BatchRefusedError,
        r"expected_heads\['agent:a'\] must be an int",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_refusal_at_append_is_a_trace_store_error(
    store: SqlAlchemyTraceStore,  # noqa: F811 (a fixture)
    case: str,
) -> None:
    call, kind, message = CASES[case]
    store.append(TRUSTED_APPEND_CONTEXT, _batch(_step(), intent="i:0"))
    before = dump(store)
    with pytest.raises(TraceStoreError, match=message) as refused:
        call(store)
    assert isinstance(refused.value, kind), type(refused.value)
    assert dump(store) == before
    assert verify_trace(store).ok


def test_a_refused_batch_is_also_the_domain_error_its_check_found(
    store: SqlAlchemyTraceStore,  # noqa: F811 (a fixture)
) -> None:
    # Code catching the domain's errors keeps working.
    with pytest.raises(BatchShapeError) as shape:
        store.append(TRUSTED_APPEND_CONTEXT, _batch(_step(), owner=""))
    assert isinstance(shape.value, AppendRefusedError)
    with pytest.raises(CanonicalTypeError) as key:
        store.append(TRUSTED_APPEND_CONTEXT, _batch(_step(payload={1: 2})))
    assert isinstance(key.value, CanonicalEncodingError)
    assert (key.value.path, key.value.reason) == (
        "payload[1]",
        "object key of type int (keys must be strings)",
    )
    with pytest.raises(CanonicalValueError):
        store.append(TRUSTED_APPEND_CONTEXT, _batch(_step(payload={"x": float("inf")})))


def test_preview_refuses_what_append_refuses_alike(
    store: SqlAlchemyTraceStore,  # noqa: F811 (a fixture)
) -> None:
    with pytest.raises(BatchRefusedError, match="got NoneType"):
        store.preview_record_ids(TRUSTED_APPEND_CONTEXT, None)  # type: ignore[arg-type]
    with pytest.raises(PayloadValueRefusedError, match="NaN"):
        store.preview_record_ids(
            TRUSTED_APPEND_CONTEXT, _batch(_step(payload={"x": float("nan")}))
        )
    with pytest.raises(ContextTypeError):
        store.preview_record_ids(None, OK)  # type: ignore[arg-type]


# ------------------------------------------------------------ the blob holders


def _checkpoint(cp_id: str = "cp:agent:main:1", data: bytes = SNAPSHOT) -> RecordDraft:
    payload = {
        "checkpoint_id": cp_id,
        "backend": "git",
        "revision": STATE.revision,
        "state_digest": STATE.digest(),
        "has_snapshot": bool(data),
        "state": STATE.to_json(),
        "snapshot_digest": _address(data),
    }
    return RecordDraft("declaration", CheckpointCreated.SCHEMA, payload)


def _sealed(out_id: str = "out:agent:main:2", data: bytes = DIFF) -> RecordDraft:
    payload = {
        "output_id": out_id,
        "scope": "scope:agent:main",
        "backend": "git",
        "revision": STATE.revision,
        "state_digest": STATE.digest(),
        "baseline_digest": OTHER.digest(),
        "change_count": 1,
        "state": STATE.to_json(),
        "baseline": OTHER.to_json(),
        "changes": [{"path": "a.txt", "kind": "modify"}],
        "diff_blob": _address(data),
    }
    return RecordDraft("declaration", OutputSealed.SCHEMA, payload)


NAMING = {
    "checkpoint": (_checkpoint, "cp:agent:main:1#snapshot", SNAPSHOT),
    "sealed output": (_sealed, "out:agent:main:2#diff", DIFF),
}


def _refused_unheld(
    trace: SqlAlchemyTraceStore, draft: RecordDraft, holder: str
) -> None:
    before = dump(trace)
    with pytest.raises(UnheldBlobError) as refused:
        trace.append(TRUSTED_APPEND_CONTEXT, _batch(draft, owner="agent:main"))
    assert refused.value.holder == holder
    assert refused.value.digest in str(refused.value)
    assert holder in str(refused.value)
    assert isinstance(refused.value, AppendRefusedError)
    assert dump(trace) == before


@pytest.mark.parametrize("kind", sorted(NAMING))
def test_a_record_naming_bytes_no_holder_holds_is_refused(
    store: SqlAlchemyTraceStore,  # noqa: F811 (a fixture)
    kind: str,
) -> None:
    build, holder, data = NAMING[kind]
    # No blob store at all yet, then one that holds nothing.
    _refused_unheld(store, build(), holder)
    blobs = SqlBlobStore(store)
    _refused_unheld(store, build(), holder)
    # The bytes under another holder, other bytes under this holder.
    blobs.put("cp:agent:other:9#snapshot", data)
    _refused_unheld(store, build(), holder)
    blobs.put(holder, data + b"!")
    _refused_unheld(store, build(), holder)
    # Put, then released before the record: refused too.
    blobs.put(holder, data)
    blobs.release(holder, _address(data))
    blobs.release("cp:agent:other:9#snapshot", _address(data))
    assert blobs.get(_address(data)) is None
    _refused_unheld(store, build(), holder)
    # Put first, as the runtime does: appended, and the trace verifies.
    blobs.put(holder, data)
    store.append(TRUSTED_APPEND_CONTEXT, _batch(build(), owner="agent:main"))
    report = verify_trace(store)
    assert report.ok, report.problems


def test_a_batch_with_one_unheld_blob_writes_nothing(
    store: SqlAlchemyTraceStore,  # noqa: F811 (a fixture)
) -> None:
    blobs = SqlBlobStore(store)
    blobs.put("cp:agent:main:1#snapshot", SNAPSHOT)
    before = dump(store)
    with pytest.raises(UnheldBlobError, match="out:agent:main:2#diff"):
        store.append(
            TRUSTED_APPEND_CONTEXT,
            AppendBatch(
                "i:both",
                (
                    AppendGroup("agent:main", fact_drafts=(_checkpoint(),)),
                    AppendGroup("agent:x", fact_drafts=(_step(),)),
                    AppendGroup("agent:main", fact_drafts=(_sealed(),)),
                ),
            ),
        )
    assert dump(store) == before


def test_a_replayed_intent_returns_its_receipt_after_the_release(
    store: SqlAlchemyTraceStore,  # noqa: F811 (a fixture)
) -> None:
    # Idempotency wins: an exact replay of a committed intent writes nothing
    # and so breaks no rule (the runtime releases a restored snapshot).
    blobs = SqlBlobStore(store)
    blobs.put("cp:agent:main:1#snapshot", SNAPSHOT)
    batch = _batch(_checkpoint(), owner="agent:main")
    first = store.append(TRUSTED_APPEND_CONTEXT, batch)
    blobs.release("cp:agent:main:1#snapshot", _address(SNAPSHOT))
    assert store.append(TRUSTED_APPEND_CONTEXT, batch) == first


_PUT = """
import sys
from goatherd.infrastructure.blobs.store import SqlBlobStore
from goatherd.infrastructure.store import open_trace_store
with open_trace_store(sys.argv[1]) as store:
    SqlBlobStore(store).put(sys.argv[2], sys.argv[3].encode())
"""


def test_bytes_put_by_another_process_let_the_record_in(
    store: SqlAlchemyTraceStore,  # noqa: F811 (a fixture)
) -> None:
    if store.engine.url.database in (None, "", ":memory:"):
        pytest.skip("a memory database has no other process")
    SqlBlobStore(store)  # this process's store knows the blob tables
    _refused_unheld(store, _checkpoint(), "cp:agent:main:1#snapshot")
    url = store.engine.url.render_as_string(hide_password=False)
    holder = "cp:agent:main:1#snapshot"
    subprocess.run(
        [sys.executable, "-c", _PUT, url, holder, SNAPSHOT.decode()], check=True
    )
    store.append(TRUSTED_APPEND_CONTEXT, _batch(_checkpoint(), owner="agent:main"))
    assert verify_trace(store).ok
