"""The tools an agent calls, independent of the protocol that carries them.

Every call on an environment goes the same way (:meth:`WorkspaceTools._call`):

1. the environment is looked up in the trace (unknown, halted, discarded or
   settled: a one-line error, nothing recorded);
2. the call's declaration is recorded on the environment's owner path;
3. the supervisor's gate judges the declaration: a denial (or halt) is
   recorded as its decision, the call does not run, and the agent gets a tool
   error naming the rule; guidance comes back with the result;
4. the call runs; its capture (outcome, ``success``) is recorded, caused by
   the declaration, and the gate judges the capture too (the error-rate rule);
5. guidance recorded on the environment since the last call (an ``inject``
   from any process) is delivered with the result.

A refused call (a path outside the worktree, text not found, a checkpoint of
another environment) changes no file and is recorded with its error.

``WorkspaceTools`` is assembled here from its parts: ``tool_calls`` (the
construction and the call's path above), ``tool_environments`` (open, list,
checkpoint, restore, diff, propose and the resources), ``tool_commands``
(``run``) and ``tool_files`` (the file tools).
"""

from __future__ import annotations

import logging

from goatherd.integrations.mcp.tool_calls import MAX_ARGUMENT_BYTES, ToolReply
from goatherd.integrations.mcp.tool_commands import CommandTools
from goatherd.integrations.mcp.tool_environments import (
    MAX_DIFF_BYTES,
    MAX_RECENT_RECORDS,
    EnvironmentTools,
)
from goatherd.integrations.mcp.tool_files import FileTools

__all__ = [
    "MAX_ARGUMENT_BYTES",
    "MAX_DIFF_BYTES",
    "MAX_RECENT_RECORDS",
    "ToolReply",
    "WorkspaceTools",
]

_LOG = logging.getLogger("goatherd.mcp")


class WorkspaceTools(EnvironmentTools, CommandTools, FileTools):
    """The server's tools over one repository and one trace."""
