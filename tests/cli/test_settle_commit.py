"""``goatherd settle OUTPUT select|apply --commit`` and ``goatherd show COMMIT``.

A session recorded with the Python API (a git project, a root in place, two
isolated attempts sealed); the CLI then settles one as a commit, as a new
process would, and ``show`` leads from the commit back to the output and its
settlement. SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from goatherd.cli import main
from tests.cli.test_lifecycle import _session
from tests.infrastructure.backends import durable_store_url

__all__ = ["durable_store_url"]

pytestmark = pytest.mark.integration
AUTHOR = "Grace Hopper <grace@example.com>"


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _json(capsys, *argv: str) -> Any:
    code, out, err = _run(capsys, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    )
    return done.stdout


@pytest.fixture
def session(durable_store_url: str, tmp_path: Path) -> tuple[str, dict[str, str]]:
    return durable_store_url, _session(durable_store_url, tmp_path)


def test_settle_select_commit_then_show_the_commit(session, capsys, monkeypatch):
    db, ids = session
    repo = Path(ids["repo"])
    before = _git(repo, "rev-parse", "HEAD").strip()
    where = ["--db", db, "--workspace", str(repo)]
    code, out, err = _run(
        capsys, "settle", ids["out1"], "select", "--commit", "--author", AUTHOR, *where
    )
    assert code == 0, err
    head = _git(repo, "rev-parse", "HEAD").strip()
    assert head != before
    assert _git(repo, "rev-parse", "HEAD~1").strip() == before
    assert out.strip() == f"settled {ids['out1']}: selected; committed {head}"
    assert (repo / "app.txt").read_text() == "attempt 1\n"
    trailers = _git(repo, "log", "-1", "--format=%(trailers)")
    assert f"Goatherd-Output: {ids['out1']}" in trailers
    assert "Goatherd-Trace-Head: " in trailers
    assert _git(repo, "log", "-1", "--format=%an <%ae>").strip() == AUTHOR

    shown = _json(capsys, "show", head, "--repo", str(repo), "--db", db)
    assert shown["commit"] == head
    assert shown["output"] == ids["out1"]
    assert shown["scope"] == ids["scope1"]
    assert shown["state"] == "selected"
    assert shown["recorded_commit"] == head
    settlement = shown["settlement"]
    record = _json(capsys, "show", settlement, "--db", db)
    assert record["schema_ref"] == "goatherd.run_output.settled.v1"

    # From inside the repository, a short revision is enough.
    monkeypatch.chdir(repo)
    code, text, err = _run(capsys, "show", "HEAD", "--db", db)
    assert code == 0, err
    assert f"output     {ids['out1']}  (selected)" in text
    assert "the trace records this commit" in text


def test_settle_apply_commit_with_a_message(session, capsys):
    db, ids = session
    repo = Path(ids["repo"])
    where = ["--db", db, "--workspace", str(repo)]
    data = _json(
        capsys,
        "settle",
        ids["out0"],
        "apply",
        "--commit",
        "-m",
        "Attempt zero wins",
        "--author",
        AUTHOR,
        *where,
    )
    head = _git(repo, "rev-parse", "HEAD").strip()
    assert data == {
        "output": ids["out0"],
        "scope": ids["scope0"],
        "state": "applied",
        "commit": head,
    }
    assert _git(repo, "log", "-1", "--format=%s").strip() == "Attempt zero wins"
    assert _git(repo, "status", "--porcelain").strip() == ""


def test_refusals_name_the_command_that_works(session, capsys, tmp_path):
    db, ids = session
    repo = Path(ids["repo"])
    where = ["--db", db, "--workspace", str(repo)]
    code, _, err = _run(capsys, "settle", ids["out0"], "select", "-m", "x", *where)
    assert code == 2
    assert "--message and --author go with --commit" in err
    _git(repo, "checkout", "-q", "--detach")
    code, _, err = _run(
        capsys, "settle", ids["out0"], "select", "--commit", "--author", AUTHOR, *where
    )
    assert code == 1
    assert "detached" in err
    assert "nothing was settled" in err
    assert f"`goatherd settle {ids['out0']} select --db" in err
    _git(repo, "checkout", "-q", "main")
    # A commit goatherd did not make, and one the trace does not know.
    (repo / "other.txt").write_text("mine\n")
    _git(repo, "add", "other.txt")
    _git(
        repo, "-c", "user.name=u", "-c", "user.email=u@example.com",
        "commit", "-qm", "by hand",
    )  # fmt: skip
    code, _, err = _run(capsys, "show", "HEAD", "--repo", str(repo), "--db", db)
    assert code == 1
    assert "no Goatherd-Output trailer" in err
    code, _, err = _run(capsys, "show", "nope", "--repo", str(repo), "--db", db)
    assert code == 1
    assert "names no commit" in err


def test_nothing_to_commit_names_the_resume_command(session, capsys):
    db, ids = session
    repo = Path(ids["repo"])
    where = ["--db", db, "--workspace", str(repo)]
    code, _, err = _run(
        capsys, "settle", ids["out1"], "select", "--resume", "9", *where
    )
    assert code == 0, err
    env = {**os.environ, "GIT_AUTHOR_NAME": "u", "GIT_AUTHOR_EMAIL": "u@e.com"}
    env |= {"GIT_COMMITTER_NAME": "u", "GIT_COMMITTER_EMAIL": "u@e.com"}
    subprocess.run(["git", "commit", "-qam", "mine"], cwd=repo, check=True, env=env)
    code, _, err = _run(
        capsys,
        "settle",
        ids["out1"],
        "select",
        "--resume",
        "9",
        "--commit",
        "--author",
        AUTHOR,
        *where,
    )
    assert code == 1
    assert "nothing to commit" in err
    assert f"goatherd settle {ids['out1']} select --resume 9 --commit" in err
