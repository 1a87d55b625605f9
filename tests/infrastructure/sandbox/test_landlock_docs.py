"""The per-ABI table of docs/containment.md agrees with the code."""

from __future__ import annotations

import re
from pathlib import Path

from goatherd.infrastructure.sandbox import LandlockBackend, landlock_abi

DOCS = Path(__file__).parents[3] / "docs" / "containment.md"


def expected_gaps(abi: int) -> set[str]:
    return {gap for gap, needs in (("truncate", 3), ("signals", 6)) if abi < needs}


def _rows() -> dict[int, list[str]]:
    rows = {}
    for line in DOCS.read_text().splitlines():
        if match := re.match(r"\|\s*(\d+)\s*\|", line):
            rows[int(match.group(1))] = [c.strip() for c in line.strip("|").split("|")]
    return rows


def test_the_docs_table_has_one_row_per_abi_and_five_columns() -> None:
    rows = _rows()
    assert sorted(rows) == list(range(8))
    assert {len(cells) for cells in rows.values()} == {5}


def test_the_docs_table_names_exactly_the_gaps_the_code_refuses() -> None:
    for abi, cells in _rows().items():
        named = set(re.findall(r'"(\w+)"', cells[3]))
        assert named == (expected_gaps(abi) if abi else set()), cells[3]
        if 1 <= abi <= landlock_abi():
            assert set(LandlockBackend(max_abi=abi).gaps()) == named


def test_the_docs_table_says_network_denial_is_refused_below_abi_4() -> None:
    for abi, cells in _rows().items():
        assert ("DENY` is refused" in cells[3]) == (1 <= abi < 4), cells[3]


def test_every_test_the_route_table_names_exists() -> None:
    text = DOCS.read_text()
    table = text.split("## Routes: what holds, and how it is tested", 1)[1]
    table = table.split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ")][2:]
    assert len(rows) >= 15
    tests = Path(__file__).parents[2]
    named = 0
    for row in rows:
        last = None
        for ref in re.findall(r"`([\w/]*\.py|)(::\w+(?:::\w+)?)?`", row.split("|")[3]):
            path, name = ref
            last = tests / path if path else last
            assert last is not None, f"{ref} in {row}"
            assert last.is_file(), f"{ref} in {row}"
            for part in name.split("::")[1:]:
                assert re.search(rf"(def|class) {part}\b", last.read_text()), part
                named += 1
    assert named >= 15
