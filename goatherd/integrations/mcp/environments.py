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

``Environments`` is assembled here from ``environment_core`` (the root,
lookup, creation, listing) and ``environment_recovery`` (a call's view of
its path, recovery of what a dead server left); the settings live in
``settings``.
"""

from __future__ import annotations

from goatherd.integrations.mcp.environment_core import (
    ROOT_PREFIX,
    TMP_MARKER,
    Environment,
    EnvironmentInfo,
    Observation,
    root_owner_for,
    unwrap,
)
from goatherd.integrations.mcp.environment_recovery import EnvironmentRecovery
from goatherd.integrations.mcp.settings import (
    COMMAND_ENV_ALLOWLIST,
    DEFAULT_OUTPUT_LIMIT,
    DEFAULT_TIMEOUT,
    MAX_TIMEOUT,
    McpSettings,
    command_environment,
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


class Environments(EnvironmentRecovery):
    """The repository's environments, read from and recorded in the trace."""
