"""Fuzz ``import_trace`` with mutated lines of a real export.

Mutations hit any value of any line, and (a third of them) a value inside a
receipt, a context, a checkpoint or a blob line. A mutated file is refused
with :class:`ImportRejectedError` (nothing written: every table of the target
stays as it was) or, when the mutation touched nothing the export proves (the
snapshot bytes of a legacy checkpoint row, say), imported into a trace that
still verifies. The end line's digest is recomputed for half of the
mutations, so the line provers themselves must catch a forged id or an edited
payload, not just the file checksum.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.portability.jsonl import (
    ImportRejectedError,
    export_trace,
    import_trace,
)
from goatherd.infrastructure.store import SQLiteTraceStore
from tests.fuzz.strategies import any_text, json_values
from tests.fuzz.tables import table_rows
from tests.security.tamper_trace import build

_LINES: list[str] = []


@pytest.fixture(scope="module", autouse=True)
def _export(tmp_path_factory: pytest.TempPathFactory) -> None:
    path: Path = tmp_path_factory.mktemp("export") / "trace.sqlite"
    out = io.StringIO()
    with SQLiteTraceStore(path) as store:
        build(store)  # checkpoints with records and blobs, a ledger row
        export_trace(store, out)
    _LINES[:] = out.getvalue().splitlines(keepends=True)


def _reseal(lines: list[str]) -> list[str]:
    """Recompute the end line over the (mutated) lines before it."""
    body = [line for line in lines if '"type":"end"' not in line]
    digest = hashlib.sha256("".join(body).encode("utf-8")).hexdigest()
    head = json.loads(_LINES[-1])["head"]  # kept: a forger edits lines, not it
    end = json.dumps(
        {"head": head, "lines": len(body), "sha256": digest, "type": "end"},
        sort_keys=True,
        separators=(",", ":"),
    )
    return [*body, end + "\n"]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[head] = _replace(value[head], rest, new)
    return copy


@st.composite
def structural(draw: st.DrawFn) -> list[str]:
    """Replace one JSON value somewhere in one line."""
    lines = list(_LINES)
    index = draw(st.integers(0, len(lines) - 1))
    obj = json.loads(lines[index])
    path = draw(st.sampled_from(_paths(obj)))
    new = draw(json_values | any_text | st.sampled_from(("sha256:" + "0" * 64, "")))
    mutated = _replace(obj, path, new)
    lines[index] = json.dumps(mutated, sort_keys=True, separators=(",", ":")) + "\n"
    return lines


_FORGEABLE = (
    "receipt",
    "contexts",
    "state",
    "snapshot_b64",
    "scope_id",
    "seq",
    "data_b64",
    "holders",
)


@st.composite
def forged(draw: st.DrawFn) -> list[str]:
    """Replace a value inside a receipt, a context or a checkpoint line."""
    lines = list(_LINES)
    candidates = [
        (index, path)
        for index, line in enumerate(lines)
        for path in _paths(json.loads(line))
        if path and path[0] in _FORGEABLE
    ]
    index, path = draw(st.sampled_from(candidates))
    obj = json.loads(lines[index])
    new = draw(
        json_values
        | any_text
        | st.sampled_from(
            ("sha256:" + "0" * 64, "context:" + "0" * 32, "commit:0", "", [], {})
        )
    )
    lines[index] = (
        json.dumps(_replace(obj, path, new), sort_keys=True, separators=(",", ":"))
        + "\n"
    )
    return lines


@st.composite
def textual(draw: st.DrawFn) -> list[str]:
    """Edit characters of one line, or drop, duplicate or swap lines."""
    lines = list(_LINES)
    index = draw(st.integers(0, len(lines) - 1))
    kind = draw(st.sampled_from(("chars", "drop", "dup", "swap", "truncate")))
    if kind == "chars":
        line = lines[index]
        at = draw(st.integers(0, len(line)))
        cut = draw(st.integers(0, 4))
        lines[index] = line[:at] + draw(any_text) + line[at + cut :]
    elif kind == "drop":
        del lines[index]
    elif kind == "dup":
        lines.insert(index, lines[index])
    elif kind == "swap":
        other = draw(st.integers(0, len(lines) - 1))
        lines[index], lines[other] = lines[other], lines[index]
    else:
        lines = lines[:index]
    return lines


@given(structural() | forged() | textual(), st.booleans())
def test_mutated_exports_are_refused_writing_nothing_or_import_a_valid_trace(
    lines: list[str], reseal: bool
) -> None:
    if reseal:
        lines = _reseal(lines)
    with SQLiteTraceStore() as target:
        before = table_rows(target.engine)
        refusal: ImportRejectedError | None = None
        try:
            import_trace(lines, target)
        except ImportRejectedError as error:
            refusal = error
        if refusal is not None:
            assert str(refusal)
            assert table_rows(target.engine) == before
            return
        report = verify_trace(target)
        assert report.ok, report.problems


def test_the_unmutated_export_imports_and_verifies() -> None:
    with SQLiteTraceStore() as target:
        summary = import_trace(list(_LINES), target)
        assert summary.records > 0
        assert verify_trace(target).ok
