"""The supervisor's rules on every MCP tool call.

The server presents each call's declaration to the supervisor's synchronous
gate before the call runs, and each call's capture after it. The default
rules (:func:`default_rules`), in the order the gate consults them:

* ``destructive_command_block`` (:func:`destructive_command_rule`): denies a
  ``run`` whose shell command removes trees or wipes state: ``rm`` with a
  recursive option, ``find`` with ``-delete`` or ``-exec`` of such a command,
  ``shred``, ``wipefs``, ``mkfs``, ``dd of=``, ``git clean`` that is not a dry
  run, ``git reset --hard``, forced ``git push``, and ``chmod``/``chown``/
  ``chgrp`` with ``-R``. It reads the command with a shell grammar
  (:mod:`goatherd.integrations.mcp.shell`: quoting, ``$'...'``, every
  substitution, here-documents), looks through wrappers (``sudo``, ``env``,
  ``xargs``, ``timeout``...), ``sh -c`` and ``eval`` strings, ``find -exec``
  and git aliases, and reads options as ``getopt_long`` and git do (any
  order, clusters, long options by unique prefix). What it cannot read, a
  command whose name is computed at run time and a computed option of
  ``rm``/``git reset``/``git push`` are denied too. It is a guard against
  accidents, not a boundary: a command can hide what it does (a script,
  ``python -c``). The boundary is Landlock (a command writes nothing outside
  its worktree) and the checkpoints (whatever it did in the worktree can be
  rolled back).

  One exception keeps agents from routing around the rule (ADR 0086): a
  line whose only destructive commands are plain ``rm -r`` of literal paths
  inside the agent's own worktree (:func:`own_removal_targets`: no glob,
  variable, ``~``, ``..``, absolute path, ``.git`` or the worktree itself,
  and no ``cd`` on the line) passes when its declaration carries the
  ``checkpoint_id`` the server took first, after checking that each target
  resolves inside the worktree. Anything else stays denied.
* ``stuck_detection`` (built in): guidance after the same call five times
  running.
* ``error_rate_guard`` (built in): guidance when half of the last ten calls
  failed (judged on captures).

The rules are made here; what they read lives in ``destructive`` (the
command reader and its program judges), ``own_removal`` (the own-worktree
exception) and ``command_options`` (the option reading both share).
"""

from __future__ import annotations

from typing import Final

from goatherd.domain import (
    DECLARATION,
    Intervention,
    InterventionType,
    SupervisedEvent,
    SupervisionRule,
    high_error_rate_rule,
    is_bash_call,
    scope_id_for_owner,
    stuck_detection_rule,
)
from goatherd.integrations.mcp.destructive import destructive_reason
from goatherd.integrations.mcp.own_removal import own_removal_targets

__all__ = [
    "DESTRUCTIVE_COMMAND_RULE",
    "ERROR_RATE_THRESHOLD",
    "ERROR_RATE_WINDOW",
    "STUCK_REPEATS",
    "default_rules",
    "destructive_command_rule",
    "destructive_reason",
    "own_removal_targets",
]

DESTRUCTIVE_COMMAND_RULE: Final = "destructive_command_block"
STUCK_REPEATS: Final = 5
ERROR_RATE_THRESHOLD: Final = 0.5
ERROR_RATE_WINDOW: Final = 10


def destructive_command_rule() -> SupervisionRule:
    """Deny a declared shell call whose command :func:`destructive_reason` flags.

    It matches declarations that are shell calls (kind label ``bash``, as the
    server records ``run``) and reads their ``cmd``.
    """

    def match(event: SupervisedEvent) -> bool:
        return (
            event.mode == DECLARATION
            and is_bash_call(event)
            and isinstance(event.payload.get("cmd"), str)
        )

    def action(event: SupervisedEvent) -> Intervention | None:
        command = str(event.payload["cmd"])
        reason = destructive_reason(command)
        if reason is None:
            return None
        cwd = event.payload.get("cwd", "")
        checkpointed = isinstance(event.payload.get("checkpoint_id"), str)
        own = isinstance(cwd, str) and own_removal_targets(command, cwd) is not None
        if checkpointed and own:
            return None  # the agent's own worktree, checkpointed first
        hint = ""
        if reason == "rm -r":
            hint = (
                " rm -r runs only on literal paths inside your worktree (no glob,"
                " variable, ~, .., absolute path, .git or cd; the server"
                " checkpoints first); or use delete_path."
            )
        return Intervention(
            InterventionType.DENY,
            scope_id_for_owner(event.trace_owner_id),
            f"Blocked destructive command ({reason}). Supervisor denied.{hint}",
        )

    return SupervisionRule(DESTRUCTIVE_COMMAND_RULE, match, action)


def default_rules() -> tuple[SupervisionRule, ...]:
    """Return the server's rules: the command block, then the built-in guides."""
    return (
        destructive_command_rule(),
        stuck_detection_rule(STUCK_REPEATS),
        high_error_rate_rule(ERROR_RATE_THRESHOLD, ERROR_RATE_WINDOW),
    )
