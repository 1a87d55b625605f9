"""Reading, writing, editing and listing files inside one worktree, and nowhere else.

A path is relative to the worktree. It is checked lexically and resolved
(symlinks that stay inside are followed, one that leads outside is refused)
before anything is opened; then every component of the resolved path is
opened with ``O_NOFOLLOW`` relative to the directory before it, so a symlink
swapped in after the check fails the call instead of leading outside. A file
is read only when it is a regular file: the last component is checked with
``lstat`` before it is opened (a FIFO, socket, device or directory is refused
without opening it), opened with ``O_NONBLOCK`` (a FIFO swapped in after the
check cannot block the open) and checked again with ``fstat`` on the open
descriptor; its size is checked before a byte is read, and at most the limit
plus one byte is ever read, so a file that grows meanwhile is refused too. Writes
go to a new file beside the target, then replace it, so a reader never sees
half a file. The repository's ``.git`` entries are refused: the worktree's
history is the runtime's, not the agent's.

``WorkspaceFiles`` is assembled here from ``file_paths`` (the checks and the
no-follow opening above), ``file_text`` (read, write, edit) and
``file_tree`` (delete, move, list, tree, search).
"""

from __future__ import annotations

from goatherd.integrations.mcp.file_paths import shown_name
from goatherd.integrations.mcp.file_text import (
    MAX_EDIT_BYTES,
    MAX_READ_BYTES,
    MAX_READ_FILE_BYTES,
    MAX_WRITE_BYTES,
    FileText,
    TextRead,
)
from goatherd.integrations.mcp.file_tree import (
    MAX_LIST_ENTRIES,
    MAX_SEARCH_FILE_BYTES,
    MAX_SEARCH_FILES,
    MAX_SEARCH_LINE_BYTES,
    MAX_SEARCH_MATCHES,
    MAX_TREE_DEPTH,
    MAX_TREE_ENTRIES,
    SEARCH_SECONDS,
    FileEntry,
    FileListing,
    FileTree,
    SearchMatch,
    SearchResult,
    TreeEntry,
    TreeListing,
)

__all__ = [
    "FileEntry",
    "FileListing",
    "MAX_EDIT_BYTES",
    "MAX_LIST_ENTRIES",
    "MAX_READ_BYTES",
    "MAX_READ_FILE_BYTES",
    "MAX_SEARCH_FILES",
    "MAX_SEARCH_FILE_BYTES",
    "MAX_SEARCH_LINE_BYTES",
    "MAX_SEARCH_MATCHES",
    "MAX_TREE_DEPTH",
    "MAX_TREE_ENTRIES",
    "MAX_WRITE_BYTES",
    "SEARCH_SECONDS",
    "SearchMatch",
    "SearchResult",
    "TextRead",
    "TreeEntry",
    "TreeListing",
    "WorkspaceFiles",
    "shown_name",
]


class WorkspaceFiles(FileText, FileTree):
    """File operations confined to one worktree directory."""
