"""Feeding and draining the launcher's pipes while watching the launcher itself.

``subprocess.Popen.communicate`` waits for end-of-file on every pipe and then
polls for the process's exit; it cannot notice a launcher that died while
processes it left still hold the pipes, and its polling adds latency to every
exec. ``Exchange`` waits on the pipes and on a pidfd of the launcher in one
``select``: it ends as soon as both are done, and says so when the launcher
ended but its pipes did not.
"""

from __future__ import annotations

import enum
import os
import selectors
import subprocess
import time
from typing import Final

__all__ = ["Exchange", "Pumped"]

_CHUNK: Final = 65536
_WRITE: Final = 4096  # PIPE_BUF: a writable pipe takes this much without blocking
_SETTLE: Final = 0.5  # after the launcher's exit, how long its pipes may take to close


class Pumped(enum.Enum):
    """How a round of :meth:`Exchange.pump` ended."""

    DONE = "done"
    DEADLINE = "deadline"
    ORPHANED = "orphaned"  # the launcher ended; something still holds its pipes


class _Kept:
    """What is kept of one output stream: all of it, or its head and its tail.

    With a limit, the first ``limit // 2`` bytes are kept, then the latest
    ``limit - limit // 2``; the bytes between are counted in ``dropped``.
    """

    def __init__(self, limit: int | None) -> None:
        self._limit = limit
        self._head = bytearray()
        self._tail = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        if self._limit is None:
            self._head += chunk
            return
        room = self._limit // 2 - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        self._tail += chunk
        excess = len(self._tail) - (self._limit - self._limit // 2)
        if excess > 0:
            del self._tail[:excess]
            self.dropped += excess

    def data(self) -> bytes:
        return bytes(self._head + self._tail)


class Exchange:
    """The host's side of one launcher's stdin, stdout and stderr."""

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        stdin: bytes,
        output_limit: int | None = None,
    ) -> None:
        stdin_pipe, stdout, stderr = process.stdin, process.stdout, process.stderr
        assert stdin_pipe is not None
        assert stdout is not None
        assert stderr is not None
        self._process = process
        self._out, self._err = stdout.fileno(), stderr.fileno()
        self._pidfd = os.pidfd_open(process.pid)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._pidfd, selectors.EVENT_READ)
        self._chunks: dict[int, _Kept] = {}
        for fd in (self._out, self._err):
            self._chunks[fd] = _Kept(output_limit)
            self._selector.register(fd, selectors.EVENT_READ)
        self._input = memoryview(stdin)
        self._reading = set(self._chunks)
        self._exited_at: float | None = None
        if stdin:
            self._selector.register(stdin_pipe.fileno(), selectors.EVENT_WRITE)
        else:
            stdin_pipe.close()

    def output(self) -> tuple[bytes, bytes]:
        """Return what was kept of stdout and stderr so far."""
        return self._chunks[self._out].data(), self._chunks[self._err].data()

    def dropped(self) -> tuple[int, int]:
        """Return how many bytes of stdout and stderr the limit dropped."""
        return self._chunks[self._out].dropped, self._chunks[self._err].dropped

    def pump(self, deadline: float) -> Pumped:
        """Move data until the pipes are closed and the launcher has ended.

        Returns ``DEADLINE`` when ``deadline`` (a ``time.monotonic`` value)
        came first, ``ORPHANED`` when the launcher ended but its pipes stayed
        open for a moment after.
        """
        while self._reading or self._exited_at is None:
            now = time.monotonic()
            if self._exited_at is not None and now > self._exited_at + _SETTLE:
                return Pumped.ORPHANED
            limit = deadline if self._exited_at is None else self._exited_at + _SETTLE
            if now >= deadline:
                return Pumped.DEADLINE
            for key, _ in self._selector.select(min(limit, deadline) - now):
                self._handle(int(key.fd))
        return Pumped.DONE

    def _handle(self, fd: int) -> None:
        if fd == self._pidfd:
            self._selector.unregister(fd)
            self._exited_at = time.monotonic()
        elif fd in self._reading:
            self._read(fd)
        else:
            self._write(fd)

    def _read(self, fd: int) -> None:
        chunk = os.read(fd, _CHUNK)
        if chunk:
            self._chunks[fd].add(chunk)
        else:
            self._selector.unregister(fd)
            self._reading.discard(fd)

    def _write(self, fd: int) -> None:
        try:
            written = os.write(fd, self._input[:_WRITE])
        except BrokenPipeError:
            written = len(self._input)  # nobody reads it any more
        self._input = self._input[written:]
        if not self._input:
            self._selector.unregister(fd)
            if self._process.stdin is not None:
                self._process.stdin.close()

    def close(self) -> None:
        """Release the selector, the pidfd and the host's ends of the pipes."""
        self._selector.close()
        os.close(self._pidfd)
        for stream in (self._process.stdin, self._process.stdout, self._process.stderr):
            if stream is not None:
                stream.close()
