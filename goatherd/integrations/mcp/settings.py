"""``McpSettings``: what a server serves and how it confines commands.

The settings dataclass with its defaults (``DEFAULT_TIMEOUT``,
``MAX_TIMEOUT``, ``DEFAULT_OUTPUT_LIMIT``), and the environment a command
starts from (``COMMAND_ENV_ALLOWLIST``, ``command_environment``). Imports
the application's ``NetworkMode`` and the domain's ``SupervisionRule`` only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from goatherd.application import NetworkMode
from goatherd.domain import SupervisionRule

__all__ = [
    "COMMAND_ENV_ALLOWLIST",
    "DEFAULT_OUTPUT_LIMIT",
    "DEFAULT_TIMEOUT",
    "MAX_TIMEOUT",
    "McpSettings",
    "command_environment",
]

DEFAULT_TIMEOUT: Final = 120.0
MAX_TIMEOUT: Final = 3600.0
DEFAULT_OUTPUT_LIMIT: Final = 32 * 1024
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
