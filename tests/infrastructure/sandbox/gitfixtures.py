"""Real git repositories for the git sandbox tests (no mocks: git runs here)."""

from __future__ import annotations

import itertools
import os
import subprocess
from pathlib import Path

from goatherd.application import SandboxSpec
from goatherd.infrastructure.sandbox import GitSandbox, new_worktree_sandbox
from tests.contract.sandbox_contract import INITIAL, INITIAL_EXECUTABLE, Snapshot

_counter = itertools.count()


def git(cwd: Path, *args: str, stdin: bytes | None = None) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=test@example.com", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        check=True,
    )
    return done.stdout.decode()


def make_repo(path: Path, files: dict[str, bytes] = INITIAL) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    for name, data in files.items():
        write(path, name, data, name in INITIAL_EXECUTABLE)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def write(root: Path, path: str, data: bytes, executable: bool = False) -> None:
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_dir():
        raise IsADirectoryError(target)
    target.write_bytes(data)
    target.chmod(0o755 if executable else 0o644)


def remove(root: Path, path: str) -> None:
    (root / path).unlink()


def snapshot(root: Path) -> Snapshot:
    result: Snapshot = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if Path(dirpath) == root and ".git" in dirnames:
            dirnames.remove(".git")
        for name in filenames:
            full = Path(dirpath) / name
            relative = full.relative_to(root).as_posix()
            if relative == ".git":
                continue
            result[relative] = (full.read_bytes(), os.access(full, os.X_OK))
    return result


def commit_all(root: Path) -> None:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "later")


def worktree_sibling(repo: Path, tmp_path: Path) -> GitSandbox:
    sibling = new_worktree_sandbox(repo, tmp_path / f"sibling-{next(_counter)}")
    sibling.create(SandboxSpec())
    return sibling
