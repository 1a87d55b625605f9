"""The shipped documents are titled by what they describe.

A reader of the package cannot open the project's issue tracker, so a title
(or an anchor another document links to) that names an issue number tells
them nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ISSUE = re.compile(r"\bissues?[ -]#?\d+|#\d+\b", re.IGNORECASE)


def _documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_no_document_title_names_an_issue() -> None:
    found = [
        f"{doc.name}:{number}: {line}"
        for doc in _documents()
        for number, line in enumerate(doc.read_text().splitlines(), 1)
        if line.startswith("#") and ISSUE.search(line)
    ]
    assert found == []


def test_no_link_points_at_an_issue_anchor() -> None:
    found = [
        f"{doc.name}: {link}"
        for doc in _documents()
        for link in re.findall(r"\]\(([^)]*#[^)]*issue-\d+[^)]*)\)", doc.read_text())
    ]
    assert found == []


def test_the_pattern_sees_an_issue_title() -> None:
    assert ISSUE.search("## Store throughput (issue 15)")
    assert not ISSUE.search("## Store throughput")
