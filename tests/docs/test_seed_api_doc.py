"""``docs/seed-api.md`` lists every seed API with the Python name that provides it.

The seed's names are frozen in ``seed_api_names.txt`` (the exported names of the
kernel's and the runtime's API indexes, and the subpackage names the runtime's
README uses): the table must list each exactly once. Every Python name must
resolve through the public ``goatherd`` package, as a name of the facade or of
a layer package's ``__all__``, and every constant must have the seed's value.
A name goatherd does not provide says why.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import NamedTuple

import pytest

import goatherd

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "seed-api.md"
NAMES = Path(__file__).with_name("seed_api_names.txt")
LAYERS = ("domain", "application", "projections", "infrastructure")
ROW = re.compile(r"^\| `([\w./]+)` \| (—|`[\w.]+`) \| (`[^`]*`)? \| (.*) \|$")


class Row(NamedTuple):
    seed: str
    python: str | None
    value: str | None
    note: str


def rows() -> list[Row]:
    found = []
    for line in DOC.read_text().splitlines():
        if not line.startswith("| `"):
            continue
        match = ROW.match(line)
        assert match is not None, f"a malformed row in docs/seed-api.md: {line}"
        seed, python, value, note = match.groups()
        found.append(
            Row(
                seed,
                None if python == "—" else python.strip("`"),
                None if value is None else value.strip("`"),
                note.strip(),
            )
        )
    return found


ROWS = rows()
PROVIDED = [row for row in ROWS if row.python is not None]


def resolve(dotted: str) -> object:
    """Import the longest module prefix of ``dotted``, then get the attributes."""
    parts = dotted.split(".")
    obj: object = importlib.import_module(parts[0])
    for index, part in enumerate(parts[1:], start=1):
        if hasattr(obj, part):
            obj = getattr(obj, part)
        else:
            obj = importlib.import_module(".".join(parts[: index + 1]))
    return obj


def test_every_seed_name_is_listed_once() -> None:
    expected = [
        line
        for line in NAMES.read_text().splitlines()
        if line and not line.startswith("#")
    ]
    listed = [row.seed for row in ROWS]
    duplicates = sorted({name for name in listed if listed.count(name) > 1})
    assert duplicates == []
    assert sorted(set(expected) - set(listed)) == [], "seed names missing"
    assert sorted(set(listed) - set(expected)) == [], "names the seed does not have"


def test_a_name_goatherd_does_not_provide_says_why() -> None:
    missing = [row for row in ROWS if row.python is None]
    assert all(row.note for row in missing)
    assert len(missing) <= 6, [row.seed for row in missing]


@pytest.mark.parametrize("row", PROVIDED, ids=lambda row: row.seed)
def test_the_python_name_is_public_and_resolves(row: Row) -> None:
    assert row.python is not None
    parts = row.python.split(".")
    assert parts[0] == "goatherd"
    if parts[1] in LAYERS:  # public where the layer exports it
        layer = importlib.import_module(f"goatherd.{parts[1]}")
        assert parts[2] in layer.__all__, row.python
    else:
        assert parts[1] in goatherd.__all__, row.python
    resolve(row.python)


@pytest.mark.parametrize(
    "row", [row for row in PROVIDED if row.value is not None], ids=lambda r: r.seed
)
def test_a_constant_has_the_seeds_value(row: Row) -> None:
    assert row.python is not None
    assert row.value is not None
    obj = resolve(row.python)
    if row.value.startswith('"'):
        expected = row.value[1:-1]
        if isinstance(obj, tuple):  # a Go string enum kept as allowed values
            assert expected in obj
        else:
            assert isinstance(obj, str)
            assert obj == expected
    else:
        assert obj == int(row.value)


def test_the_facade_exports_every_top_level_name_the_table_uses() -> None:
    top = {row.python.split(".")[1] for row in PROVIDED if row.python is not None}
    assert sorted(top - set(goatherd.__all__) - set(LAYERS)) == []
    for name in top - set(LAYERS):
        assert getattr(goatherd, name) is not None
