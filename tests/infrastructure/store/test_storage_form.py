"""The stored body and the batch digest are every implementation's (issue 13, item 4).

Both use the storage flavour of canonical JSON: the reference's
``json.dumps(value, sort_keys=True, separators=(",", ":"))``, ASCII-escaped,
DEL (U+007F) included. Versions before schema v2 kept a raw DEL when the rest
of a payload was ASCII, so appending the same record again (another intent,
another owner) failed as a content clash, and their batch digests differ from
every other implementation's; replaying their intents still finds the stored
receipt.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import shutil
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from goatherd import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    RecordDraft,
)
from goatherd.infrastructure.store import SQLiteTraceStore
from tests.infrastructure.store.helpers import batch, dump

CTX = TRUSTED_APPEND_CONTEXT
FIXTURE = Path(__file__).parent / "fixtures" / "trace_v1.sqlite"
_COUNTER = itertools.count()

every_code_point = st.text(
    alphabet=st.characters(
        min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=["Cs"]
    ),
    max_size=24,
)


def reference_storage_json(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def reference_batch_digest(intent: str, owner: str, draft: RecordDraft) -> str:
    """kernel-spec 5.2, written out independently of the store's code."""
    obj = {
        "append_intent_id": intent,
        "atomicity": "atomic",
        "actor_ref": CTX.actor_ref,
        "schema_version_set": CTX.schema_version_set,
        "groups": [
            {
                "trace_owner_id": owner,
                "retained_context": {
                    "active_binding_refs": [],
                    "capability_witness_refs": [],
                    "semantic_environment_refs": [],
                    "visibility_policy_refs": [],
                    "substrate_ref": "sqlite.local.v1",
                    "containment": "contained",
                    "reuse_context_id": None,
                },
                "causal_parents": [],
                "fact_drafts": [
                    {
                        "append_local_id": None,
                        "kind_label": draft.kind_label,
                        "mode": draft.mode,
                        "schema_ref": draft.schema_ref,
                        "payload": dict(draft.payload),
                        "caused_by_fact_ids": [],
                        "caused_by_local_refs": [],
                    }
                ],
            }
        ],
    }
    return hashlib.sha256(reference_storage_json(obj).encode()).hexdigest()


@settings(max_examples=150, deadline=None)
@given(text=every_code_point, key=every_code_point)
@example(text="del \x7f here", key="k")
@example(text="\x7f", key="\x7f")
@example(text="caf\u00e9 \u2028 \U0001f600 \x00", key="")
def test_a_record_appended_twice_keeps_one_id_and_the_reference_storage_form(
    text: str, key: str
) -> None:
    payload = {"text": text, key: [text, 1, 1.5]}
    draft = RecordDraft("capture", "test.text.v1", payload, kind_label="text")
    n = next(_COUNTER)
    with SQLiteTraceStore() as store:
        first = store.append(CTX, batch(f"a:{n}", "exec:a", draft))
        # the same record under another intent and owner: no clash, one id
        second = store.append(CTX, batch(f"b:{n}", "exec:b", draft))
        assert second.fact_ids == first.fact_ids
        state = dump(store)
    (body,) = [row[6] for row in state["records"] if row[0] == first.fact_ids[0]]
    assert body == '{"payload":' + reference_storage_json(payload) + "}"
    assert json.loads(body) == {"payload": payload}
    digests = {row[0]: row[1] for row in state["append_intents"]}
    assert digests[f"a:{n}"] == reference_batch_digest(f"a:{n}", "exec:a", draft)
    assert digests[f"b:{n}"] == reference_batch_digest(f"b:{n}", "exec:b", draft)


def test_an_intent_a_previous_version_stored_with_a_raw_del_still_replays(
    tmp_path: Path,
) -> None:
    # The fixture's "fixture:two" carries "del \x7f here" (make_trace_v1.py).
    path = tmp_path / "trace.sqlite"
    shutil.copy(FIXTURE, path)
    with SQLiteTraceStore(path) as store:
        one = store.read_append_intent("fixture:one")
        stored = store.read_append_intent("fixture:two")
        assert one is not None
        assert stored is not None

        def step(n: int, text: str, parents: tuple[str, ...] = ()) -> RecordDraft:
            return RecordDraft(
                "capture",
                "fixture.step.v1",
                {"n": n, "text": text, "ratio": n / 4},
                kind_label="step",
                caused_by_fact_ids=parents,
            )

        replay = AppendBatch(
            "fixture:two",
            (
                AppendGroup(
                    "fixture:a",
                    causal_parents=(one.fact_ids[1],),
                    fact_drafts=(step(2, "del \x7f here"),),
                ),
                AppendGroup(
                    "fixture:b",
                    retained_context=one.context_receipts[0],
                    fact_drafts=(step(3, "astral \U0001f600", one.fact_ids),),
                ),
            ),
        )
        assert store.append(CTX, replay) == stored
        # and the DEL record appended again elsewhere is the same record
        again = store.append(
            CTX,
            AppendBatch(
                "fixture:again",
                (
                    AppendGroup(
                        "fixture:c",
                        causal_parents=(one.fact_ids[1],),
                        fact_drafts=(step(2, "del \x7f here"),),
                    ),
                ),
            ),
        )
        assert again.fact_ids[0] == stored.fact_ids[0]
