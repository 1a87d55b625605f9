"""What each tool returns as structured content: the ``outputSchema`` of tools/list.

Each model is the shape of a successful call's ``structuredContent`` (the
text content says the same for clients that read only text). The server
declares it on the tool, the SDK validates every successful result against
it before it leaves, and clients may validate it again. A call that fails
(``isError``) carries ``{"error": ...}`` or ``{"denied": ...}`` instead,
which MCP leaves outside the output schema.

Every model may carry ``guidance``: the supervisor's guidance delivered
with the result.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

__all__ = [
    "ApplyPatchOutput",
    "CheckpointOutput",
    "DeletePathOutput",
    "DiffOutput",
    "EditFileOutput",
    "EnvironmentsOutput",
    "ListFilesOutput",
    "MovePathOutput",
    "OpenEnvironmentOutput",
    "ProposeOutput",
    "ReadFileOutput",
    "RestoreOutput",
    "RunOutput",
    "SearchOutput",
    "ToolOutput",
    "TreeOutput",
    "WriteFileOutput",
]


class ToolOutput(BaseModel):
    """Fields every tool's result may carry."""

    guidance: list[str] | None = Field(
        default=None, description="the supervisor's guidance, if any was sent"
    )


class OpenEnvironmentOutput(ToolOutput):
    """An opened or resumed environment."""

    environment_id: str = Field(description="pass it to every other tool")
    scope_id: str = Field(description="the environment's scope in the trace")
    resumed: bool = Field(description="an existing environment was resumed")
    checkpoints: dict[str, str] = Field(
        description="a resumed environment's checkpoints and their states"
    )


class EnvironmentOutputRef(BaseModel):
    """An output of an environment and its state."""

    output_id: str
    state: str


class EnvironmentEntry(BaseModel):
    """One environment of the repository."""

    environment_id: str
    scope_id: str
    state: str
    outputs: list[EnvironmentOutputRef]


class EnvironmentsOutput(ToolOutput):
    """The repository's environments."""

    environments: list[EnvironmentEntry]


class RunOutput(ToolOutput):
    """A command that ran to its end."""

    exit_code: int = Field(description="the command's exit status")
    duration_seconds: float
    stdout: str
    stderr: str
    stdout_dropped_bytes: int = Field(description="bytes of stdout not kept (middle)")
    stderr_dropped_bytes: int = Field(description="bytes of stderr not kept (middle)")
    checkpoint_id: str | None = Field(
        default=None,
        description="the checkpoint taken before a removal in the worktree"
        " (restore it to undo the command)",
    )


class ReadFileOutput(ToolOutput):
    """Lines of a text file."""

    path: str
    content: str = Field(description="the lines read, raw (no numbers)")
    first_line: int
    last_line: int
    total_lines: int
    size: int = Field(description="the file's size in bytes")


class WriteFileOutput(ToolOutput):
    """A written file."""

    path: str
    bytes: int
    created: bool


class EditFileOutput(ToolOutput):
    """An edited file."""

    path: str
    replacements: int


class FileEntryOutput(BaseModel):
    """One listed entry."""

    path: str
    kind: str = Field(description="file, directory, symlink or other")
    size: int


class ListFilesOutput(ToolOutput):
    """A directory's entries."""

    entries: list[FileEntryOutput]
    truncated: bool


class TreeEntryOutput(BaseModel):
    """One entry of a tree."""

    path: str
    kind: str = Field(description="file, directory, symlink or other")
    depth: int = Field(description="1: directly in the listed directory")
    size: int
    target: str | None = Field(default=None, description="a symlink's target")


class TreeOutput(ToolOutput):
    """A directory tree."""

    entries: list[TreeEntryOutput]
    truncated: bool


class SearchMatchOutput(BaseModel):
    """One matching line."""

    path: str
    line: int
    text: str


class SearchOutput(ToolOutput):
    """What a search found."""

    matches: list[SearchMatchOutput]
    files_searched: int
    files_skipped: int = Field(description="binary, too large or unreadable")
    truncated: bool = Field(description="the search stopped early (see reason)")
    reason: str


class PatchedFileOutput(BaseModel):
    """A file a patch changed."""

    path: str
    added: int
    deleted: int


class ApplyPatchOutput(ToolOutput):
    """An applied patch."""

    files: list[PatchedFileOutput]


class DeletePathOutput(ToolOutput):
    """A removed entry."""

    path: str
    kind: str


class MovePathOutput(ToolOutput):
    """A renamed entry."""

    source: str
    destination: str
    kind: str


class CheckpointOutput(ToolOutput):
    """A checkpoint taken."""

    checkpoint_id: str
    label: str


class RestoreOutput(ToolOutput):
    """A restored checkpoint."""

    checkpoint_id: str
    conversation: str


class DiffOutput(ToolOutput):
    """The worktree's changes against its base."""

    diff: str
    files: list[str]


class ProposeOutput(ToolOutput):
    """A proposal (sealed output) for a human to settle."""

    output_id: str
    changes: list[dict[str, str]]
    settle: str = Field(description="a command a human can run to select it")
    settle_commit: str = Field(
        description="the same, landing it as one git commit on the repository's"
        " branch whose trailers name the output (Goatherd-Output)"
    )
    unchanged: bool = Field(
        description="nothing changed since this output was proposed"
    )
