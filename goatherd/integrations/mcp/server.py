"""The MCP server: the tools and resources on the official SDK, over stdio or HTTP.

:func:`build_server` binds :class:`~goatherd.integrations.mcp.tools.WorkspaceTools`
to an SDK ``MCPServer``: typed tool signatures (the JSON schemas agents see),
results as text plus structured content, refusals as tool errors (one line),
and arguments that do not fit the schema refused in one line naming the
field, before anything runs or is recorded. :func:`serve` runs it over stdio
(what MCP clients start) or streamable HTTP on a loopback address.
"""

from __future__ import annotations

import importlib.util
import ipaddress
import json
import socket
import sys
import types
from collections.abc import Callable
from typing import Annotated, Any, Final


class _DeferredPackage(types.ModuleType):
    """The SDK's ``mcp`` package before its ``__init__`` has run.

    The package's ``__init__`` re-exports the client (``Client``,
    ``ClientSession``, ``stdio_client``...), so importing any server module
    through it loads the whole client side too. Standing in for it, this
    module lets ``mcp.server...`` and ``mcp.shared...`` load from the
    package's directory alone; the first read of a name of the package itself
    (``from mcp import Client`` in the same process) runs the real
    ``__init__`` in this module, after which it is the package as usual.
    """

    def __getattr__(self, name: str) -> Any:
        spec = self.__spec__
        if name.startswith("__") or spec is None or spec.loader is None:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        if self.__dict__.get("_goatherd_deferred", True):
            self._goatherd_deferred = False
            spec.loader.exec_module(self)
        try:
            return self.__dict__[name]
        except KeyError:
            raise AttributeError(
                f"module {self.__name__!r} has no attribute {name!r}"
            ) from None


def _server_side_only() -> None:
    """Let the server modules import without the SDK's client (ADR 0081)."""
    if "mcp" in sys.modules:
        return
    spec = importlib.util.find_spec("mcp")
    if spec is None or spec.loader is None or not spec.submodule_search_locations:
        return  # not installed: the import below says so
    package = _DeferredPackage("mcp")
    package.__spec__ = spec
    package.__loader__ = spec.loader
    package.__file__ = spec.origin
    package.__path__ = list(spec.submodule_search_locations)
    package.__package__ = "mcp"
    sys.modules["mcp"] = package


_server_side_only()

import anyio  # noqa: E402
from mcp.server import MCPServer  # noqa: E402
from mcp.server.mcpserver import Context  # noqa: E402
from mcp.server.mcpserver.exceptions import ResourceError, ToolError  # noqa: E402
from mcp_types import CallToolResult, ContentBlock, TextContent  # noqa: E402
from pydantic import Field, ValidationError  # noqa: E402

from goatherd.integrations.mcp.environments import MAX_TIMEOUT  # noqa: E402
from goatherd.integrations.mcp.errors import ToolRefusedError  # noqa: E402
from goatherd.integrations.mcp.files import (  # noqa: E402
    MAX_SEARCH_MATCHES,
    MAX_TREE_DEPTH,
    MAX_TREE_ENTRIES,
)
from goatherd.integrations.mcp.patching import MAX_PATCH_BYTES  # noqa: E402
from goatherd.integrations.mcp.schemas import (  # noqa: E402
    ApplyPatchOutput,
    CheckpointOutput,
    DeletePathOutput,
    DiffOutput,
    EditFileOutput,
    EnvironmentsOutput,
    ListFilesOutput,
    MovePathOutput,
    OpenEnvironmentOutput,
    ProposeOutput,
    ReadFileOutput,
    RestoreOutput,
    RunOutput,
    SearchOutput,
    TreeOutput,
    WriteFileOutput,
)
from goatherd.integrations.mcp.tools import (  # noqa: E402
    MAX_ARGUMENT_BYTES,
    ToolReply,
    WorkspaceTools,
)

__all__ = ["INSTRUCTIONS", "build_server", "require_loopback", "serve", "serve_http"]

INSTRUCTIONS: Final = """\
goatherd gives you an isolated, reversible environment in this git repository:
a worktree of your own, forked from the repository. Every call you make is
recorded in an audited trace, and a supervisor judges each one.

1. open_environment (or resume one by its id) and keep its environment_id.
2. Work only through these tools: run (a shell command, confined to the
   worktree, with a timeout), read_file, write_file, edit_file, apply_patch,
   list_files, tree, search, delete_path and move_path (rm -r of literal
   paths inside the worktree runs after a checkpoint the server takes).
3. checkpoint before a risky step (pass your conversation so far if you want
   it back); restore rolls the worktree back, once per checkpoint.
4. diff shows your changes against the base; propose seals them for a human,
   who selects, applies or discards them. You never change the repository
   itself.
A call the supervisor denies returns an error naming the rule; guidance it
sends arrives with your next result."""

_ENV_ID = "the environment's id (from open_environment, e.g. env-1a2b3c4d)"


def _reply(reply: ToolReply) -> CallToolResult:
    content: list[ContentBlock] = [TextContent(type="text", text=reply.text)]
    data: dict[str, Any] = dict(reply.data)
    if reply.guidance:
        lines = "\n".join(f"- {text}" for text in reply.guidance)
        content.append(TextContent(type="text", text=f"Supervisor guidance:\n{lines}"))
        data["guidance"] = list(reply.guidance)
    return CallToolResult(
        content=content, structured_content=data, is_error=reply.is_error
    )


def _safe(call: Callable[[], ToolReply]) -> CallToolResult:
    try:
        return _reply(call())
    except ToolRefusedError as error:
        return _reply(ToolReply(str(error), {"error": str(error)}, True))


def _validation_message(error: ValidationError) -> str:
    problems = []
    for item in error.errors(include_url=False, include_input=False):
        field = ".".join(str(part) for part in item["loc"]) or "arguments"
        if item["type"] == "missing":
            problems.append(f"missing argument {field!r}")
        else:
            problems.append(f"{field}: {item['msg']}")
    return "; ".join(problems)


class _Server(MCPServer[Any]):
    """An ``MCPServer`` whose argument errors are one line naming the field."""

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        context: Context[Any, Any] | None = None,
    ) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as error:
            cause = error.__cause__
            if isinstance(cause, ValidationError):
                raise ToolError(
                    f"{name}: bad arguments: {_validation_message(cause)}"
                ) from None
            raise


def _client(ctx: Context[Any, Any]) -> dict[str, str]:
    try:
        params = ctx.session.client_params
    except (AttributeError, ValueError, RuntimeError):
        return {}
    info = getattr(params, "client_info", None)
    if info is None:
        return {}
    return {"name": str(info.name)[:200], "version": str(info.version)[:200]}


def build_server(tools: WorkspaceTools, *, version: str = "") -> MCPServer[Any]:
    """Return the MCP server that serves ``tools``."""
    server = _Server(
        "goatherd", instructions=INSTRUCTIONS, version=version, log_level="WARNING"
    )
    _environment_tools(server, tools)
    _file_tools(server, tools)
    _finding_tools(server, tools)
    _path_tools(server, tools)
    _lifecycle_tools(server, tools)
    _resources(server, tools)
    return server


EnvId = Annotated[str, Field(description=_ENV_ID, max_length=256)]
Path = Annotated[
    str, Field(description="a path relative to the worktree root", max_length=4096)
]
Text = Annotated[str, Field(max_length=MAX_ARGUMENT_BYTES)]


def _environment_tools(server: MCPServer[Any], tools: WorkspaceTools) -> None:
    @server.tool()
    def open_environment(
        ctx: Context[Any, Any],
        name: Annotated[
            str,
            Field(description="a short name for a new environment", max_length=256),
        ] = "",
        environment_id: Annotated[
            str,
            Field(description="resume this environment instead", max_length=256),
        ] = "",
    ) -> Annotated[CallToolResult, OpenEnvironmentOutput]:
        """Open a new environment (a worktree forked from the repository), or resume."""
        return _safe(
            lambda: tools.open_environment(
                name or None, environment_id or None, _client(ctx)
            )
        )

    @server.tool()
    def list_environments() -> Annotated[CallToolResult, EnvironmentsOutput]:
        """List this repository's environments, their states and proposed outputs."""
        return _safe(tools.list_environments)

    @server.tool()
    def run(
        environment_id: EnvId,
        command: Annotated[
            str, Field(description="a shell command (/bin/sh -c)", max_length=65536)
        ],
        cwd: Annotated[
            str,
            Field(
                description="working directory relative to the worktree",
                max_length=4096,
            ),
        ] = "",
        timeout_seconds: Annotated[
            float | None,
            Field(
                description="kill the command after this many seconds"
                " (default: the server's, usually 120)",
                gt=0,
                le=MAX_TIMEOUT,
            ),
        ] = None,
    ) -> Annotated[CallToolResult, RunOutput]:
        """Run a shell command in the worktree, confined (it writes there and $TMPDIR).

        Returns the exit code, stdout and stderr (long output keeps its start
        and end). A command the supervisor judges destructive is denied.
        """
        return _safe(lambda: tools.run(environment_id, command, cwd, timeout_seconds))


def _file_tools(server: MCPServer[Any], tools: WorkspaceTools) -> None:
    @server.tool()
    def read_file(
        environment_id: EnvId,
        path: Path,
        start_line: Annotated[
            int, Field(description="first line (1-based)", ge=1, le=2**31)
        ] = 1,
        max_lines: Annotated[
            int, Field(description="how many lines at most", ge=1, le=100_000)
        ] = 2000,
        line_numbers: Annotated[
            bool, Field(description="prefix each line with its number and a tab")
        ] = False,
    ) -> Annotated[CallToolResult, ReadFileOutput]:
        """Read lines of a text file in the worktree (a range, numbered if asked)."""
        return _safe(
            lambda: tools.read_file(
                environment_id, path, start_line, max_lines, line_numbers
            )
        )

    @server.tool()
    def write_file(
        environment_id: EnvId,
        path: Path,
        content: Annotated[
            Text, Field(description="the whole new content (UTF-8, at most 4 MiB)")
        ],
    ) -> Annotated[CallToolResult, WriteFileOutput]:
        """Create or replace a file in the worktree (parent directories are made)."""
        return _safe(lambda: tools.write_file(environment_id, path, content))

    @server.tool()
    def edit_file(
        environment_id: EnvId,
        path: Path,
        old_text: Annotated[Text, Field(description="exact text to replace")],
        new_text: Annotated[Text, Field(description="its replacement")],
        replace_all: Annotated[
            bool, Field(description="replace every occurrence, not exactly one")
        ] = False,
    ) -> Annotated[CallToolResult, EditFileOutput]:
        """Replace exact text in a file of the worktree (it must occur exactly once)."""
        return _safe(
            lambda: tools.edit_file(
                environment_id, path, old_text, new_text, replace_all
            )
        )

    @server.tool()
    def list_files(
        environment_id: EnvId,
        path: Annotated[
            str, Field(description="a directory ('' is the root)", max_length=4096)
        ] = "",
        recursive: Annotated[
            bool,
            Field(
                description="also list every subdirectory's entries"
                " (at most 2,000 entries in all)"
            ),
        ] = False,
    ) -> Annotated[CallToolResult, ListFilesOutput]:
        """List a directory of the worktree (.git left out)."""
        return _safe(lambda: tools.list_files(environment_id, path, recursive))


def _finding_tools(server: MCPServer[Any], tools: WorkspaceTools) -> None:
    @server.tool()
    def search(
        environment_id: EnvId,
        pattern: Annotated[
            str,
            Field(
                description="a Python regular expression, matched against each line",
                max_length=4096,
            ),
        ],
        path: Annotated[
            str,
            Field(
                description="a directory or file to search ('' is the worktree)",
                max_length=4096,
            ),
        ] = "",
        glob: Annotated[
            str,
            Field(
                description="only files whose name or path matches (e.g. *.py)",
                max_length=1024,
            ),
        ] = "",
        ignore_case: Annotated[
            bool, Field(description="match regardless of case")
        ] = False,
        max_matches: Annotated[
            int,
            Field(
                description="stop after this many lines", ge=1, le=MAX_SEARCH_MATCHES
            ),
        ] = 200,
    ) -> Annotated[CallToolResult, SearchOutput]:
        """Search the worktree's text files for a regular expression (as ripgrep).

        Returns path:line:text for each matching line. Skips .git, symlinks,
        binary and very large files; stops at max_matches or after 10 s,
        saying so (truncated).
        """
        return _safe(
            lambda: tools.search(
                environment_id, pattern, path, glob, ignore_case, max_matches
            )
        )

    @server.tool()
    def tree(
        environment_id: EnvId,
        path: Annotated[
            str, Field(description="a directory ('' is the root)", max_length=4096)
        ] = "",
        depth: Annotated[
            int,
            Field(description="how many levels down", ge=1, le=MAX_TREE_DEPTH),
        ] = 3,
        max_entries: Annotated[
            int,
            Field(
                description="stop after this many entries", ge=1, le=MAX_TREE_ENTRIES
            ),
        ] = 500,
    ) -> Annotated[CallToolResult, TreeOutput]:
        """List a directory of the worktree as a tree (dirs end in /, links ->)."""
        return _safe(lambda: tools.tree(environment_id, path, depth, max_entries))

    @server.tool()
    def apply_patch(
        environment_id: EnvId,
        patch: Annotated[
            str,
            Field(
                description="a unified diff (git diff style: --- a/path, +++ b/path)",
                max_length=MAX_PATCH_BYTES,
            ),
        ],
    ) -> Annotated[CallToolResult, ApplyPatchOutput]:
        """Apply a unified diff to the worktree: every hunk, or nothing at all.

        A hunk that does not match is refused naming its file and hunk.
        """
        return _safe(lambda: tools.apply_patch(environment_id, patch))


def _path_tools(server: MCPServer[Any], tools: WorkspaceTools) -> None:
    @server.tool()
    def delete_path(
        environment_id: EnvId,
        path: Path,
        recursive: Annotated[
            bool,
            Field(description="also remove a directory with everything in it"),
        ] = False,
    ) -> Annotated[CallToolResult, DeletePathOutput]:
        """Remove a file, a symlink or (recursive) a directory of the worktree.

        Reversible like every change in the worktree: checkpoint first to get
        it back with restore, or leave it out of what you propose.
        """
        return _safe(lambda: tools.delete_path(environment_id, path, recursive))

    @server.tool()
    def move_path(
        environment_id: EnvId,
        source: Path,
        destination: Path,
    ) -> Annotated[CallToolResult, MovePathOutput]:
        """Rename a file or directory of the worktree (to a name not taken)."""
        return _safe(lambda: tools.move_path(environment_id, source, destination))


def _lifecycle_tools(server: MCPServer[Any], tools: WorkspaceTools) -> None:
    @server.tool()
    def checkpoint(
        environment_id: EnvId,
        conversation: Annotated[
            Text,
            Field(description="a snapshot of your conversation, returned by restore"),
        ] = "",
        label: Annotated[str, Field(description="a note", max_length=1024)] = "",
    ) -> Annotated[CallToolResult, CheckpointOutput]:
        """Checkpoint the worktree (and optionally your conversation)."""
        return _safe(lambda: tools.checkpoint(environment_id, conversation, label))

    @server.tool()
    def restore(
        environment_id: EnvId,
        checkpoint_id: Annotated[
            str, Field(description="from checkpoint", max_length=1024)
        ],
    ) -> Annotated[CallToolResult, RestoreOutput]:
        """Roll the worktree back to a checkpoint (once); returns its conversation."""
        return _safe(lambda: tools.restore(environment_id, checkpoint_id))

    @server.tool()
    def diff(
        environment_id: EnvId,
        max_lines: Annotated[
            int, Field(description="cut the diff after this", ge=1, le=100_000)
        ] = 2000,
    ) -> Annotated[CallToolResult, DiffOutput]:
        """Show the worktree's changes against its base (a unified diff)."""
        return _safe(lambda: tools.diff(environment_id, max_lines))

    @server.tool()
    def propose(
        environment_id: EnvId,
        summary: Annotated[
            str, Field(description="what you changed and why", max_length=65536)
        ] = "",
    ) -> Annotated[CallToolResult, ProposeOutput]:
        """Seal the worktree's changes as an output for a human to settle."""
        return _safe(lambda: tools.propose(environment_id, summary))


def _resources(server: MCPServer[Any], tools: WorkspaceTools) -> None:
    def guarded(read: Callable[[], str]) -> str:
        try:
            return read()
        except ToolRefusedError as error:
            raise ResourceError(str(error)) from None

    @server.resource("goatherd://environments", mime_type="application/json")
    def environments() -> str:
        """The repository's environments."""
        infos = [info.as_dict() for info in tools.environments.infos()]
        return json.dumps({"environments": infos}, indent=1)

    @server.resource(
        "goatherd://environments/{environment_id}/records",
        mime_type="application/json",
    )
    def records(environment_id: str) -> str:
        """The environment's latest records in the trace."""
        return guarded(lambda: tools.recent_records(environment_id))

    @server.resource(
        "goatherd://environments/{environment_id}/diff", mime_type="text/x-diff"
    )
    def diff(environment_id: str) -> str:
        """The environment's changes against its base."""
        return guarded(lambda: tools.diff_text(environment_id))


def require_loopback(host: str) -> None:
    """Refuse a host that is not a loopback address (``localhost`` is one).

    Raises:
        ValueError: naming the host.
    """
    if host == "localhost":
        return
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        raise ValueError(f"--http needs a loopback address, got {host!r}") from None
    if not address.is_loopback:
        raise ValueError(f"--http serves on loopback only, not {host}")


def serve_http(
    server: MCPServer[Any],
    host: str,
    port: int,
    announce: Callable[[str], None],
) -> None:
    """Serve streamable HTTP on a loopback address; ``announce`` gets the URL.

    The socket is bound before the URL is announced (port 0 picks one).

    Raises:
        ValueError: ``host`` is not a loopback address.
        OSError: the address is in use.
    """
    import uvicorn

    require_loopback(host)
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host.strip("[]"), port))
    sock.listen(64)
    bound = sock.getsockname()[1]
    app = server.streamable_http_app(host=host.strip("[]"))
    shown = f"[{host.strip('[]')}]" if family == socket.AF_INET6 else host
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    announce(f"http://{shown}:{bound}/mcp")
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))


def serve(server: MCPServer[Any]) -> None:
    """Serve over stdio until the client closes the connection."""
    server.run("stdio")
    sys.stdout.flush()
