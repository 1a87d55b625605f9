"""A confined command's stdin, stdout and stderr beyond a pipe's buffer size."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from goatherd.application import ExecRequest
from goatherd.infrastructure.sandbox import LandlockBackend, landlock_abi

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(landlock_abi() < 1, reason="this kernel has no Landlock"),
]
BIG = 5 * 1024 * 1024


def run(request: ExecRequest, tmp_path: Path):
    return LandlockBackend().run(
        request, writable_roots=[str(tmp_path)], cwd=str(tmp_path)
    )


def test_a_large_stdin_is_delivered_whole(tmp_path: Path) -> None:
    result = run(ExecRequest("wc", ("-c",), stdin=b"x" * BIG), tmp_path)
    assert result.stdout.strip() == str(BIG).encode()


def test_a_command_that_never_reads_its_large_stdin_still_finishes(
    tmp_path: Path,
) -> None:
    result = run(ExecRequest("true", stdin=b"x" * BIG, timeout=60), tmp_path)
    assert result.exit_code == 0


def test_large_stdout_and_stderr_come_back_whole(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "for _ in range(80):\n"
        "    sys.stdout.buffer.write(b'o' * 65536); sys.stdout.flush()\n"
        "    sys.stderr.buffer.write(b'e' * 65536); sys.stderr.flush()\n"
    )
    result = run(ExecRequest(sys.executable, ("-c", code)), tmp_path)
    assert (result.stdout, result.stderr) == (b"o" * BIG, b"e" * BIG)


def test_output_written_just_before_exit_is_kept(tmp_path: Path) -> None:
    result = run(ExecRequest("sh", ("-c", "printf last; exit 3")), tmp_path)
    assert (result.exit_code, result.stdout) == (3, b"last")
