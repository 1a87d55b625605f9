"""The README's Python tour runs as written, block after block, on a real git repo."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _git(repo: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "readme",
        "GIT_AUTHOR_EMAIL": "readme@example.invalid",
        "GIT_COMMITTER_NAME": "readme",
        "GIT_COMMITTER_EMAIL": "readme@example.invalid",
    }
    subprocess.run(["git", *args], cwd=repo, check=True, env=env, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    _git(path, "init", "-q", "-b", "main")
    (path / "README.txt").write_text("a project the agents work on\n")
    _git(path, "add", "-A")
    _git(path, "commit", "-qm", "start")
    return path


def test_the_readme_has_a_python_tour() -> None:
    assert len(BLOCK.findall(README.read_text(encoding="utf-8"))) >= 9


@pytest.mark.integration
def test_the_readme_tour_runs_in_order(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    namespace: dict[str, object] = {"repo": str(repo), "__name__": "readme"}
    blocks = BLOCK.findall(README.read_text(encoding="utf-8"))
    for index, block in enumerate(blocks):
        code = compile(block, f"README.md python block {index + 1}", "exec")
        exec(code, namespace)
    # The last block ran to its end: the whole tour did.
    assert namespace["run"] is not None
    assert (repo / "answer.txt").read_text() == "answer 1\n"
