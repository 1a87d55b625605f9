"""Bad input is refused at the door, the same way on every backend (issue 13, item 4).

Every field of a draft with the wrong type, NUL, invalid text or over its size
limit is refused before anything runs, with one line naming the field; an
overflowing read argument is refused the same way; nothing is ever written.
Opening a store where none can live fails as an outage, leaving no file.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    BatchShapeError,
    ReadRequestError,
    RecordDraft,
    RetainedContextDraft,
    StoreUnavailableError,
)
from goatherd.infrastructure.store import (
    AppendLimits,
    SqlAlchemyTraceStore,
    SQLiteTraceStore,
    open_trace_store,
)
from tests.fuzz.tables import table_rows
from tests.infrastructure.store.helpers import batch, draft

CTX = TRUSTED_APPEND_CONTEXT


def _group(**fields: Any) -> AppendGroup:
    base: dict[str, Any] = {"trace_owner_id": "exec:a", "fact_drafts": (draft(1),)}
    base.update(fields)
    return AppendGroup(**base)


def _draft_with(**fields: Any) -> RecordDraft:
    base: dict[str, Any] = {"mode": "capture", "schema_ref": "s.v1", "payload": {}}
    base.update(fields)
    return RecordDraft(**base)


def _one(d: RecordDraft) -> AppendBatch:
    return AppendBatch("i:bad", (_group(fact_drafts=(d,)),))


BAD_BATCHES: dict[str, tuple[Callable[[], object], str]] = {
    "integer schema": (
        lambda: _one(_draft_with(schema_ref=7)),
        "schema_ref must be a string",
    ),
    "float schema": (
        lambda: _one(_draft_with(schema_ref=1.5)),
        "schema_ref must be a string",
    ),
    "integer intent": (
        lambda: AppendBatch(12, (_group(),)),  # type: ignore[arg-type]
        "append_intent_id must be a string",
    ),
    "bytes owner": (
        lambda: AppendBatch("i", (_group(trace_owner_id=b"exec:a"),)),
        "groups[0].trace_owner_id must be a string, got bytes",
    ),
    "list of groups items": (
        lambda: AppendBatch("i", ({"trace_owner_id": "x"},)),  # type: ignore[arg-type]
        "groups[0] must be a AppendGroup",
    ),
    "string parents": (
        lambda: AppendBatch("i", (_group(causal_parents="sha256:ab"),)),
        "causal_parents must be a tuple",
    ),
    "integer parent": (
        lambda: _one(_draft_with(caused_by_fact_ids=(1,))),
        "caused_by_fact_ids[0] must be a string",
    ),
    "integer kind": (
        lambda: _one(_draft_with(kind_label=3)),
        "kind_label must be a string",
    ),
    "integer local id": (
        lambda: _one(_draft_with(append_local_id=3)),
        "append_local_id must be a string",
    ),
    "dict context": (
        lambda: AppendBatch("i", (_group(retained_context={"x": 1}),)),
        "retained_context must be a RetainedContextDraft",
    ),
    "integer substrate": (
        lambda: AppendBatch(
            "i",
            (_group(retained_context=RetainedContextDraft(substrate_ref=1)),),  # type: ignore[arg-type]
        ),
        "retained_context.substrate_ref must be a string",
    ),
    "not a batch": (lambda: {"append_intent_id": "i"}, "batch must be an AppendBatch"),
    "NUL in owner": (
        lambda: AppendBatch("i", (_group(trace_owner_id="exec\x00a"),)),
        "trace_owner_id contains NUL",
    ),
    "NUL in schema": (lambda: _one(_draft_with(schema_ref="s\x00")), "contains NUL"),
    "NUL in intent": (
        lambda: AppendBatch("i\x00", (_group(),)),
        "append_intent_id contains NUL",
    ),
    "NUL in kind": (
        lambda: _one(_draft_with(kind_label="k\x00")),
        "kind_label contains NUL",
    ),
    "NUL in a context ref": (
        lambda: AppendBatch(
            "i",
            (
                _group(
                    retained_context=RetainedContextDraft(
                        active_binding_refs=("a\x00",)
                    )
                ),
            ),
        ),
        "active_binding_refs[0] contains NUL",
    ),
    "lone surrogate in owner": (
        lambda: AppendBatch("i", (_group(trace_owner_id="a\ud800"),)),
        "not valid text",
    ),
    "owner over the limit": (
        lambda: AppendBatch("i", (_group(trace_owner_id="o" * 1025),)),
        "trace_owner_id is 1025 bytes, over the store's 1024-byte limit",
    ),
    "multibyte owner over the limit": (
        # 513 characters, 1,026 bytes of UTF-8: the limit counts bytes.
        lambda: AppendBatch("i", (_group(trace_owner_id="\u00e9" * 513),)),
        "trace_owner_id is 1026 bytes, over the store's 1024-byte limit",
    ),
    "NUL in a local ref": (
        lambda: _one(_draft_with(caused_by_local_refs=("ok", "b\x00"))),
        "caused_by_local_refs[1] contains NUL",
    ),
    "NUL in a reused context id": (
        lambda: AppendBatch(
            "i",
            (_group(retained_context=RetainedContextDraft(reuse_context_id="c\x00")),),
        ),
        "retained_context.reuse_context_id contains NUL",
    ),
    "NUL in the second group's parents": (
        lambda: AppendBatch(
            "i", (_group(), _group(trace_owner_id="exec:b", causal_parents=("p\x00",)))
        ),
        "groups[1].causal_parents[0] contains NUL",
    ),
    "payload over the limit": (
        lambda: _one(_draft_with(payload={"x": "y" * (8 << 20)})),
        "payload is 8388616 bytes of JSON, over the store's 8388608-byte payload limit",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_BATCHES))
def test_a_bad_field_is_refused_naming_it_and_nothing_is_written(
    store: SqlAlchemyTraceStore, case: str
) -> None:
    build, message = BAD_BATCHES[case]
    store.append(CTX, batch("i:before", "exec:a", draft(0)))
    before = table_rows(store.engine)
    with pytest.raises(BatchShapeError, match=message.replace("[", r"\[")) as info:
        store.append(CTX, build())  # type: ignore[arg-type]
    assert "\n" not in str(info.value)
    assert table_rows(store.engine) == before
    # the preview refuses it the same way
    with pytest.raises(BatchShapeError):
        store.preview_record_ids(CTX, build())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "heads",
    [
        {"exec:a": -1},
        {"exec:a": 2**63},
        {"exec:a": True},
        {"exec:a": "1"},
        {1: 0},
        ["x"],
    ],
)
def test_bad_expected_heads_are_refused(
    store: SqlAlchemyTraceStore, heads: object
) -> None:
    with pytest.raises(BatchShapeError, match="expected_heads"):
        store.append(CTX, batch("i", "exec:a", draft(1)), expected_heads=heads)  # type: ignore[arg-type]
    assert store.read_append_intent("i") is None


class TestLimits:
    def test_limits_are_configurable_and_exact(self, tmp_path: Path) -> None:
        limits = AppendLimits(
            identifier_bytes=16, payload_bytes=12, batch_payload_bytes=30
        )
        with SQLiteTraceStore(tmp_path / "t.sqlite", limits=limits) as small:
            small.append(CTX, batch("i:1", "exec:ab", draft(payload={"v": 123})))
            with pytest.raises(BatchShapeError, match="over the store's 16-byte limit"):
                small.append(CTX, batch("i:2", "exec:" + "x" * 12, draft(1)))
            with pytest.raises(BatchShapeError, match="12-byte payload limit"):
                small.append(CTX, batch("i:3", "exec:a", draft(payload={"v": 1234567})))
            many = batch("i:4", "exec:a", *(draft(payload={"v": n}) for n in range(5)))
            with pytest.raises(BatchShapeError, match="30-byte batch limit"):
                small.append(CTX, many)

    def test_limits_themselves_are_checked(self) -> None:
        with pytest.raises(ValueError, match="payload_bytes must be a positive int"):
            AppendLimits(payload_bytes=0)

    def test_the_defaults_take_a_large_but_sane_payload(self, tmp_path: Path) -> None:
        with SQLiteTraceStore(tmp_path / "t.sqlite") as store:
            receipt = store.append(
                CTX, batch("i", "exec:a", draft(payload={"x": "y" * (4 << 20)}))
            )
            assert receipt.fact_ids


class TestReadArguments:
    @pytest.mark.parametrize(
        ("call", "message"),
        [
            (
                lambda s: s.read_log(after=2**70),
                "after must be an int from -1 to 2\\*\\*63-1",
            ),
            (lambda s: s.read_log(after="0"), "after must be an int"),
            (lambda s: s.read_log(limit=2**64), "limit must be an int"),
            (lambda s: s.read_log(schema_refs=["a\x00"]), "schema ref contains NUL"),
            (lambda s: s.read_path("exec\x00a"), "owner contains NUL"),
            (lambda s: s.read_path("exec:a", after_ordinal=2**63), "after_ordinal"),
            (lambda s: s.head("a\x00"), "owner contains NUL"),
            (lambda s: s.read_append_intent(5), "intent_id must be a string"),
            (lambda s: s.scan_records_by_schema("s\x00"), "schema ref contains NUL"),
        ],
    )
    def test_an_overflowing_or_mistyped_argument_is_a_clear_read_error(
        self, store: SqlAlchemyTraceStore, call: Callable[[Any], object], message: str
    ) -> None:
        with pytest.raises(ReadRequestError, match=message) as info:
            call(store)
        assert "\n" not in str(info.value)


class TestDecisions:
    def test_an_empty_batch_records_its_intent_with_an_empty_receipt(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        # kernel-spec 5.6 pins it; the commit chain covers the intent row
        receipt = store.append(CTX, AppendBatch("i:empty", (AppendGroup("exec:a"),)))
        assert receipt.fact_ids == ()
        assert receipt.owner_ordinal_ranges == {}
        assert store.read_append_intent("i:empty") == receipt
        assert store.max_position() == -1
        assert store.trace_head().commits == 1

    def test_the_same_record_twice_on_one_path_is_one_record_at_two_ordinals(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        # ADR 0039: an event can happen twice in an aggregate's stream (the
        # eventsourcing suite does it); each entry has its own ordinal,
        # position and place in the chain.
        receipt = store.append(CTX, batch("i:dup", "exec:a", draft(1), draft(1)))
        assert receipt.fact_ids[0] == receipt.fact_ids[1]
        assert receipt.owner_ordinal_ranges == {"exec:a": (0, 1)}
        assert receipt.commit_receipts == ("commit:0", "commit:1")
        assert store.fact_count() == 2 + 1
        assert store.verify_chain().ok

    def test_the_same_record_on_two_paths_in_one_batch_is_one_record(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        receipt = store.append(
            CTX,
            AppendBatch(
                "i:two",
                (
                    AppendGroup("exec:a", fact_drafts=(draft(1),)),
                    AppendGroup("exec:b", fact_drafts=(draft(1),)),
                ),
            ),
        )
        assert receipt.fact_ids[0] == receipt.fact_ids[1]
        assert store.fact_count() == 2 + 1  # two witnesses, one record


# ---------------------------------------------------------------- opening


class TestOpeningWhereNoTraceCanLive:
    def test_a_directory_is_an_outage_in_one_line(self, tmp_path: Path) -> None:
        with pytest.raises(StoreUnavailableError, match="it is a directory") as info:
            SQLiteTraceStore(tmp_path)
        assert "\n" not in str(info.value)
        assert "sqlalche.me" not in str(info.value)

    def test_a_missing_directory_is_an_outage_and_creates_nothing(
        self, tmp_path: Path
    ) -> None:
        target = tmp_path / "absent" / "trace.sqlite"
        with pytest.raises(StoreUnavailableError, match="does not exist"):
            open_trace_store(target)
        assert not (tmp_path / "absent").exists()

    def test_a_full_disk_at_creation_is_an_outage_and_leaves_no_file(
        self, full_disk: Path
    ) -> None:
        target = full_disk / "trace.sqlite"
        # SQLite reports ENOSPC as "database or disk is full" or "disk I/O error"
        with pytest.raises(StoreUnavailableError, match=r"full|disk I/O") as info:
            SQLiteTraceStore(target)
        assert "\n" not in str(info.value)
        assert sorted(p.name for p in full_disk.iterdir()) == ["ballast"]


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 48 KiB tmpfs, almost full (needs root; skipped otherwise)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tiny tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=48k", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        (mount / "ballast").write_bytes(b"x" * 36 * 1024)
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


_SMALL = AppendLimits(identifier_bytes=12)
_FIELDS: dict[str, Callable[[object], AppendBatch]] = {
    "append_intent_id": lambda v: AppendBatch(v, (_group(),)),  # type: ignore[arg-type]
    "groups[0].trace_owner_id": lambda v: AppendBatch("i", (_group(trace_owner_id=v),)),
    "groups[0].fact_drafts[0].kind_label": lambda v: _one(_draft_with(kind_label=v)),
    "groups[0].fact_drafts[0].append_local_id": lambda v: _one(
        _draft_with(append_local_id=v)
    ),
    "groups[0].retained_context.substrate_ref": lambda v: AppendBatch(
        "i",
        (_group(retained_context=RetainedContextDraft(substrate_ref=v)),),  # type: ignore[arg-type]
    ),
}


def _valid(value: object) -> bool:
    if not isinstance(value, str) or "\x00" in value:
        return False
    try:
        return len(value.encode("utf-8")) <= _SMALL.identifier_bytes
    except UnicodeEncodeError:
        return False


@settings(max_examples=300, deadline=None)
@given(
    field=st.sampled_from(sorted(_FIELDS)),
    value=st.one_of(
        st.text(min_size=1, max_size=14),
        st.text(alphabet=st.characters(codec="ascii"), min_size=1, max_size=14),
        st.integers(),
        st.binary(max_size=4),
    ),
)
def test_a_field_is_refused_exactly_when_it_is_not_text_within_the_limit(
    field: str, value: object
) -> None:
    # Valid ASCII takes the door's quick pass; anything else (non-ASCII, NUL, a
    # lone surrogate, bytes over the limit, another type) the naming walk.
    batch = _FIELDS[field](value)
    with SQLiteTraceStore(limits=_SMALL) as store:
        if _valid(value):
            assert len(store.preview_record_ids(CTX, batch)) == 1
        else:
            with pytest.raises(BatchShapeError) as info:
                store.preview_record_ids(CTX, batch)
            assert str(info.value).startswith(field + " "), str(info.value)
