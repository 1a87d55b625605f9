"""An imported trace with forged ids (or any other unprovable line) is rejected.

Every forgery below re-seals the file (a correct end line over the forged
lines), so the refusal must come from the line provers recomputing identity,
not from the file checksum. Each refusal names the line and writes nothing.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.portability.jsonl import (
    ImportRejectedError,
    export_trace,
    import_trace,
)
from goatherd.infrastructure.portability.trace_import import read_export_lines
from goatherd.infrastructure.store import SQLiteTraceStore
from tests.cli.conftest import build_trace
from tests.fuzz.tables import table_rows
from tests.security.tamper_trace import Ids, build

Obj = dict[str, Any]


@pytest.fixture
def lines(tmp_path: Path) -> list[Obj]:
    path = tmp_path / "trace.sqlite"
    build_trace(path)
    out = io.StringIO()
    with SQLiteTraceStore(path) as store:
        export_trace(store, out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def sealed(objs: list[Obj]) -> list[str]:
    body = [
        json.dumps(o, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"
        for o in objs
        if o["type"] != "end"
    ]
    digest = hashlib.sha256("".join(body).encode("utf-8")).hexdigest()
    head = next(o["head"] for o in objs if o["type"] == "end")
    end = {"head": head, "lines": len(body), "sha256": digest, "type": "end"}
    return [*body, json.dumps(end, sort_keys=True, separators=(",", ":")) + "\n"]


def intent(objs: list[Obj], n: int) -> Obj:
    return [o for o in objs if o["type"] == "intent"][n]


def ordinary(record: Obj) -> bool:
    return not record["schema_ref"].startswith("kernel.witness")


FAKE = "sha256:" + "ab" * 32


def forge_record_id(objs: list[Obj]) -> None:
    first = intent(objs, 0)
    record = next(r for r in first["records"] if ordinary(r))
    old = record["record_id"]
    text = json.dumps(first).replace(old, FAKE)
    first.clear()
    first.update(json.loads(text))


def edit_payload(objs: list[Obj]) -> None:
    record = next(r for r in intent(objs, 0)["records"] if ordinary(r))
    record["payload"]["cmd"] = "rm -rf /"


def forge_witness(objs: list[Obj]) -> None:
    record = next(r for r in intent(objs, 0)["records"] if not ordinary(r))
    record["payload"]["actor_ref"] = "attacker"


def drop_parent(objs: list[Obj]) -> None:
    record = next(r for r in intent(objs, 1)["records"] if r["caused_by"])
    record["caused_by"] = [FAKE]


def reorder_intents(objs: list[Obj]) -> None:
    a = objs.index(intent(objs, 0))
    b = objs.index(intent(objs, 1))
    objs[a], objs[b] = objs[b], objs[a]


def forge_receipt(objs: list[Obj]) -> None:
    intent(objs, 0)["receipt"]["fact_ids"] = [FAKE]


def forge_position(objs: list[Obj]) -> None:
    entry = next(e for e in intent(objs, 1)["entries"] if e["position"] is not None)
    entry["position"] += 5
    entry["commit_receipt"] = f"commit:{entry['position']}"


def witness_entry_with_context(objs: list[Obj]) -> None:
    entry = next(e for e in intent(objs, 0)["entries"] if e["position"] is None)
    entry["retained_context_ref"] = intent(objs, 0)["contexts"][0]["context_id"]


def duplicate_checkpoint(objs: list[Obj]) -> None:
    checkpoint = next(o for o in objs if o["type"] == "checkpoint")
    objs.insert(objs.index(checkpoint), dict(checkpoint))


def oversized_checkpoint_seq(objs: list[Obj]) -> None:
    next(o for o in objs if o["type"] == "checkpoint")["seq"] = 2**64


def state_not_an_object(objs: list[Obj]) -> None:
    next(o for o in objs if o["type"] == "checkpoint")["state"] = "r1"


def forge_frontier(objs: list[Obj]) -> None:
    frontier = next(o for o in objs if o["type"] == "intent" and o["frontiers"])
    frontier["frontiers"][0]["through_owner_ordinal"] = 7


def forge_owner_range(objs: list[Obj]) -> None:
    intent(objs, 1)["receipt"]["owner_ordinal_ranges"]["other"] = [0, 1]


def forge_causal_edges(objs: list[Obj]) -> None:
    intent(objs, 1)["receipt"]["causal_edges"] = []


def forge_context(objs: list[Obj]) -> None:
    intent(objs, 0)["contexts"][0]["capability_witness_refs"] = ["trusted:internal"]


def forge_context_id(objs: list[Obj]) -> None:
    first = intent(objs, 0)
    old = first["contexts"][0]["context_id"]
    text = json.dumps(first).replace(old, "context:" + "0" * 32)
    first.clear()
    first.update(json.loads(text))


def forge_batch_digest(objs: list[Obj]) -> None:
    intent(objs, 0)["batch_digest"] = "not-a-digest"


def duplicate_intent_line(objs: list[Obj]) -> None:
    objs.insert(
        objs.index(intent(objs, 1)) + 1, json.loads(json.dumps(intent(objs, 1)))
    )


def forge_witness_kind(objs: list[Obj]) -> None:
    entry = next(e for e in intent(objs, 0)["entries"] if e["position"] is None)
    entry["kind_label"] = "tool:harmless"


FORGERIES: dict[str, Callable[[list[Obj]], None]] = {
    "forged owner ordinal range": forge_owner_range,
    "forged causal edges in the receipt": forge_causal_edges,
    "forged context content": forge_context,
    "forged context id": forge_context_id,
    "malformed batch digest": forge_batch_digest,
    "duplicate intent line": duplicate_intent_line,
    "forged witness kind label": forge_witness_kind,
    "forged record id": forge_record_id,
    "edited payload": edit_payload,
    "forged witness body": forge_witness,
    "unknown causal parent": drop_parent,
    "reordered intents": reorder_intents,
    "forged receipt": forge_receipt,
    "skipped log position": forge_position,
    "witness entry citing a context": witness_entry_with_context,
    "duplicate checkpoint line": duplicate_checkpoint,
    "checkpoint seq beyond 64 bits": oversized_checkpoint_seq,
    "workspace state not an object": state_not_an_object,
    "frontier index disagreeing with its record": forge_frontier,
}


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_a_forged_export_is_rejected_naming_its_line_and_nothing_is_written(
    lines: list[Obj], name: str
) -> None:
    FORGERIES[name](lines)
    with SQLiteTraceStore() as target:
        before = table_rows(target.engine)
        with pytest.raises(ImportRejectedError, match=r"^line \d+: ") as refused:
            import_trace(sealed(lines), target)
        assert refused.value.line > 1
        assert table_rows(target.engine) == before


def test_the_unforged_export_resealed_the_same_way_imports(lines: list[Obj]) -> None:
    with SQLiteTraceStore() as target:
        summary = import_trace(sealed(lines), target)
    assert summary.records == len(
        {r["record_id"] for o in lines if o["type"] == "intent" for r in o["records"]}
    )


# ------------------------------------------- a trace with real checkpoints


@pytest.fixture(scope="module")
def rich(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Obj], Ids]:
    path = tmp_path_factory.mktemp("rich") / "trace.sqlite"
    with SQLiteTraceStore(path) as store:
        ids = build(store)
        out = io.StringIO()
        export_trace(store, out)
    return [json.loads(line) for line in out.getvalue().splitlines()], ids


def checkpoint_line(objs: list[Obj], checkpoint_id: str) -> Obj:
    return next(
        o
        for o in objs
        if o["type"] == "checkpoint" and o["checkpoint_id"] == checkpoint_id
    )


def forge_checkpoint_tree(objs: list[Obj], ids: Ids) -> None:
    # the tree of checkpoint B restored in place of A's
    forged = checkpoint_line(objs, ids.checkpoint_a)
    forged["state"] = checkpoint_line(objs, ids.checkpoint_b)["state"]


def forge_checkpoint_snapshot(objs: list[Obj], ids: Ids) -> None:
    checkpoint_line(objs, ids.checkpoint_a)["snapshot_b64"] = ""


def forge_checkpoint_scope(objs: list[Obj], ids: Ids) -> None:
    checkpoint_line(objs, ids.checkpoint_a)["scope_id"] = "scope:agent:main"


def forge_produced(objs: list[Obj], ids: Ids) -> None:
    ledger = next(o for o in objs if o["type"] == "materialization")
    ledger["receipt"]["produced_record_ids"] = [ids.note]


def forge_substrate(objs: list[Obj], ids: Ids) -> None:
    del ids
    next(o for o in objs if o["type"] == "materialization")["receipt"][
        "substrate_ref"
    ] = ""


def forge_publisher(objs: list[Obj], ids: Ids) -> None:
    line = next(o for o in objs if o["type"] == "intent" and o["frontiers"])
    line["frontiers"][0]["publisher_trace_owner_id"] = "other"


def blob_lines(objs: list[Obj]) -> list[Obj]:
    return [o for o in objs if o["type"] == "blob"]


def forge_blob_bytes(objs: list[Obj], ids: Ids) -> None:
    del ids
    blob_lines(objs)[0]["data_b64"] = base64.b64encode(b"forged").decode()


def forge_blob_holder(objs: list[Obj], ids: Ids) -> None:
    del ids
    first, second = blob_lines(objs)[:2]
    first["holders"], second["holders"] = second["holders"], first["holders"]


def drop_blob_line(objs: list[Obj], ids: Ids) -> None:
    del ids
    objs.remove(blob_lines(objs)[0])


def unheld_blob(objs: list[Obj], ids: Ids) -> None:
    del ids
    blob_lines(objs)[0]["holders"] = []


RICH_FORGERIES: dict[str, Callable[[list[Obj], Ids], None]] = {
    "blob line with other bytes": forge_blob_bytes,
    "blob lines with swapped holders": forge_blob_holder,
    "a blob line missing": drop_blob_line,
    "a blob line without holders": unheld_blob,
    "checkpoint line with another checkpoint's tree": forge_checkpoint_tree,
    "checkpoint line without its snapshot": forge_checkpoint_snapshot,
    "checkpoint line on another scope": forge_checkpoint_scope,
    "materialization claiming other captures": forge_produced,
    "materialization naming another substrate": forge_substrate,
    "frontier row with another publisher": forge_publisher,
}


@pytest.mark.parametrize("name", sorted(RICH_FORGERIES))
def test_forged_checkpoint_and_ledger_lines_are_rejected(
    rich: tuple[list[Obj], Ids], name: str
) -> None:
    objs = json.loads(json.dumps(rich[0]))
    RICH_FORGERIES[name](objs, rich[1])
    with SQLiteTraceStore() as target:
        before = table_rows(target.engine)
        with pytest.raises(ImportRejectedError, match=r"^line \d+: ") as refused:
            import_trace(sealed(objs), target)
        assert refused.value.line > 1
        assert table_rows(target.engine) == before


def test_the_rich_export_imports_and_verifies(rich: tuple[list[Obj], Ids]) -> None:
    with SQLiteTraceStore() as target:
        summary = import_trace(sealed(rich[0]), target)
        assert (summary.checkpoints, summary.blobs) == (2, 3)
        assert verify_trace(target).ok


def test_a_line_nested_100000_deep_is_refused_naming_its_line(
    lines: list[Obj],
) -> None:
    text = sealed(lines)
    deep = '{"type":"intent","x":' + "[" * 100_000 + "]" * 100_000 + "}\n"
    text.insert(2, deep)
    refused = pytest.raises(ImportRejectedError, match=r"^line 3: .*nests JSON deeper")
    with SQLiteTraceStore() as target, refused:
        import_trace(text, target)


def test_a_line_over_the_limit_is_refused_without_reading_it_whole(
    lines: list[Obj],
) -> None:
    body = "".join(sealed(lines)).encode()
    long_line = b'{"type":"intent","pad":"' + b"x" * 5_000_000 + b'"}\n'
    stream = CountingStream(long_line + body)
    refused = pytest.raises(ImportRejectedError, match=r"^line 1: .*than 1000000")
    with SQLiteTraceStore() as target, refused:
        import_trace(read_export_lines(stream, 1_000_000), target)
    assert max(stream.sizes) <= 1_000_001


class CountingStream(io.BytesIO):
    """A byte stream that remembers how much each ``readline`` returned."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.sizes: list[int] = []

    def readline(self, size: int | None = -1, /) -> bytes:
        data = super().readline(size)
        self.sizes.append(len(data))
        return data


def test_an_end_line_without_a_head_is_refused(lines: list[Obj]) -> None:
    # Without the head the chain goes unchecked: any field only the chain
    # covers could be edited with nothing but the file's SHA-256 redone.
    text = sealed(lines)
    end = json.loads(text[-1])
    del end["head"]
    text[-1] = json.dumps(end, sort_keys=True, separators=(",", ":")) + "\n"
    with SQLiteTraceStore() as target:
        before = table_rows(target.engine)
        with pytest.raises(ImportRejectedError, match="names no head"):
            import_trace(text, target)
        assert table_rows(target.engine) == before


def test_a_duplicate_key_is_refused_naming_the_line(lines: list[Obj]) -> None:
    text = sealed(lines)
    number = next(n for n, line in enumerate(text) if '"payload":{' in line)
    # A second "payload" inside a record: a reader keeping the first would
    # see other content than one keeping the last.
    text[number] = text[number].replace('"payload":{', '"payload":{},"payload":{', 1)
    body = "".join(text[:-1]).encode("utf-8")
    end = json.loads(text[-1])
    end["sha256"] = hashlib.sha256(body).hexdigest()
    text[-1] = json.dumps(end, sort_keys=True, separators=(",", ":")) + "\n"
    with (
        SQLiteTraceStore() as target,
        pytest.raises(
            ImportRejectedError, match=rf"^line {number + 1}: duplicate key 'payload'"
        ),
    ):
        import_trace(text, target)


@pytest.mark.parametrize("where", ["line", "record", "entry", "context", "header"])
def test_an_unknown_key_is_refused_not_dropped(lines: list[Obj], where: str) -> None:
    first = intent(lines, 0)
    target_obj = {
        "line": first,
        "record": first["records"][0],
        "entry": first["entries"][0],
        "context": first["contexts"][0],
        "header": lines[0],
    }[where]
    target_obj["extra"] = "hidden"
    with (
        SQLiteTraceStore() as target,
        pytest.raises(ImportRejectedError, match=r"unknown key.*'extra'"),
    ):
        import_trace(sealed(lines), target)


def test_an_identifier_over_the_append_limit_is_refused(lines: list[Obj]) -> None:
    entry = next(e for e in intent(lines, 0)["entries"] if e["position"] is not None)
    entry["kind_label"] = "k" * (1 << 20)
    with (
        SQLiteTraceStore() as target,
        pytest.raises(ImportRejectedError, match="kind_label is 1048576 bytes"),
    ):
        import_trace(sealed(lines), target)
