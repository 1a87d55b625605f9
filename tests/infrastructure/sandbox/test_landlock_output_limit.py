"""``ExecRequest.output_limit``: a confined command's output is bounded, not held.

A command may print without end until its timeout; the host keeps the head
and the tail of each stream and counts the bytes between, so its memory does
not grow with the output.
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path

import pytest

from goatherd.application import ExecRequest, InvalidExecRequestError
from goatherd.infrastructure.sandbox import (
    LandlockBackend,
    landlock_abi,
    new_local_git_sandbox,
)
from tests.infrastructure.sandbox.gitfixtures import make_repo

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(landlock_abi() < 1, reason="this kernel has no Landlock"),
]


def run(request: ExecRequest, tmp_path: Path):
    return LandlockBackend().run(
        request, writable_roots=[str(tmp_path)], cwd=str(tmp_path)
    )


def _numbered(count: int) -> bytes:
    return b"".join(b"%d\n" % i for i in range(count))


def _printer(stream: str, count: int) -> ExecRequest:
    code = (
        "import sys\n"
        f"out = getattr(sys, {stream!r}).buffer\n"
        f"for i in range({count}):\n"
        "    out.write(b'%d\\n' % i)\n"
    )
    return ExecRequest(sys.executable, ("-c", code), output_limit=1000)


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_a_stream_beyond_the_limit_keeps_its_head_and_tail(
    tmp_path: Path, stream: str
) -> None:
    expected = _numbered(100_000)
    result = run(_printer(stream, 100_000), tmp_path)
    kept = result.stdout if stream == "stdout" else result.stderr
    dropped = result.stdout_dropped if stream == "stdout" else result.stderr_dropped
    assert kept == expected[:500] + expected[-500:]
    assert dropped == len(expected) - 1000
    other = result.stderr if stream == "stdout" else result.stdout
    assert other == b""


def test_output_within_the_limit_comes_back_whole(tmp_path: Path) -> None:
    request = ExecRequest("printf", ("%s", "x" * 1000), output_limit=1000)
    result = run(request, tmp_path)
    assert (result.stdout, result.stdout_dropped) == (b"x" * 1000, 0)


def test_an_odd_limit_keeps_the_larger_half_at_the_end(tmp_path: Path) -> None:
    request = ExecRequest("printf", ("%s", "abcdefghij"), output_limit=5)
    result = run(request, tmp_path)
    assert (result.stdout, result.stdout_dropped) == (b"abhij", 5)


def test_a_gigabyte_of_output_is_not_held_in_memory(tmp_path: Path) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    request = ExecRequest(
        "sh", ("-c", "head -c 1073741824 /dev/zero"), output_limit=65536, timeout=120
    )
    result = run(request, tmp_path)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert result.exit_code == 0
    assert len(result.stdout) == 65536
    assert result.stdout_dropped == 2**30 - 65536
    assert after - before < 256 * 1024, "the host held the output"


def test_without_a_limit_nothing_is_dropped(tmp_path: Path) -> None:
    result = run(ExecRequest("printf", ("%s", "y" * 70000)), tmp_path)
    assert (len(result.stdout), result.stdout_dropped, result.stderr_dropped) == (
        70000,
        0,
        0,
    )


@pytest.mark.parametrize("limit", [0, 1, -5, True, 2.5, "100"])
def test_a_bad_limit_is_refused_before_anything_runs(
    tmp_path: Path, limit: object
) -> None:
    marker = tmp_path / "ran"
    request = ExecRequest("touch", (str(marker),), output_limit=limit)  # type: ignore[arg-type]
    with pytest.raises(InvalidExecRequestError, match="output_limit"):
        run(request, tmp_path)
    assert not marker.exists()


def test_the_git_sandbox_passes_the_limit_on(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    sandbox = new_local_git_sandbox(repo, exec_backend=LandlockBackend())
    request = ExecRequest("sh", ("-c", "seq 1 100000"), output_limit=100)
    result = sandbox.exec(request)
    expected = b"".join(b"%d\n" % i for i in range(1, 100_001))
    assert result.stdout == expected[:50] + expected[-50:]
    assert result.stdout_dropped == len(expected) - 100
