"""The file tools never block on, or swallow, a file the agent made.

A FIFO, a symlink to one, a device and a huge sparse file are each answered
at once with a one-line refusal, the server's memory stays bounded, and the
next call on the same environment still works (the environment is not left
wedged behind a stuck call).
"""

from __future__ import annotations

import os
import resource
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from goatherd.integrations.mcp import WorkspaceTools
from goatherd.integrations.mcp.tools import ToolReply
from tests.mcp.conftest import (  # noqa: F401 - fixtures used by name
    ToolsFactory,
    make_tools,
    needs_landlock,
    project,
    sqlite_trace,
)

pytestmark = [needs_landlock, pytest.mark.integration]

PROMPT_SECONDS = 10.0
SPARSE_BYTES = 1536 * 1024 * 1024


def _open(tools: WorkspaceTools) -> tuple[str, Path]:
    reply = tools.open_environment("files")
    assert not reply.is_error, reply.text
    env = str(reply.data["environment_id"])
    return env, tools.environments.lookup(env).worktree


def _unblock(fifo: Path) -> None:
    """Let a reader stuck opening ``fifo`` (the old code) go on."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return
    os.close(fd)


def _promptly(call: Callable[[], ToolReply], fifo: Path | None = None) -> ToolReply:
    """Return ``call()``'s reply, failing if it takes over PROMPT_SECONDS."""
    replies: list[ToolReply] = []
    worker = threading.Thread(target=lambda: replies.append(call()), daemon=True)
    worker.start()
    worker.join(PROMPT_SECONDS)
    blocked = worker.is_alive()
    if blocked and fifo is not None:
        _unblock(fifo)
        worker.join(PROMPT_SECONDS)
    assert not blocked, f"the call did not answer within {PROMPT_SECONDS:g} s"
    return replies[0]


@pytest.fixture
def opened(
    make_tools: ToolsFactory,  # noqa: F811 - the fixture imported above
) -> tuple[WorkspaceTools, str, Path]:
    tools = make_tools()
    env, worktree = _open(tools)
    return tools, env, worktree


def _still_works(tools: WorkspaceTools, env: str) -> None:
    reply = _promptly(lambda: tools.read_file(env, "README.txt"))
    assert not reply.is_error, reply.text
    assert reply.data["content"] == "a calculator\n"


def _refused(reply: ToolReply, *words: str) -> None:
    assert reply.is_error, reply.text
    assert "\n" not in reply.text.strip(), reply.text
    for word in words:
        assert word in reply.text, reply.text


def test_a_fifo_is_refused_without_waiting_for_a_writer(
    opened: tuple[WorkspaceTools, str, Path],
) -> None:
    tools, env, worktree = opened
    fifo = worktree / "pipe"
    os.mkfifo(fifo)
    _refused(_promptly(lambda: tools.read_file(env, "pipe"), fifo), "FIFO")
    _refused(_promptly(lambda: tools.edit_file(env, "pipe", "a", "b"), fifo), "FIFO")
    _still_works(tools, env)


def test_a_symlink_to_a_fifo_is_refused_without_waiting(
    opened: tuple[WorkspaceTools, str, Path],
) -> None:
    tools, env, worktree = opened
    fifo = worktree / "sub" / "pipe"
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    (worktree / "link").symlink_to("sub/pipe")
    _refused(_promptly(lambda: tools.read_file(env, "link"), fifo), "FIFO")
    _still_works(tools, env)


def test_a_fifo_swapped_in_after_the_check_does_not_block(tmp_path: Path) -> None:
    # The lstat check passes on a regular file; a FIFO put in its place
    # before the open must not block the open (O_NONBLOCK) and is refused by
    # the fstat on the descriptor.
    from goatherd.integrations.mcp import ToolInputError
    from goatherd.integrations.mcp.files import WorkspaceFiles

    root = tmp_path / "wt"
    root.mkdir()
    target = root / "f"
    real_stat = os.stat

    def swapping_stat(*args: object, **kwargs: object) -> os.stat_result:
        found = real_stat(*args, **kwargs)  # type: ignore[arg-type]
        if args and args[0] == "f":
            target.unlink()
            os.mkfifo(target)
        return found

    target.write_text("text\n")
    files = WorkspaceFiles(root)
    outcome: list[BaseException | None] = []

    def read() -> None:
        try:
            files.read_text("f", 1, 10)
        except BaseException as error:
            outcome.append(error)
        else:
            outcome.append(None)

    monkey = pytest.MonkeyPatch()
    monkey.setattr(os, "stat", swapping_stat)
    try:
        worker = threading.Thread(target=read, daemon=True)
        worker.start()
        worker.join(PROMPT_SECONDS)
    finally:
        monkey.undo()
    blocked = worker.is_alive()
    if blocked:
        _unblock(target)
    assert not blocked, "the open blocked on a FIFO swapped in after the check"
    assert isinstance(outcome[0], ToolInputError), outcome
    assert "FIFO" in str(outcome[0])


def test_a_symlink_to_a_device_is_refused(
    opened: tuple[WorkspaceTools, str, Path],
) -> None:
    tools, env, worktree = opened
    (worktree / "zero").symlink_to("/dev/zero")
    _refused(_promptly(lambda: tools.read_file(env, "zero")))
    _refused(_promptly(lambda: tools.edit_file(env, "zero", "a", "b")))
    _still_works(tools, env)


def test_a_socket_and_a_directory_are_refused(
    opened: tuple[WorkspaceTools, str, Path],
) -> None:
    import socket

    tools, env, worktree = opened
    (worktree / "dir").mkdir()
    here = os.getcwd()
    os.chdir(worktree)  # a socket path must be short
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind("sock")
        _refused(_promptly(lambda: tools.read_file(env, "sock")), "socket")
        _refused(_promptly(lambda: tools.read_file(env, "dir")), "directory")
    finally:
        server.close()
        os.chdir(here)
    _still_works(tools, env)


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def test_a_huge_sparse_file_is_refused_fast_with_bounded_memory(
    opened: tuple[WorkspaceTools, str, Path],
) -> None:
    tools, env, worktree = opened
    with (worktree / "huge.log").open("wb") as handle:
        handle.truncate(SPARSE_BYTES)
    before = _peak_rss_bytes()
    started = time.monotonic()
    reply = tools.read_file(env, "huge.log")
    took = time.monotonic() - started
    grew = _peak_rss_bytes() - before
    _refused(reply, str(SPARSE_BYTES), "bytes")
    assert took < 5, f"refusing took {took:.1f} s"
    assert grew < 64 * 1024 * 1024, f"the server's peak memory grew {grew} bytes"
    edit = tools.edit_file(env, "huge.log", "a", "b")
    _refused(edit, str(SPARSE_BYTES))
    _still_works(tools, env)


def test_a_file_up_to_the_limit_is_read(
    opened: tuple[WorkspaceTools, str, Path],
) -> None:
    from goatherd.integrations.mcp.files import MAX_READ_FILE_BYTES

    tools, env, worktree = opened
    line = "x" * 1023 + "\n"
    (worktree / "big.txt").write_text(line * (MAX_READ_FILE_BYTES // 1024))
    reply = tools.read_file(env, "big.txt", start_line=16000, max_lines=2)
    assert not reply.is_error, reply.text
    assert reply.data["total_lines"] == MAX_READ_FILE_BYTES // 1024
    assert reply.data["content"] == line * 2


def test_tools_that_read_the_whole_worktree_pass_a_fifo_by(
    opened: tuple[WorkspaceTools, str, Path],
) -> None:
    tools, env, worktree = opened
    fifo = worktree / "pipe"
    os.mkfifo(fifo)
    (worktree / "new.txt").write_text("new\n")
    listed = _promptly(lambda: tools.list_files(env), fifo)
    assert not listed.is_error, listed.text
    assert "pipe [other]" in listed.text
    diff = _promptly(lambda: tools.diff(env), fifo)
    assert not diff.is_error, diff.text
    assert "new.txt" in diff.text
    checkpoint = _promptly(lambda: tools.checkpoint(env), fifo)
    assert not checkpoint.is_error, checkpoint.text
    _still_works(tools, env)
