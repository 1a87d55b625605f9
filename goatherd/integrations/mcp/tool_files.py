"""The file tools: read, write, edit, delete, move, list, search, tree, patch.

``FileTools`` checks each file tool's arguments and runs it on the
environment's worktree through ``WorkspaceFiles`` (or ``apply_patch``),
shaping the reply and the capture. Imports ``tool_calls``.
"""

from __future__ import annotations

from goatherd.integrations.mcp.environments import Environment
from goatherd.integrations.mcp.errors import ToolInputError
from goatherd.integrations.mcp.files import (
    MAX_SEARCH_MATCHES,
    MAX_TREE_DEPTH,
    MAX_TREE_ENTRIES,
    WorkspaceFiles,
    shown_name,
)
from goatherd.integrations.mcp.patching import MAX_PATCH_BYTES, apply_patch
from goatherd.integrations.mcp.recording import text_fields
from goatherd.integrations.mcp.tool_calls import (
    ToolCalls,
    ToolReply,
    _count,
    _Done,
    _text,
)

__all__ = [
    "FileTools",
]


class FileTools(ToolCalls):
    """The file tools over an environment's worktree."""

    # ------------------------------------------------------------ files

    def read_file(
        self,
        environment_id: str,
        path: str,
        start_line: int = 1,
        max_lines: int = 2000,
        line_numbers: bool = False,
    ) -> ToolReply:
        """Return lines of a text file in the worktree (numbered when asked)."""
        _text(path, "path", limit=4096)
        first = _count(start_line, "start_line", 1, 2**31)
        count = _count(max_lines, "max_lines", 1, 100_000)
        if not isinstance(line_numbers, bool):
            raise ToolInputError(
                f"line_numbers must be true or false, got {line_numbers!r}"
            )
        args = {"path": path, "start_line": first, "max_lines": count}
        if line_numbers:
            args["line_numbers"] = True

        def body(env: Environment) -> _Done:
            read = WorkspaceFiles(env.worktree).read_text(path, first, count)
            more = read.last_line < read.total_lines
            note = (
                f"\n[lines {read.first_line}-{read.last_line} of {read.total_lines};"
                f" read on with start_line={read.last_line + 1}]"
                if more
                else ""
            )
            data = {
                "path": path,
                "content": read.text,
                "first_line": read.first_line,
                "last_line": read.last_line,
                "total_lines": read.total_lines,
                "size": read.size,
            }
            record = {"lines": [read.first_line, read.last_line], "size": read.size}
            shown = _numbered(read.text, read.first_line) if line_numbers else read.text
            return _Done(shown + note, data, record)

        return self._call(environment_id, "read_file", args, body)

    def write_file(self, environment_id: str, path: str, content: str) -> ToolReply:
        """Create or replace a file in the worktree."""
        _text(path, "path", limit=4096)
        _text(content, "content")
        args = {"path": path, **text_fields("content", content)}

        def body(env: Environment) -> _Done:
            size, created = WorkspaceFiles(env.worktree).write_text(path, content)
            verb = "created" if created else "replaced"
            data = {"path": path, "bytes": size, "created": created}
            return _Done(f"{verb} {path} ({size} bytes)", data, data)

        return self._call(environment_id, "write_file", args, body)

    def edit_file(
        self,
        environment_id: str,
        path: str,
        old_text: str,
        new_text: str,
        replace_all: bool = False,
    ) -> ToolReply:
        """Replace exact text in a file of the worktree."""
        _text(path, "path", limit=4096)
        _text(old_text, "old_text")
        _text(new_text, "new_text")
        if not isinstance(replace_all, bool):
            raise ToolInputError(
                f"replace_all must be true or false, got {replace_all!r}"
            )
        args = {
            "path": path,
            **text_fields("old_text", old_text),
            **text_fields("new_text", new_text),
            "replace_all": replace_all,
        }

        def body(env: Environment) -> _Done:
            count = WorkspaceFiles(env.worktree).edit_text(
                path, old_text, new_text, replace_all
            )
            data = {"path": path, "replacements": count}
            return _Done(f"edited {path}: {count} replacement(s)", data, data)

        return self._call(environment_id, "edit_file", args, body)

    def delete_path(
        self, environment_id: str, path: str, recursive: bool = False
    ) -> ToolReply:
        """Remove a file, a symlink, or (``recursive``) a directory of the worktree."""
        _text(path, "path", limit=4096)
        if not isinstance(recursive, bool):
            raise ToolInputError(f"recursive must be true or false, got {recursive!r}")
        args = {"path": path, "recursive": recursive}

        def body(env: Environment) -> _Done:
            kind = WorkspaceFiles(env.worktree).delete(path, recursive)
            data = {"path": path, "kind": kind}
            return _Done(f"removed {kind} {shown_name(path)}", data, data)

        return self._call(environment_id, "delete_path", args, body)

    def move_path(
        self, environment_id: str, source: str, destination: str
    ) -> ToolReply:
        """Rename a file or directory of the worktree (to a name not taken)."""
        _text(source, "source", limit=4096)
        _text(destination, "destination", limit=4096)
        args = {"source": source, "destination": destination}

        def body(env: Environment) -> _Done:
            kind = WorkspaceFiles(env.worktree).move(source, destination)
            data = {"source": source, "destination": destination, "kind": kind}
            text = f"moved {kind} {shown_name(source)} to {shown_name(destination)}"
            return _Done(text, data, data)

        return self._call(environment_id, "move_path", args, body)

    def list_files(
        self, environment_id: str, path: str = "", recursive: bool = False
    ) -> ToolReply:
        """List a directory of the worktree."""
        _text(path, "path", limit=4096)
        if not isinstance(recursive, bool):
            raise ToolInputError(f"recursive must be true or false, got {recursive!r}")
        args = {"path": path, "recursive": recursive}

        def body(env: Environment) -> _Done:
            listing = WorkspaceFiles(env.worktree).list_entries(path, recursive)
            rows = [
                f"{e.path}/"
                if e.kind == "directory"
                else f"{e.path} ({e.size} bytes)"
                if e.kind == "file"
                else f"{e.path} [{e.kind}]"
                for e in listing.entries
            ]
            if listing.truncated:
                rows.append(f"[... cut at {len(listing.entries)} entries]")
            entries = [
                {"path": e.path, "kind": e.kind, "size": e.size}
                for e in listing.entries
            ]
            data = {"entries": entries, "truncated": listing.truncated}
            record = {"count": len(entries), "truncated": listing.truncated}
            return _Done("\n".join(rows) or "(empty)", data, record)

        return self._call(environment_id, "list_files", args, body)

    def search(
        self,
        environment_id: str,
        pattern: str,
        path: str = "",
        glob: str = "",
        ignore_case: bool = False,
        max_matches: int = 200,
    ) -> ToolReply:
        """Return the worktree's lines matching a regular expression (bounded)."""
        _text(pattern, "pattern", limit=4096)
        if not pattern:
            raise ToolInputError("pattern is empty")
        _text(path, "path", limit=4096)
        _text(glob, "glob", limit=1024)
        if not isinstance(ignore_case, bool):
            raise ToolInputError(
                f"ignore_case must be true or false, got {ignore_case!r}"
            )
        most = _count(max_matches, "max_matches", 1, MAX_SEARCH_MATCHES)
        args = {
            "pattern": pattern,
            "path": path,
            "glob": glob,
            "ignore_case": ignore_case,
            "max_matches": most,
        }

        def body(env: Environment) -> _Done:
            found = WorkspaceFiles(env.worktree).search(
                pattern, path, glob=glob, ignore_case=ignore_case, max_matches=most
            )
            rows = [f"{m.path}:{m.line}:{m.text}" for m in found.matches]
            if found.truncated:
                rows.append(f"[... {found.reason}]")
            matches = [
                {"path": m.path, "line": m.line, "text": m.text} for m in found.matches
            ]
            data = {
                "matches": matches,
                "files_searched": found.files_searched,
                "files_skipped": found.files_skipped,
                "truncated": found.truncated,
                "reason": found.reason,
            }
            record = {
                "count": len(matches),
                "files_searched": found.files_searched,
                "truncated": found.truncated,
                "reason": found.reason,
            }
            return _Done("\n".join(rows) or "no matches", data, record)

        return self._call(environment_id, "search", args, body)

    def tree(
        self,
        environment_id: str,
        path: str = "",
        depth: int = 3,
        max_entries: int = 500,
    ) -> ToolReply:
        """Show a directory of the worktree as a tree (bounded depth and entries)."""
        _text(path, "path", limit=4096)
        levels = _count(depth, "depth", 1, MAX_TREE_DEPTH)
        most = _count(max_entries, "max_entries", 1, MAX_TREE_ENTRIES)
        args = {"path": path, "depth": levels, "max_entries": most}

        def body(env: Environment) -> _Done:
            listing = WorkspaceFiles(env.worktree).tree(path, levels, most)
            rows = [path.rstrip("/") + "/" if path else "./"]
            for e in listing.entries:
                name = e.path.rsplit("/", 1)[-1]
                mark = (
                    "/"
                    if e.kind == "directory"
                    else f" -> {e.target}"
                    if e.kind == "symlink"
                    else ""
                    if e.kind == "file"
                    else f" [{e.kind}]"
                )
                rows.append(f"{'  ' * e.depth}{name}{mark}")
            if listing.truncated:
                rows.append(f"[... cut at {len(listing.entries)} entries]")
            entries = [
                {
                    "path": e.path,
                    "kind": e.kind,
                    "depth": e.depth,
                    "size": e.size,
                    **({"target": e.target} if e.kind == "symlink" else {}),
                }
                for e in listing.entries
            ]
            data = {"entries": entries, "truncated": listing.truncated}
            record = {"count": len(entries), "truncated": listing.truncated}
            return _Done("\n".join(rows), data, record)

        return self._call(environment_id, "tree", args, body)

    def apply_patch(self, environment_id: str, patch: str) -> ToolReply:
        """Apply a unified diff to the worktree, whole or not at all."""
        _text(patch, "patch", limit=MAX_PATCH_BYTES)
        args = text_fields("patch", patch)

        def body(env: Environment) -> _Done:
            files = apply_patch(env.worktree, patch)
            changed = [
                {"path": shown_name(f.path), "added": f.added, "deleted": f.deleted}
                for f in files
            ]
            data = {"files": changed}
            names = ", ".join(str(f["path"]) for f in changed[:50])
            more = f" and {len(changed) - 50} more" if len(changed) > 50 else ""
            record = {"files": changed[:500], "count": len(changed)}
            return _Done(f"applied the patch to {names}{more}", data, record)

        return self._call(environment_id, "apply_patch", args, body)


def _numbered(text: str, first: int) -> str:
    """``text`` with each line prefixed by its number and a tab (as ``cat -n``)."""
    lines = text.splitlines(keepends=True)
    width = len(str(first + len(lines) - 1))
    return "".join(f"{n:>{width}}\t{line}" for n, line in enumerate(lines, first))
