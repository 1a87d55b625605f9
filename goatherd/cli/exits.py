"""Exit codes of ``goatherd`` and the exception that carries a specific one."""

from __future__ import annotations

from typing import Final

__all__ = [
    "CommandError",
    "EXIT_ADDRESS_IN_USE",
    "EXIT_FAILED",
    "EXIT_INCOMPLETE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
]

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_ADDRESS_IN_USE: Final = 3
EXIT_INCOMPLETE: Final = 4
"""``redact``: the erasure was recorded, but erased bytes may remain."""
EXIT_INTERRUPTED: Final = 130


class CommandError(Exception):
    """A command failed in a way that has its own exit code and one-line message."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.exit_code = exit_code
