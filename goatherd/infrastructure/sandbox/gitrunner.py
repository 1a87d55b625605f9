"""Running the ``git`` binary: timeouts, a fixed safe configuration, clear errors.

Every call gets its own 30 s ceiling and ignores the caller's cancellation
(aborting mid-operation would leave a staged index, a half reset or an
abandoned worktree). Terminal prompts are disabled and every inherited
``GIT_*`` variable is dropped, so a host running inside a git hook cannot
redirect us to another repository. Failures raise ``GitError`` carrying git's
own message. :func:`scratch_index` gives a private index file so captures
and diffs never touch the caller's real index.

The repository and its work tree are data written by agents, never code
goatherd runs (ADR 0067). Each call therefore runs with no system or global
configuration (``GIT_CONFIG_NOSYSTEM``, ``GIT_CONFIG_GLOBAL=/dev/null``,
``GIT_ATTR_NOSYSTEM``) and with command-scope overrides, which outrank the
repository's own configuration, for every key that names a program git may
start: hooks, fsmonitor, external diff, pager, credential helpers, signing,
transports, auto gc. Filter drivers have names the repository chooses, so
before a call that may read or write work-tree content the runner lists the
``filter.<driver>.*`` keys the configuration defines and overrides each
driver's ``clean``, ``smudge`` and ``process`` with an empty command (git
then stores and writes the bytes unchanged) and ``required`` with false.
That listing and the call are two processes: the design relies on no agent
process being alive while goatherd's git runs (every confined command ends
with its exec).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from goatherd.application.errors import GitError, SandboxError
from goatherd.infrastructure.sandbox.gitlocks import guard as lock_guard

# The public surface (re-exported by the sandbox package); ``RawChange``,
# ``Scratch``, ``nul_list``, ``parse_raw_changes`` and ``scratch_index`` are
# helpers the git backend's modules import by name.
__all__ = ["GIT_TIMEOUT_SECONDS", "GitRunner", "SAFE_CONFIG"]

GIT_TIMEOUT_SECONDS: Final = 30.0
# Command-scope configuration every call gets (ADR 0067): each key that can
# make git start a program, or read configuration or attributes from outside
# the repository, pinned to a value that starts nothing.
SAFE_CONFIG: Final[tuple[tuple[str, str], ...]] = (
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.untrackedCache", "false"),
    ("core.attributesFile", "/dev/null"),
    ("core.pager", "cat"),
    ("core.editor", "false"),
    ("core.askPass", ""),
    ("core.sshCommand", ""),
    ("core.gitProxy", ""),
    ("diff.external", ""),
    ("credential.helper", ""),
    ("protocol.allow", "never"),
    ("submodule.recurse", "false"),
    ("commit.gpgSign", "false"),
    ("log.showSignature", "false"),
    ("gpg.program", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("fetch.recurseSubmodules", "false"),
)
_FILTER_KEYS: Final = ("clean", "smudge", "process")
# Subcommands that only read objects and refs, never a work-tree file, so no
# filter driver can run in them. Every other one gets the filter overrides
# (``write-tree`` and ``read-tree`` may hash work-tree files to refresh a
# racily clean index entry, so they are not in this list).
_NO_CONTENT: Final = frozenset(
    {"rev-parse", "config", "cat-file", "commit-tree", "diff-tree"}
)
_FILTER_KEY = re.compile(r"filter\.(.+)\.([a-z]+)")


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["GIT_OPTIONAL_LOCKS"] = "0"
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    env["GIT_CONFIG_GLOBAL"] = "/dev/null"
    env["GIT_ATTR_NOSYSTEM"] = "1"
    env["GIT_NO_REPLACE_OBJECTS"] = "1"
    return env


def _with_config(env: dict[str, str], pairs: Sequence[tuple[str, str]]) -> None:
    """Add ``pairs`` as command-scope configuration (as ``-c``, name kept apart)."""
    env["GIT_CONFIG_COUNT"] = str(len(pairs))
    for n, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{n}"] = key
        env[f"GIT_CONFIG_VALUE_{n}"] = value


def _subcommand(args: Sequence[str]) -> str:
    return next((a for a in args if not a.startswith("-")), "")


@dataclass(frozen=True, slots=True)
class GitRunner:
    """Runs git in one directory with a per-call timeout and a safe configuration.

    ``git_dir``/``work_tree``, when given, are passed as ``--git-dir`` and
    ``--work-tree`` so git never discovers a repository from a ``.git`` the
    work tree holds (the caller validated them, see ``git.py``).
    """

    cwd: Path
    timeout: float = GIT_TIMEOUT_SECONDS
    git_dir: Path | None = None
    work_tree: Path | None = None

    def _argv(self, args: Sequence[str]) -> list[str]:
        argv = ["git"]
        if self.git_dir is not None:
            argv.append(f"--git-dir={self.git_dir}")
        if self.work_tree is not None:
            argv.append(f"--work-tree={self.work_tree}")
        return [*argv, *args]

    def _filter_overrides(self) -> list[tuple[str, str]]:
        """Return overrides that empty every filter driver the config defines."""
        env = _base_env()
        _with_config(env, SAFE_CONFIG)
        done = self._spawn(
            ["config", "--null", "--name-only", "--get-regexp", r"^filter\."],
            env,
            b"",
        )
        if done.returncode not in (0, 1):  # 1: no such key
            raise GitError(
                ("config", "--get-regexp", "filter"),
                done.stderr.decode("utf-8", "replace"),
                done.returncode,
            )
        drivers: set[str] = set()
        for raw in done.stdout.split(b"\0"):
            match = _FILTER_KEY.fullmatch(raw.decode("utf-8", "surrogateescape"))
            if match:
                drivers.add(match.group(1))
        pairs: list[tuple[str, str]] = []
        for driver in sorted(drivers):
            pairs += [(f"filter.{driver}.{key}", "") for key in _FILTER_KEYS]
            pairs.append((f"filter.{driver}.required", "false"))
        return pairs

    def _spawn(
        self,
        args: Sequence[str],
        env: Mapping[str, str],
        stdin: bytes,
        *,
        pass_fds: Sequence[int] = (),
    ) -> subprocess.CompletedProcess[bytes]:
        try:
            return subprocess.run(  # noqa: S603 - fixed binary, argument list
                self._argv(args),
                cwd=self.cwd,
                env=env,
                input=stdin,
                capture_output=True,
                timeout=self.timeout,
                check=False,
                pass_fds=tuple(pass_fds),
            )
        except subprocess.TimeoutExpired as exc:
            stderr = (exc.stderr or b"").decode("utf-8", "replace")
            raise GitError(tuple(args), stderr, None) from exc
        except FileNotFoundError as exc:
            missing = "git binary" if self.cwd.is_dir() else f"directory {self.cwd}"
            raise SandboxError(f"git sandbox: {missing} not found") from exc

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
        return self.run_status(*args, env=env, stdin=stdin)[1]

    def run_status(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
        answers: range = range(0),
    ) -> tuple[int, bytes]:
        """Run ``git <args>``; return its exit status and raw stdout.

        A status in ``answers`` is an answer (``merge-file`` counts its
        conflicts in it), not a failure.

        Raises:
            GitError: on any other nonzero exit or a timeout, with git's stderr.
            SandboxError: when the directory or the git binary is missing.
        """
        pairs = list(SAFE_CONFIG)
        if _subcommand(args) not in _NO_CONTENT:
            pairs += self._filter_overrides()
        full_env = _base_env()
        full_env.update(
            {k: v for k, v in (env or {}).items() if not k.startswith("GIT_CONFIG")}
        )
        _with_config(full_env, pairs)
        # A git call that may take a repository lock runs under goatherd's
        # guard, so a lock a killed call leaves is cleared by the next one
        # (ADR 0069); the guard names the git dir this runner was given.
        with lock_guard(self.cwd, args, env, git_dir=self.git_dir) as fds:
            done = self._spawn(
                args, full_env, stdin if stdin is not None else b"", pass_fds=fds
            )
            if done.returncode < 0:  # killed: its locks may stand, keep the journal
                raise GitError(
                    args, done.stderr.decode("utf-8", "replace"), done.returncode
                )
        if done.returncode != 0 and done.returncode not in answers:
            raise GitError(
                args, done.stderr.decode("utf-8", "replace"), done.returncode
            )
        return done.returncode, done.stdout

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
    ``000000``. ``old_mode``/``old_sha`` are the old side (an addition has
    mode ``000000``).
    """

    path: str
    mode: str
    sha: str
    old_mode: str = "000000"
    old_sha: str = ""

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
        old_mode, new_mode, old_sha, new_sha, _ = meta.lstrip(b":").decode().split(" ")
        path = raw_path.decode("utf-8", "surrogateescape")
        changes[path] = RawChange(path, new_mode, new_sha, old_mode, old_sha)
    return changes


def nul_list(output: bytes) -> list[str]:
    """Split NUL-terminated path output."""
    return [p.decode("utf-8", "surrogateescape") for p in output.split(b"\0") if p]
