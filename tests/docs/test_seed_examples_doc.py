"""docs/seed-api.md's translated seed examples run as written, block after block."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import goatherd
from tests.integration.runtime.support import make_repo

DOC = Path(__file__).resolve().parents[2] / "docs" / "seed-api.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def test_the_page_has_the_seed_examples() -> None:
    assert len(BLOCK.findall(DOC.read_text(encoding="utf-8"))) >= 7


@pytest.mark.integration
def test_the_seed_examples_run_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo", {"app.py": b"v1\n"})
    (repo / "app.py").write_bytes(b"v2, not committed\n")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    namespace: dict[str, object] = {
        "repo": str(repo),
        "goatherd": goatherd,
        "__name__": "seed_examples",
    }
    for index, block in enumerate(BLOCK.findall(DOC.read_text(encoding="utf-8"))):
        exec(
            compile(block, f"docs/seed-api.md python block {index + 1}", "exec"),
            namespace,
        )
    assert namespace["receipt"] is not None
