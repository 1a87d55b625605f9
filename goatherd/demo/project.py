"""The demo's sample project: a tiny Python module with a bug and its tests.

:func:`create_project` writes the files and commits them to a fresh git
repository with a fixed author, committer and date, so every run starts from
the same commit id. The project is built in a sibling temporary directory and
renamed into place, so a half-created project is never mistaken for a real
one. Its tests run with ``python -m unittest`` (one of them fails until the
median bug is fixed: that is the task the scripted agents attempt).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from goatherd.infrastructure import GitRunner

__all__ = [
    "BROKEN_MEDIAN",
    "FIXED_MEDIAN",
    "PROJECT_FILES",
    "PROJECT_MODULE",
    "SuiteRun",
    "TEST_TIMEOUT_SECONDS",
    "changed_paths",
    "create_project",
    "run_tests",
]

PROJECT_MODULE: Final = "stats.py"
_HEADER: Final = '''"""Tiny statistics helpers (the goatherd demo's sample project)."""


def mean(values):
    """Return the arithmetic mean of a non-empty sequence."""
    return sum(values) / len(values)


def median(values):
    """Return the median of a non-empty sequence."""
    ordered = sorted(values)
    middle = len(ordered) // 2
'''
_BUGGY_BODY: Final = "    return ordered[middle]\n"
BROKEN_MEDIAN: Final = (
    _HEADER + "    return (ordered[middle - 1] + ordered[middle]) / 2\n"
)
"""A hasty fix: right for even lengths, wrong for odd ones."""
FIXED_MEDIAN: Final = (
    _HEADER
    + "    if len(ordered) % 2:\n"
    + "        return ordered[middle]\n"
    + "    return (ordered[middle - 1] + ordered[middle]) / 2\n"
)
"""The careful fix: both lengths right."""

_TESTS: Final = """import unittest

from stats import mean, median


class StatsTest(unittest.TestCase):
    def test_mean(self):
        self.assertEqual(mean([1, 2, 3, 4]), 2.5)

    def test_median_of_an_odd_count(self):
        self.assertEqual(median([3, 1, 2]), 2)

    def test_median_of_an_even_count(self):
        self.assertEqual(median([4, 1, 3, 2]), 2.5)


if __name__ == "__main__":
    unittest.main()
"""
_README: Final = """# stats

A tiny module for the goatherd demo. Run the tests with `python -m unittest`.
The median of an even count is wrong: fixing it is the agents' task.
"""

PROJECT_FILES: Final[dict[str, str]] = {
    ".gitignore": "__pycache__/\n*.pyc\n",
    "README.md": _README,
    PROJECT_MODULE: _HEADER + _BUGGY_BODY,
    "tests/__init__.py": "",
    "tests/test_stats.py": _TESTS,
}
_IDENTITY: Final = {
    "GIT_AUTHOR_NAME": "goatherd demo",
    "GIT_AUTHOR_EMAIL": "demo@goatherd.invalid",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00+00:00",
    "GIT_COMMITTER_NAME": "goatherd demo",
    "GIT_COMMITTER_EMAIL": "demo@goatherd.invalid",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+00:00",
}
_GIT_TIMEOUT: Final = 30.0
TEST_TIMEOUT_SECONDS: Final = 60.0


def create_project(target: Path) -> str:
    """Create the sample project at ``target`` and return its commit id.

    Raises:
        FileExistsError: ``target`` already exists (nothing is touched).
        GitError: git failed (nothing is left behind).
    """
    if target.exists():
        raise FileExistsError(f"demo project {target} already exists")
    staging = target.with_name(target.name + ".creating")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        staging.mkdir(parents=True)
        for name, text in PROJECT_FILES.items():
            path = staging / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        _git(staging, "init", "-q")
        _git(staging, "add", "-A")
        _git(staging, "commit", "-q", "-m", "stats: mean and median (median is buggy)")
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return _git(target, "rev-parse", "HEAD").strip()


def _git(cwd: Path, *args: str) -> str:
    # goatherd's safe git configuration (ADR 0067): the project is agent-written.
    settings = ("-c", "init.defaultBranch=main")
    runner = GitRunner(cwd, timeout=_GIT_TIMEOUT)
    out = runner.run(*settings, *args, env=_IDENTITY)
    return out.decode("utf-8", "surrogateescape")


def changed_paths(project: Path) -> tuple[str, ...]:
    """Return the project's paths that differ from its commit (untracked too)."""
    out = _git(project, "status", "--porcelain", "-z", "--untracked-files=all")
    entries = [e for e in out.split("\0") if e]
    return tuple(sorted(entry[3:] for entry in entries))


@dataclass(frozen=True, slots=True)
class SuiteRun:
    """The outcome of one ``python -m unittest`` run.

    Attributes:
        passed: whether every test passed.
        exit_code: the process's exit code (-1 on a timeout).
        summary: the run's last meaningful output line (``OK``,
            ``FAILED (failures=1)``...).
    """

    passed: bool
    exit_code: int
    summary: str


def run_tests(workdir: Path, timeout: float = TEST_TIMEOUT_SECONDS) -> SuiteRun:
    """Run the project's tests in ``workdir`` with this interpreter."""
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "unittest", "-q"],
            cwd=workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return SuiteRun(False, -1, f"timed out after {timeout:g}s")
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    summary = lines[-1].strip() if lines else f"exit code {done.returncode}"
    return SuiteRun(done.returncode == 0, done.returncode, summary)
