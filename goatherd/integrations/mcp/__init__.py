"""``goatherd mcp``: reversible, audited workspaces for any MCP coding agent.

Needs ``pip install goatherd[mcp]`` (the official ``mcp`` SDK). An agent
opens an environment (a scope forked in its own git worktree), works in it
through tools that are each recorded as a declaration and a capture on the
environment's owner path and judged by the supervisor, checkpoints and
restores it, and proposes it as an output a human settles with the
``goatherd`` command line. See docs/mcp.md.
"""

from __future__ import annotations

from goatherd.integrations.mcp.environments import (
    COMMAND_ENV_ALLOWLIST,
    DEFAULT_OUTPUT_LIMIT,
    DEFAULT_TIMEOUT,
    MAX_TIMEOUT,
    Environment,
    EnvironmentInfo,
    Environments,
    McpSettings,
    root_owner_for,
)
from goatherd.integrations.mcp.errors import (
    EnvironmentUnavailableError,
    ToolInputError,
    ToolRefusedError,
)
from goatherd.integrations.mcp.policy import (
    DESTRUCTIVE_COMMAND_RULE,
    default_rules,
    destructive_command_rule,
    destructive_reason,
    own_removal_targets,
)
from goatherd.integrations.mcp.recording import (
    SERVER_STARTED_SCHEMA,
    TOOL_SCHEMA_PREFIX,
    call_schema,
    result_schema,
)
from goatherd.integrations.mcp.server import (
    INSTRUCTIONS,
    build_server,
    require_loopback,
    serve,
    serve_http,
)
from goatherd.integrations.mcp.tools import ToolReply, WorkspaceTools

__all__ = [
    "COMMAND_ENV_ALLOWLIST",
    "DEFAULT_OUTPUT_LIMIT",
    "DEFAULT_TIMEOUT",
    "DESTRUCTIVE_COMMAND_RULE",
    "Environment",
    "EnvironmentInfo",
    "EnvironmentUnavailableError",
    "Environments",
    "INSTRUCTIONS",
    "MAX_TIMEOUT",
    "McpSettings",
    "SERVER_STARTED_SCHEMA",
    "TOOL_SCHEMA_PREFIX",
    "ToolInputError",
    "ToolRefusedError",
    "ToolReply",
    "WorkspaceTools",
    "build_server",
    "call_schema",
    "default_rules",
    "destructive_command_rule",
    "destructive_reason",
    "own_removal_targets",
    "require_loopback",
    "result_schema",
    "root_owner_for",
    "serve",
    "serve_http",
]
