"""The environments' values and ``EnvironmentsCore``, the base of ``Environments``.

``Environment``, ``EnvironmentInfo`` and ``Observation`` (what a call sees),
the root's owner path (``root_owner_for``) and ``unwrap``; and
``EnvironmentsCore``: the root scope (made if new, checked to be this
repository), the sandbox of a worktree, looking an environment up (or saying
why it cannot be worked in), making one (a fork in a new worktree holding
the root's tree) and listing them. Imports ``settings``; the path reading and
recovery (``environment_recovery``) build on it.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TypeVar

from returns.result import Failure, Result

from goatherd.application import Sandbox, SandboxSpec, ScopeManager
from goatherd.domain import (
    TRUSTED_READ_CONTEXT,
    GoatherdError,
    Record,
    ScopeAggregate,
    ScopeExistsError,
    ScopeHalted,
    ScopeState,
    decode_fact,
    owner_of_scope,
    scope_id_for,
)
from goatherd.infrastructure import Runtime
from goatherd.infrastructure.sandbox import (
    GitSandbox,
    GitSandboxConfig,
    LandlockBackend,
    new_local_git_sandbox,
)
from goatherd.integrations.mcp.errors import EnvironmentUnavailableError
from goatherd.integrations.mcp.recording import CallRecorder, SessionInfo
from goatherd.integrations.mcp.settings import McpSettings

__all__ = [
    "Environment",
    "EnvironmentInfo",
    "EnvironmentsCore",
    "Observation",
    "ROOT_PREFIX",
    "TMP_MARKER",
    "_ENV_ID",
    "_View",
    "root_owner_for",
    "unwrap",
]

ROOT_PREFIX: Final = "mcp:"
TMP_MARKER: Final = ".goatherd-mcp-tmp"
_ENV_ID: Final = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
T = TypeVar("T")


def unwrap(result: Result[T, object]) -> T:
    """Return a Success's value; raise a Failure's error."""
    if isinstance(result, Failure):
        failure = result.failure()
        if isinstance(failure, BaseException):
            raise failure
        raise GoatherdError(str(failure))
    return result.unwrap()


def _slug(text: str, limit: int = 32) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug[:limit].strip("-")


def root_owner_for(repo: Path) -> str:
    """Return the root scope's owner path of ``repo`` (``mcp:<name>``)."""
    return ROOT_PREFIX + (_slug(repo.name) or "repo")


@dataclass(frozen=True, slots=True)
class Environment:
    """One environment: its short id, owner path and worktree."""

    env_id: str
    owner: str
    worktree: Path

    @property
    def scope_id(self) -> str:
        """The scope id (``scope:<owner>``)."""
        return scope_id_for(self.owner)

    @property
    def tmp(self) -> Path:
        """The commands' private temporary directory."""
        return Path(f"{self.worktree}.tmp")


@dataclass(frozen=True, slots=True)
class EnvironmentInfo:
    """An environment as ``list_environments`` shows it."""

    env_id: str
    scope_id: str
    state: str
    worktree: str
    outputs: tuple[tuple[str, str], ...] = ()

    def as_dict(self) -> dict[str, object]:
        """Return the fields as JSON-ready values."""
        return {
            "environment_id": self.env_id,
            "scope_id": self.scope_id,
            "state": self.state,
            "outputs": [{"output_id": o, "state": s} for o, s in self.outputs],
        }


@dataclass(frozen=True, slots=True)
class Observation:
    """What a call finds on its environment's path before it runs.

    Attributes:
        env: the environment (workable).
        guidance: guidance recorded there since the last call.
        cursor: the last ordinal read (what guidance was delivered through).
        last: the path's last record id (``""``: none known).
    """

    env: Environment
    guidance: tuple[str, ...]
    cursor: int
    last: str


@dataclass(slots=True)
class _View:
    """This process's reading position on one environment's path."""

    env: Environment | None
    cursor: int
    last: str


@dataclass(slots=True)
class _Sessions:
    """Server sessions by id, read from the root path's started records."""

    infos: dict[str, SessionInfo] = field(default_factory=dict)
    read_through: int = -1


class EnvironmentsCore:
    """The root scope and the environments' lookup, creation and listing."""

    def __init__(
        self,
        runtime: Runtime,
        settings: McpSettings,
        recorder: CallRecorder,
    ) -> None:
        """Serve ``settings.repo``'s environments; the root scope is made if new.

        Raises:
            ContainmentUnavailableError: commands cannot be confined here.
            EnvironmentUnavailableError: the trace serves another repository
                under this root's name.
        """
        self._runtime = runtime
        self._settings = settings
        self._recorder = recorder
        self._backend = LandlockBackend(
            network=settings.network, accept_gaps=settings.accept_gaps
        )
        self._backend.probe()
        self.root_owner = root_owner_for(settings.repo)
        self.manager: ScopeManager = runtime.new_manager(self._resolve)
        self._lock = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._views: dict[str, _View] = {}
        self._sandboxes: dict[str, Sandbox] = {}
        self._sessions = _Sessions()
        self._ensure_root()

    @property
    def settings(self) -> McpSettings:
        """The server's settings."""
        return self._settings

    @property
    def root_scope_id(self) -> str:
        """The repository's root scope id."""
        return scope_id_for(self.root_owner)

    # ------------------------------------------------------------ root

    def _ensure_root(self) -> None:
        model = self._runtime.model
        model.refresh()
        root = model.scope(self.root_owner)
        if not root.listed:
            created = self.manager.create(
                self.root_owner, new_local_git_sandbox(self._settings.repo)
            )
            if isinstance(created, Failure) and not isinstance(
                created.failure(), ScopeExistsError
            ):
                unwrap(created)
            model.refresh()
            root = model.scope(self.root_owner)
        recorded = root.sandbox_path
        if recorded and os.path.realpath(recorded) != os.path.realpath(
            self._settings.repo
        ):
            raise EnvironmentUnavailableError(
                f"this trace serves the repository {recorded} as {self.root_owner};"
                f" give {self._settings.repo} its own trace (--db)"
            )

    def _resolve(self, scope_id: str, backend: str, path: str) -> Sandbox | None:
        owner = owner_of_scope(scope_id)
        if owner == self.root_owner and not backend and not path:
            return new_local_git_sandbox(self._settings.repo)
        mine = owner.startswith(self.root_owner + ":")
        if mine and backend == "git" and path and Path(path).is_dir():
            return self.sandbox_for(Path(path))
        return None

    def sandbox_for(self, worktree: Path) -> GitSandbox:
        """Return the confined sandbox of a worktree (its temp directory made)."""
        tmp = Path(f"{worktree}.tmp")
        tmp.mkdir(parents=True, exist_ok=True)
        (tmp / TMP_MARKER).touch()
        config = GitSandboxConfig(
            self._settings.repo,
            worktree,
            exec_backend=self._backend,
            extra_writable_roots=(str(tmp),),
        )
        return GitSandbox(config)

    # ------------------------------------------------------------ lookup

    def owner_of(self, environment_id: object) -> str:
        """Return the owner path an environment id names, or refuse it."""
        if not isinstance(environment_id, str):
            raise EnvironmentUnavailableError(
                f"environment_id must be a string, got {type(environment_id).__name__}"
            )
        text = environment_id.strip()
        owner = owner_of_scope(text) if text.startswith("scope:") else None
        if owner is None:
            if not _ENV_ID.match(text):
                raise EnvironmentUnavailableError(
                    f"no environment {environment_id[:80]!r} here:"
                    " an id looks like env-1a2b3c4d (list_environments shows them)"
                )
            owner = f"{self.root_owner}:{text}"
        tail = owner.removeprefix(self.root_owner + ":")
        if tail == owner or not _ENV_ID.match(tail):
            raise EnvironmentUnavailableError(
                f"{environment_id[:80]!r} is not an environment of this repository"
            )
        return owner

    def known(self, owner: str) -> ScopeAggregate:
        """Return an environment's scope, workable or not, or refuse an unknown one."""
        model = self._runtime.model
        model.refresh()
        scope = model.scope(owner)
        if not scope.listed or scope.parent_owner != self.root_owner:
            raise EnvironmentUnavailableError(
                f"no environment {owner.rsplit(':', 1)[1]} in this repository"
                " (list_environments shows them)"
            )
        return scope

    def lookup(self, environment_id: object) -> Environment:
        """Return a workable environment, or say why it is not one."""
        return self._lookup_owner(self.owner_of(environment_id))

    def _lookup_owner(self, owner: str) -> Environment:
        scope = self.known(owner)
        env_id = owner.rsplit(":", 1)[1]
        problem = self._problem(scope)
        if problem is not None:
            self._drop_tmp(scope)
            raise EnvironmentUnavailableError(f"environment {env_id} {problem}")
        return Environment(env_id, owner, Path(scope.sandbox_path))

    def _problem(self, scope: ScopeAggregate) -> str | None:
        if scope.inconsistent:
            return (
                f"cannot be used: the trace contradicts itself ({scope.inconsistent})"
            )
        if scope.state is ScopeState.DISCARDED:
            if self._halted(scope):
                return "was halted by the supervisor; stop working in it"
            return "was discarded" + self._settled_note(scope)
        if scope.state is ScopeState.MERGED:
            return "was merged" + self._settled_note(scope)
        if scope.sandbox_destroyed:
            return "has no worktree any more" + self._settled_note(scope)
        if not scope.sandbox_path or not Path(scope.sandbox_path).is_dir():
            return f"has lost its worktree ({scope.sandbox_path or 'none recorded'})"
        return None

    def _halted(self, scope: ScopeAggregate) -> bool:
        if not scope.terminal_record:
            return False
        record = self._runtime.store.read_fact(
            TRUSTED_READ_CONTEXT, scope.terminal_record
        )
        if not isinstance(record, Record):
            return False  # a hidden payload cannot be read: not known as a halt
        return isinstance(decode_fact(record).event, ScopeHalted)

    def _settled_note(self, scope: ScopeAggregate) -> str:
        settled = [
            f"{out.output_id} {out.state.value}"
            for out in self._runtime.model.outputs()
            if out.exists and out.scope_owner == scope.owner and out.action is not None
        ]
        return f" (its output was settled: {', '.join(settled)})" if settled else ""

    def _drop_tmp(self, scope: ScopeAggregate) -> None:
        if not scope.sandbox_path:
            return
        tmp = Path(f"{scope.sandbox_path}.tmp")
        if (tmp / TMP_MARKER).is_file():
            shutil.rmtree(tmp, ignore_errors=True)

    def lock(self, owner: str) -> threading.Lock:
        """Return the lock that serializes calls on ``owner`` in this process."""
        with self._lock:
            return self._locks.setdefault(owner, threading.Lock())

    # ------------------------------------------------------------ create

    def new_id(self, name: object) -> str:
        """Return a fresh environment id (``<name>-<hex>`` or ``env-<hex>``)."""
        slug = _slug(name) if isinstance(name, str) else ""
        return f"{slug}-{os.urandom(3).hex()}" if slug else f"env-{os.urandom(4).hex()}"

    def create(self, env_id: str) -> Environment:
        """Fork ``env_id`` from the root in a new worktree holding the root's tree.

        Raises:
            GoatherdError: the worktree, the fork or the baseline failed (a
                worktree made for a fork that did not happen is removed).
        """
        owner = f"{self.root_owner}:{env_id}"
        worktree = self._settings.worktrees / env_id
        sandbox = self.sandbox_for(worktree)
        sandbox.create(SandboxSpec())
        # clean: the baseline is applied below, once the fork is known to hold.
        forked = self.manager.fork_isolated(
            self.root_scope_id, owner, None, sandbox, clean=True
        )
        if isinstance(forked, Failure):
            sandbox.destroy()
            shutil.rmtree(Path(f"{worktree}.tmp"), ignore_errors=True)
            unwrap(forked)
        env = Environment(env_id, owner, worktree)
        self.apply_baseline(env)
        self._sandboxes[owner] = sandbox
        return env

    def apply_baseline(self, env: Environment) -> None:
        """Reset the environment's worktree to the root's tree at the fork."""
        scope = self.manager.get(env.scope_id)
        assert scope is not None, "a forked environment is a scope"
        baseline = scope.baseline()
        if baseline is not None:
            unwrap(self.manager.apply_workspace(env.scope_id, baseline))

    # ------------------------------------------------------------ listing

    def infos(self) -> list[EnvironmentInfo]:
        """Return every environment of the repository, in the order made."""
        model = self._runtime.model
        model.refresh()
        outputs: dict[str, list[tuple[str, str]]] = {}
        for out in model.outputs():
            if out.exists:
                outputs.setdefault(out.scope_owner, []).append(
                    (out.output_id, out.state.value)
                )
        infos = []
        for scope in model.scopes():
            if scope.parent_owner != self.root_owner or scope.pruned:
                continue
            state = scope.state.value
            if scope.state is ScopeState.DISCARDED and self._halted(scope):
                state = "halted"
            elif scope.is_active and scope.sandbox_destroyed:
                state = "settled"
            infos.append(
                EnvironmentInfo(
                    scope.owner.rsplit(":", 1)[1],
                    scope.scope_id,
                    state,
                    scope.sandbox_path,
                    tuple(outputs.get(scope.owner, ())),
                )
            )
        return infos

    # ------------------------------------------------------------ guidance

    def checkpoints(self, env: Environment) -> Mapping[str, str]:
        """Return the environment's checkpoints and their states."""
        return {
            cp.id: cp.state.value
            for cp in self.manager.checkpoints_for_scope(env.scope_id)
        }
