"""What a tool call can fail with, as the agent sees it (one line each)."""

from __future__ import annotations

from goatherd.domain import GoatherdError

__all__ = ["EnvironmentUnavailableError", "ToolInputError", "ToolRefusedError"]


class ToolRefusedError(GoatherdError):
    """A tool call that did not do what it was asked; nothing changed.

    Its message is the tool error the agent reads: one line naming what was
    wrong.
    """


class ToolInputError(ToolRefusedError, ValueError):
    """An argument the tool cannot act on (a path outside, text not found...)."""


class EnvironmentUnavailableError(ToolRefusedError, LookupError):
    """The environment is unknown, or can no longer be worked in."""
