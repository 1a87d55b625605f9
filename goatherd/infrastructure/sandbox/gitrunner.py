"""Running the ``git`` binary: timeouts, a clean environment, clear errors.

Every call gets its own 30 s ceiling and ignores the caller's cancellation
(aborting mid-operation would leave a staged index, a half reset or an
abandoned worktree). Terminal prompts are disabled and inherited ``GIT_DIR``
style variables are dropped so a host running inside a git hook cannot
redirect us to another repository. Failures raise ``GitError`` carrying git's
own message. :func:`scratch_index` gives a private index file so captures
and diffs never touch the caller's real index.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from goatherd.application.errors import GitError, SandboxError
from goatherd.infrastructure.sandbox.gitlocks import guard as lock_guard

__all__ = [
    "GIT_TIMEOUT_SECONDS",
    "GitRunner",
    "RawChange",
    "Scratch",
    "nul_list",
    "parse_raw_changes",
    "scratch_index",
]

GIT_TIMEOUT_SECONDS: Final = 30.0
_DROPPED = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
)


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED}
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["GIT_OPTIONAL_LOCKS"] = "0"
    return env


@dataclass(frozen=True, slots=True)
class GitRunner:
    """Runs git in one directory with a per-call timeout."""

    cwd: Path
    timeout: float = GIT_TIMEOUT_SECONDS

    def run(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> bytes:
        """Run ``git <args>`` and return its raw stdout.

        Raises:
            GitError: on a nonzero exit or a timeout, with git's stderr.
            SandboxError: when the directory or the git binary is missing.
        """
        full_env = _base_env()
        full_env.update(env or {})
        try:
            # A git call that may take a repository lock runs under goatherd's
            # guard, so a lock a killed call leaves is cleared by the next one.
            with lock_guard(self.cwd, args, env) as fds:
                done = subprocess.run(  # noqa: S603 - fixed binary, argument list
                    ["git", *args],  # noqa: S607 - git is looked up on PATH by design
                    cwd=self.cwd,
                    env=full_env,
                    input=stdin if stdin is not None else b"",
                    capture_output=True,
                    timeout=self.timeout,
                    check=False,
                    pass_fds=fds,
                )
                if done.returncode < 0:  # killed: its locks may stand, keep the journal
                    raise GitError(
                        args, done.stderr.decode("utf-8", "replace"), done.returncode
                    )
        except subprocess.TimeoutExpired as exc:
            stderr = (exc.stderr or b"").decode("utf-8", "replace")
            raise GitError(args, stderr, None) from exc
        except FileNotFoundError as exc:
            missing = "git binary" if self.cwd.is_dir() else f"directory {self.cwd}"
            raise SandboxError(f"git sandbox: {missing} not found") from exc
        if done.returncode != 0:
            raise GitError(
                args, done.stderr.decode("utf-8", "replace"), done.returncode
            )
        return done.stdout

    def text(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> str:
        """Run git and return stdout decoded, trailing newline trimmed."""
        out = self.run(*args, env=env, stdin=stdin)
        return out.decode("utf-8", "surrogateescape").rstrip("\n")


@dataclass(frozen=True, slots=True)
class Scratch:
    """A private index file for one capture or diff.

    ``env`` points git at it; ``seeded`` says whether it already holds a copy
    of the real index (else the caller seeds it).
    """

    env: dict[str, str]
    seeded: bool


@contextmanager
def scratch_index(real_index: Path | None) -> Iterator[Scratch]:
    """Yield a :class:`Scratch` index holding a private copy of ``real_index``.

    The copy sits in a fresh 0700 temporary directory, removed afterwards,
    and keeps the original's mtime so git's racy-clean detection still works.
    With ``real_index`` missing or unreadable the file does not exist yet and
    ``seeded`` is false.
    """
    directory = tempfile.mkdtemp(prefix="goatherd-index-")
    target = Path(directory) / "index"
    seeded = False
    try:
        if real_index is not None:
            try:
                # copy2 keeps the index's mtime: git's racy-entry check
                # compares file mtimes with it, and a fresh mtime would let a
                # same-size edit made in the index's second pass as clean.
                shutil.copy2(real_index, target)
                seeded = True
            except OSError:
                seeded = False
        yield Scratch({"GIT_INDEX_FILE": str(target)}, seeded)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@dataclass(frozen=True, slots=True)
class RawChange:
    """One entry of ``git diff-tree -r -z --raw``: the new side of a path.

    ``mode``/``sha`` are git's new mode and object id; a deletion has mode
    ``000000``.
    """

    path: str
    mode: str
    sha: str

    @property
    def deleted(self) -> bool:
        """Whether the path no longer exists on the new side."""
        return self.mode == "000000"


def parse_raw_changes(output: bytes) -> dict[str, RawChange]:
    """Parse ``diff-tree -r -z --no-renames`` raw output into changes by path."""
    fields = output.split(b"\0")
    changes: dict[str, RawChange] = {}
    for meta, raw_path in zip(fields[0::2], fields[1::2], strict=False):
        if not meta:
            continue
        _, new_mode, _, new_sha, _ = meta.lstrip(b":").decode().split(" ")
        path = raw_path.decode("utf-8", "surrogateescape")
        changes[path] = RawChange(path, new_mode, new_sha)
    return changes


def nul_list(output: bytes) -> list[str]:
    """Split NUL-terminated path output."""
    return [p.decode("utf-8", "surrogateescape") for p in output.split(b"\0") if p]
