"""Which sandbox object this process uses for which workspace (process state).

A sandbox object (a git worktree handle, an in-memory tree) cannot live in
the trace; what the trace holds is each workspace-owning scope's recorded
backend and address (``scope.created`` for roots, ``scope.forked`` for
isolated children). As the seed's resolver contract has it, a root is asked
for as ``(scope_id, "", "")`` (its recorded address is for people and
tools), an isolated child with its recorded backend and address.
:class:`SandboxBindings` keeps the objects this process holds, and asks the
host's resolver for the others the first time a command needs one, the way
recovery re-adopts them. Shared children never get a binding of their own:
they work in their nearest owning ancestor's sandbox.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from goatherd.application.errors import SandboxError
from goatherd.application.ports import Sandbox
from goatherd.domain import ScopeAggregate

__all__ = ["SandboxBinding", "SandboxBindings", "SandboxResolver"]

SandboxResolver = Callable[[str, str, str], Sandbox | None]
"""``(scope_id, backend, recorded_path) -> sandbox | None``: the host re-adopts
a scope's sandbox (``None``: deliberately not adopted)."""


@dataclass(frozen=True, slots=True)
class SandboxBinding:
    """A sandbox object and whether the scope owns (and so destroys) it."""

    sandbox: Sandbox
    owns: bool


class SandboxBindings:
    """The sandboxes of this process, by workspace-owning scope (thread-safe)."""

    def __init__(
        self,
        resolver: SandboxResolver | None = None,
        *,
        teardown: SandboxResolver | None = None,
    ) -> None:
        """Use ``resolver`` for workspaces this process holds no object for.

        ``teardown`` adopts an ended scope's recorded owned sandbox only to
        destroy it, when ``resolver`` adopted none (a plain manager).
        """
        self._resolver = resolver
        self._teardown = teardown
        self._bound: dict[str, SandboxBinding | None] = {}
        self._lock = threading.Lock()

    @property
    def resolver(self) -> SandboxResolver | None:
        """The host's resolver (``None``: only explicitly bound sandboxes)."""
        return self._resolver

    def bind(self, owner: str, sandbox: Sandbox | None, *, owns: bool) -> None:
        """Use ``sandbox`` for ``owner``'s workspace in this process."""
        with self._lock:
            self._bound[owner] = (
                None if sandbox is None else SandboxBinding(sandbox, owns)
            )

    def forget(self, owner: str) -> None:
        """Drop ``owner``'s binding (its sandbox was destroyed)."""
        with self._lock:
            self._bound[owner] = None

    def resolve(self, scope: ScopeAggregate) -> SandboxBinding | None:
        """Return the binding of a workspace-owning ``scope`` (resolving once).

        Raises:
            SandboxError: the resolver failed.
        """
        with self._lock:
            if scope.owner in self._bound:
                return self._bound[scope.owner]
        binding = self._adopt(scope)
        with self._lock:
            return self._bound.setdefault(scope.owner, binding)

    def for_teardown(self, scope: ScopeAggregate) -> SandboxBinding | None:
        """Return the owned binding of isolated ``scope`` to destroy it.

        The binding this process holds or its resolver adopts; failing that,
        what the teardown resolver adopts from the recorded address (never
        cached: the sandbox is about to go).

        Raises:
            SandboxError: a resolver failed.
        """
        binding = self.resolve(scope)
        if binding is not None or self._teardown is None:
            return binding
        if not scope.isolated or scope.sandbox_destroyed:
            return None
        try:
            sandbox = self._teardown(
                scope.scope_id, scope.sandbox_backend, scope.sandbox_path
            )
        except Exception as error:  # the host's code: any failure is reported
            raise SandboxError(
                f"tear down scope {scope.scope_id}: adopt sandbox: {error}"
            ) from error
        return None if sandbox is None else SandboxBinding(sandbox, owns=True)

    def _adopt(self, scope: ScopeAggregate) -> SandboxBinding | None:
        if self._resolver is None or scope.sandbox_destroyed:
            return None
        # The seed's contract: a root is asked for as ("", ""), an isolated
        # child with its recorded backend and address.
        backend, path = (
            ("", "")
            if scope.parent_owner is None
            else (
                scope.sandbox_backend,
                scope.sandbox_path,
            )
        )
        try:
            sandbox = self._resolver(scope.scope_id, backend, path)
        except Exception as error:  # the host's code: any failure is reported
            raise SandboxError(
                f"recover scope {scope.scope_id}: re-adopt sandbox: {error}"
            ) from error
        if sandbox is None:
            return None
        return SandboxBinding(sandbox, owns=scope.isolated)
