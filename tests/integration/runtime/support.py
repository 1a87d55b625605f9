"""A real git repository, a trace file and one sealed output for the runtime tests."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from goatherd.application.ports import SandboxSpec
from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.sandbox import (
    GitSandbox,
    new_local_git_sandbox,
    new_worktree_sandbox,
)
from goatherd.infrastructure.store import SQLiteTraceStore


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        capture_output=True,
        check=True,
    )
    return done.stdout.decode()


def make_repo(path: Path, files: dict[str, bytes] | None = None) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    for name, data in (files or {"README.md": b"hello\n"}).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_bytes(data)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def root_sandbox(repo: Path) -> GitSandbox:
    sandbox = new_local_git_sandbox(repo)
    sandbox.create(SandboxSpec())
    return sandbox


def worktree(repo: Path, where: Path) -> GitSandbox:
    sandbox = new_worktree_sandbox(repo, where)
    sandbox.create(SandboxSpec())
    return sandbox


def sealed_output(tmp: Path) -> tuple[Path, Path, str]:
    """Return (trace file, repository, output id) of one sealed isolated child."""
    repo = make_repo(tmp / "repo")
    db = tmp / "trace.db"
    with SQLiteTraceStore(db) as store:
        mgr = scope_manager_for(store)
        root = mgr.create("agent:main", root_sandbox(repo)).unwrap()
        wt = worktree(repo, tmp / "wt-try")
        child = mgr.fork_isolated(root.id, "agent:try", None, wt).unwrap()
        (tmp / "wt-try" / "answer.txt").write_bytes(b"42\n")  # the agent's work
        out = mgr.seal(child.id).unwrap()
    return db, repo, out.id


@contextmanager
def fresh_postgres_database() -> Iterator[str]:
    """Yield the URL of a new database on GOATHERD_TEST_DB_URL's server.

    Skips the test when no server is named.
    """
    base = os.environ.get("GOATHERD_TEST_DB_URL")
    if not base:
        pytest.skip("GOATHERD_TEST_DB_URL is not set (no PostgreSQL server)")
    import psycopg
    from sqlalchemy.engine import make_url

    url = make_url(base)
    name = f"goatherd_race_{uuid.uuid4().hex[:12]}"
    admin = url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield url.set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
