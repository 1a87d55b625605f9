"""The demo directory: where the project, the worktrees and the trace live.

Layout::

    project/               the sample git project; the root scope works in
                           place on it (scope:demo:main)
    worktrees/<attempt>/   one detached worktree per attempt (removed when
                           the attempt ends)
    trace.sqlite           the trace
    .goatherd-demo         marks the directory as the demo's (``--fresh``
                           deletes only what the demo created)

The default directory is stable (``<tempdir>/goatherd-demo``) so that running
the same command again resumes the same session.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from goatherd.demo.project import create_project
from goatherd.demo.state import ROOT_OWNER
from goatherd.domain import GoatherdError

__all__ = ["DemoError", "DemoLayout", "default_demo_dir", "prepare_directory"]

_MARKER: Final = ".goatherd-demo"
_MARKER_TEXT: Final = "a goatherd demo directory (goatherd demo --fresh wipes it)\n"
Progress = Callable[[str], None]


class DemoError(GoatherdError):
    """The demo cannot run here (a foreign directory, a missing project...)."""


@dataclass(frozen=True, slots=True)
class DemoLayout:
    """Where the demo keeps its project, worktrees and trace."""

    root: Path

    @property
    def project(self) -> Path:
        """The sample project (the root scope's in-place repository)."""
        return self.root / "project"

    @property
    def worktrees(self) -> Path:
        """The attempts' worktrees."""
        return self.root / "worktrees"

    @property
    def trace(self) -> Path:
        """The SQLite trace file."""
        return self.root / "trace.sqlite"

    @property
    def marker(self) -> Path:
        """The file that marks the directory as the demo's."""
        return self.root / _MARKER

    def worktree_for(self, owner: str) -> Path:
        """The worktree of the attempt writing to ``owner``."""
        return self.worktrees / owner.removeprefix(ROOT_OWNER + ":").replace(":", "-")


def default_demo_dir() -> Path:
    """Return ``<tempdir>/goatherd-demo`` (stable, so a rerun resumes)."""
    return Path(tempfile.gettempdir()) / "goatherd-demo"


def prepare_directory(layout: DemoLayout, fresh: bool, say: Progress) -> None:
    root = layout.root
    if root.exists() and not root.is_dir():
        raise DemoError(f"demo directory {root} is a file")
    ours = layout.marker.exists()
    if root.exists() and any(root.iterdir()) and not ours:
        raise DemoError(
            f"{root} is not empty and is not a goatherd demo directory;"
            " pick another one with --dir"
        )
    if fresh and ours:
        say(f"wiping the previous demo in {root}")
        _wipe(layout)
    root.mkdir(parents=True, exist_ok=True)
    layout.marker.write_text(_MARKER_TEXT, encoding="utf-8")
    trace_exists = layout.trace.exists()
    if layout.project.exists() and not trace_exists:
        # Nothing recorded refers to it: start from the pristine project.
        _wipe(layout)
    if not layout.project.exists():
        if trace_exists:
            raise DemoError(
                f"the trace {layout.trace} refers to the project {layout.project},"
                " which is missing; start over with --fresh"
            )
        say(f"creating the sample project in {layout.project}")
        create_project(layout.project)


def _wipe(layout: DemoLayout) -> None:
    project = layout.project
    for path in (project, layout.worktrees, project.with_name("project.creating")):
        shutil.rmtree(path, ignore_errors=True)
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{layout.trace}{suffix}").unlink(missing_ok=True)
