"""Environments: scopes forked in their own git worktree from one repository.

The repository is a root scope (``mcp:<name>``, the repository in place);
each environment is an isolated child (``mcp:<name>:<env>``) that owns a
detached worktree under the worktrees directory and a private temporary
directory beside it (``<worktree>.tmp``, the command's ``TMPDIR``). Commands
run confined by Landlock: they may write the worktree and that directory,
nothing else.

Nothing about an environment lives outside the trace: the scopes, their
worktree paths (``scope.forked``), their checkpoints and outputs are folded
from it, so another server process, the ``goatherd`` command line and a
restarted server all see the same environments. The manager re-adopts a
worktree on demand from the path its fork recorded.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TypeVar

from returns.result import Failure, Result

from goatherd.application import NetworkMode, Sandbox, SandboxSpec, ScopeManager
from goatherd.application.errors import GitError, SandboxError
from goatherd.domain import (
    TRUSTED_READ_CONTEXT,
    CheckpointState,
    GoatherdError,
    GuidanceInjected,
    LogEntry,
    Record,
    ScopeAggregate,
    ScopeExistsError,
    ScopeHalted,
    ScopeState,
    SupervisionRule,
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
from goatherd.infrastructure.sandbox.gitrunner import GitRunner
from goatherd.integrations.mcp.errors import EnvironmentUnavailableError
from goatherd.integrations.mcp.recording import (
    SERVER_STARTED_SCHEMA,
    TOOL_SCHEMA_PREFIX,
    CallRecorder,
    SessionInfo,
    is_call,
    is_result,
)

__all__ = [
    "COMMAND_ENV_ALLOWLIST",
    "DEFAULT_OUTPUT_LIMIT",
    "DEFAULT_TIMEOUT",
    "Environment",
    "EnvironmentInfo",
    "Environments",
    "MAX_TIMEOUT",
    "McpSettings",
    "Observation",
    "ROOT_PREFIX",
    "TMP_MARKER",
    "command_environment",
    "root_owner_for",
    "unwrap",
]

ROOT_PREFIX: Final = "mcp:"
DEFAULT_TIMEOUT: Final = 120.0
MAX_TIMEOUT: Final = 3600.0
DEFAULT_OUTPUT_LIMIT: Final = 32 * 1024
TMP_MARKER: Final = ".goatherd-mcp-tmp"
COMMAND_ENV_ALLOWLIST: Final = (
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "PATH",
    "TERM",
    "TZ",
)
"""The server's environment variables every command gets (when set)."""
_DEFAULT_PATH: Final = "/usr/local/bin:/usr/bin:/bin"
_ENV_ID: Final = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
_INTERRUPTED: Final = "the server stopped before this call finished"
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
class McpSettings:
    """What a server serves and how it confines commands.

    Attributes:
        repo: the repository's top-level directory.
        db: the trace (a path or an SQLAlchemy URL), as shown to humans.
        worktrees: where environments' worktrees are made.
        network: ``deny`` blocks TCP in commands (Landlock ABI 4 and later).
        accept_gaps: Landlock guarantees accepted as missing on old kernels.
        default_timeout: a command's timeout when the call names none.
        max_timeout: the longest timeout a call may ask for.
        output_limit: bytes of each output stream returned (head and tail).
        rules: the supervisor's rules (``None``: ``policy.default_rules()``).
        pass_env: names of the server's environment variables commands also
            get (beyond :data:`COMMAND_ENV_ALLOWLIST`); nothing else of the
            server's environment reaches a command.
    """

    repo: Path
    db: str
    worktrees: Path
    network: NetworkMode = NetworkMode.ALLOW
    accept_gaps: frozenset[str] = frozenset()
    default_timeout: float = DEFAULT_TIMEOUT
    max_timeout: float = MAX_TIMEOUT
    output_limit: int = DEFAULT_OUTPUT_LIMIT
    rules: tuple[SupervisionRule, ...] | None = None
    pass_env: tuple[str, ...] = ()


def command_environment(
    tmp: Path, pass_env: tuple[str, ...], server_env: Mapping[str, str]
) -> dict[str, str]:
    """Return the minimal environment a command starts from.

    The allowlisted variables and ``pass_env`` are copied from
    ``server_env``; ``HOME`` and the caches point inside the environment's
    private ``tmp`` directory (writable, removed with the environment), so
    ``pip``, ``npm`` and the like work without reaching the server's home.
    """
    env = {
        name: server_env[name]
        for name in (*COMMAND_ENV_ALLOWLIST, *pass_env)
        if name in server_env
    }
    env.setdefault("PATH", _DEFAULT_PATH)
    home = tmp / "home"
    env.update(
        HOME=str(home),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        TMPDIR=str(tmp),
    )
    return env


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


class Environments:
    """The repository's environments, read from and recorded in the trace."""

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

    # ------------------------------------------------------------ recovery

    def observe(self, owner: str) -> Observation:
        """Read what happened on ``owner``'s path since the last call.

        One read of the path's new entries per call: guidance recorded there
        is returned, the last record is what the next declaration follows,
        and the environment's state is folded again only when a record that
        is not a tool call's landed there (every change of a scope's state
        is a record on its own path). On first use in this process, calls a
        dead server left open are closed first.

        Raises:
            EnvironmentUnavailableError: the environment is unknown, or can
                no longer be worked in.
        """
        view = self._views.get(owner)
        if view is None:
            env = self._lookup_owner(owner)
            view = self._first_view(env)
        entries = self._runtime.store.read_path(owner, view.cursor)
        foreign = any(
            not e.record.envelope.schema_ref.startswith(TOOL_SCHEMA_PREFIX)
            for e in entries
        )
        if foreign or view.env is None:
            try:
                view.env = self._lookup_owner(owner)
            except EnvironmentUnavailableError:
                self._views.pop(owner, None)
                self._sandboxes.pop(owner, None)
                raise
        # Another server serving the same environment may have delivered some
        # of this guidance already: its results say through which ordinal.
        delivered = _delivered_through(entries)
        guidance = [
            event.guidance
            for entry in entries
            if entry.record.envelope.schema_ref == GuidanceInjected.SCHEMA
            and entry.record.owner_ordinal > delivered
            and isinstance(event := decode_fact(entry.record).event, GuidanceInjected)
        ]
        if entries:
            view.cursor = entries[-1].record.owner_ordinal
            view.last = entries[-1].record.record_id
        assert view.env is not None
        return Observation(view.env, tuple(guidance), view.cursor, view.last)

    def followed(self, owner: str, record_id: str) -> None:
        """Remember ``record_id`` as the last record this server put on the path."""
        view = self._views.get(owner)
        if view is not None:
            view.last = record_id

    def _first_view(self, env: Environment) -> _View:
        entries = self._runtime.store.read_path(env.owner)
        self.close_interrupted(env.owner, entries)
        view = _View(env, _delivered_through(entries), "")
        self._views[env.owner] = view
        return view

    def sandbox_of(self, env: Environment) -> Sandbox:
        """Return the environment's sandbox in this process (re-adopted once)."""
        cached = self._sandboxes.get(env.owner)
        if cached is None:
            scope = self.manager.get(env.scope_id)
            cached = scope.sandbox if scope is not None else None
            if cached is None:
                raise EnvironmentUnavailableError(
                    f"environment {env.env_id} has no worktree here"
                )
            self._sandboxes[env.owner] = cached
        return cached

    def close_interrupted(self, owner: str, entries: tuple[LogEntry, ...]) -> int:
        """Record an ``interrupted`` capture for each call a dead server left open."""
        answered = {
            parent
            for entry in entries
            if is_result(entry)
            for parent in entry.record.envelope.caused_by_record_ids
        }
        closed = 0
        for entry in entries:
            record = entry.record
            if not is_call(entry) or record.record_id in answered:
                continue
            if self._may_be_running(record.payload.get("session")):
                continue
            tool = _tool_of(record.envelope.schema_ref)
            outcome = (
                self._finished_restore(record.payload) if tool == "restore" else None
            )
            if outcome is None:
                outcome = {"success": False, "interrupted": True, "error": _INTERRUPTED}
            if self._recorder.capture(owner, record.record_id, tool, outcome):
                closed += 1
        return closed

    def _finished_restore(
        self, payload: Mapping[str, object]
    ) -> dict[str, object] | None:
        """Finish a restore a dead server claimed but did not record (ADR 0026).

        The claim holds the environment's workspace until its attempt is
        retried; the retry applies the checkpoint and records it, as the
        agent asked. ``None`` when there is nothing of it to finish.
        """
        checkpoint_id = payload.get("checkpoint_id")
        if not isinstance(checkpoint_id, str):
            return None
        model = self._runtime.model
        model.refresh()
        checkpoint = model.checkpoint(checkpoint_id)
        if not checkpoint.exists or not checkpoint.claimed_by.isdigit():
            return None
        if checkpoint.state is not CheckpointState.VALID:
            return None
        done = self.manager.restore_checkpoint(
            checkpoint_id, seq=int(checkpoint.claimed_by)
        )
        if isinstance(done, Failure):
            return None
        return {
            "success": True,
            "recovered": True,
            "checkpoint_id": checkpoint_id,
            "note": "the server stopped during this restore; a restart finished it",
        }

    def _may_be_running(self, session: object) -> bool:
        if not isinstance(session, str):
            return False
        if session == self._recorder.session.session:
            return True
        info = self._session(session)
        return info is not None and info.may_be_running()

    def _session(self, session: str) -> SessionInfo | None:
        known = self._sessions
        if session not in known.infos:
            entries = self._runtime.store.read_path(self.root_owner, known.read_through)
            for entry in entries:
                known.read_through = max(known.read_through, entry.record.owner_ordinal)
                if entry.record.envelope.schema_ref == SERVER_STARTED_SCHEMA:
                    info = SessionInfo.from_payload(entry.record.payload)
                    if info is not None:
                        known.infos[info.session] = info
        return known.infos.get(session)

    def recover_opens(self, finish: Callable[[Environment, str], None]) -> None:
        """Finish or close the new-environment opens a dead server left open.

        An open whose fork was recorded is finished (the worktree is reset
        to the fork's baseline; ``finish`` records the capture); one whose
        fork was not has its stray worktree removed and is closed as
        interrupted.
        """
        store = self._runtime.store
        root_entries = store.read_path(self.root_owner)
        answered = {
            parent
            for entry in root_entries
            if is_result(entry)
            for parent in entry.record.envelope.caused_by_record_ids
        }
        for entry in root_entries:
            record = entry.record
            planned = record.payload.get("environment_id")
            if not is_call(entry) or not isinstance(planned, str):
                continue
            if record.record_id in answered or not _ENV_ID.match(planned):
                continue
            if self._may_be_running(record.payload.get("session")):
                continue
            owner = f"{self.root_owner}:{planned}"
            env_entries = store.read_path(owner)
            # Answered on the environment's path: its result cites the call
            # (the fork record there cites it too, as the root's head then).
            if any(
                is_result(e)
                and record.record_id in e.record.envelope.caused_by_record_ids
                for e in env_entries
            ):
                continue
            self._recover_open(record.record_id, owner, planned, finish)

    def _recover_open(
        self,
        call_id: str,
        owner: str,
        env_id: str,
        finish: Callable[[Environment, str], None],
    ) -> None:
        model = self._runtime.model
        model.refresh()
        scope = model.scope(owner)
        if scope.listed and scope.is_active and Path(scope.sandbox_path).is_dir():
            env = Environment(env_id, owner, Path(scope.sandbox_path))
            self.apply_baseline(env)
            finish(env, call_id)
            return
        stray = self._settings.worktrees / env_id
        if not scope.listed and stray.is_dir():
            _remove_worktree(self._settings.repo, stray)
        outcome = {"success": False, "interrupted": True, "error": _INTERRUPTED}
        self._recorder.capture(self.root_owner, call_id, "open_environment", outcome)

    def sweep_tmp(self) -> None:
        """Remove the temporary directories of environments that are gone."""
        model = self._runtime.model
        model.refresh()
        for scope in model.scopes():
            if scope.parent_owner == self.root_owner and self._problem(scope):
                self._drop_tmp(scope)

    # ------------------------------------------------------------ guidance

    def checkpoints(self, env: Environment) -> Mapping[str, str]:
        """Return the environment's checkpoints and their states."""
        return {
            cp.id: cp.state.value
            for cp in self.manager.checkpoints_for_scope(env.scope_id)
        }


def _tool_of(schema_ref: str) -> str:
    return schema_ref.removeprefix(TOOL_SCHEMA_PREFIX).removesuffix(".v1")


def _remove_worktree(repo: Path, worktree: Path) -> None:
    """Remove a worktree made for a fork that was never recorded."""
    if not (worktree / ".git").is_file():
        return
    git = GitRunner(repo)  # goatherd's safe git configuration (ADR 0067)
    with contextlib.suppress(GitError, SandboxError):
        git.run("worktree", "remove", "--force", str(worktree))
    shutil.rmtree(worktree, ignore_errors=True)
    shutil.rmtree(Path(f"{worktree}.tmp"), ignore_errors=True)
    with contextlib.suppress(GitError, SandboxError):
        git.run("worktree", "prune")


def _delivered_through(entries: Sequence[LogEntry]) -> int:
    """Return the last path ordinal whose guidance a recorded result delivered."""
    through = -1
    for entry in entries:
        if is_result(entry):
            value = entry.record.payload.get("guidance_through")
            if isinstance(value, int) and not isinstance(value, bool):
                through = max(through, value)
    return through
