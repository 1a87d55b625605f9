"""An imported trace with forged ids (or any other unprovable line) is rejected.

Every forgery below re-seals the file (a correct end line over the forged
lines), so the refusal must come from the line provers recomputing identity,
not from the file checksum. Each refusal names the line and writes nothing.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from goatherd.infrastructure.portability import (
    ImportRejectedError,
    export_trace,
    import_trace,
)
from goatherd.infrastructure.store import SQLiteTraceStore
from tests.cli.conftest import build_trace
from tests.fuzz.tables import table_rows

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
    end = {"lines": len(body), "sha256": digest, "type": "end"}
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


FORGERIES: dict[str, Callable[[list[Obj]], None]] = {
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
