"""What the Landlock backend guarantees on each ABI, checked on this kernel.

Older kernels are simulated with ``max_abi`` (the backend then uses only that
ABI's rights, exactly as on such a kernel). For every ABI from 1 to the
kernel's: the backend refuses by default where a guarantee is missing, names
the ABI and the gap, and runs nothing; with the gaps accepted, each gap is
real (the command does what the docs say it can), and every other guarantee
still holds.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from goatherd.application import ContainmentUnavailableError, ExecRequest, NetworkMode
from goatherd.infrastructure.sandbox import (
    LandlockBackend,
    landlock_abi,
    open_containment_backend,
)
from tests.infrastructure.sandbox.native import alive, wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(landlock_abi() < 1, reason="this kernel has no Landlock"),
]

KERNEL_ABI = landlock_abi()
ABIS = [abi for abi in range(1, 8) if abi <= KERNEL_ABI]
EVERY_GAP = frozenset({"truncate", "signals"})


def expected_gaps(abi: int) -> set[str]:
    return {gap for gap, needs in (("truncate", 3), ("signals", 6)) if abi < needs}


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    (outside / "keep.txt").write_bytes(b"precious\n")
    return inside, outside


def python(code: str) -> ExecRequest:
    return ExecRequest(sys.executable, ("-c", code))


def run(backend: LandlockBackend, request: ExecRequest, inside: Path):
    return backend.run(request, writable_roots=[str(inside)], cwd=str(inside))


@pytest.mark.parametrize("abi", ABIS)
def test_an_abi_missing_a_guarantee_is_refused_by_default_and_nothing_runs(
    roots: tuple[Path, Path], abi: int
) -> None:
    inside, outside = roots
    backend = LandlockBackend(max_abi=abi)
    request = python(f"import os; os.truncate('{outside}/keep.txt', 0)")
    if expected_gaps(abi):
        with pytest.raises(ContainmentUnavailableError) as refused:
            run(backend, request, inside)
        message = str(refused.value)
        assert f"Landlock ABI {abi} " in message
        assert "\n" not in message
        assert set(re.findall(r'"(\w+)"', message)) == expected_gaps(abi)
    else:
        run(backend, request, inside)
    assert (outside / "keep.txt").read_bytes() == b"precious\n"
    assert set(backend.gaps()) == expected_gaps(abi)


@pytest.mark.parametrize("abi", [1, 2])
def test_truncate_outside_is_the_accepted_gap_of_abi_1_and_2(
    roots: tuple[Path, Path], abi: int
) -> None:
    inside, outside = roots
    backend = LandlockBackend(max_abi=abi, accept_gaps=EVERY_GAP)
    run(backend, python(f"import os; os.truncate('{outside}/keep.txt', 0)"), inside)
    assert (outside / "keep.txt").read_bytes() == b""


@pytest.mark.parametrize("abi", [a for a in ABIS if a >= 3])
def test_truncate_outside_is_denied_from_abi_3(
    roots: tuple[Path, Path], abi: int
) -> None:
    inside, outside = roots
    code = (
        "import os\n"
        f"try: os.truncate('{outside}/keep.txt', 0)\n"
        "except PermissionError: print('denied')\n"
    )
    result = run(
        LandlockBackend(max_abi=abi, accept_gaps=EVERY_GAP), python(code), inside
    )
    assert result.stdout == b"denied\n"
    assert (outside / "keep.txt").read_bytes() == b"precious\n"


@pytest.fixture
def bystander() -> Iterator[int]:
    """A process outside every sandbox, of the same user."""
    process = subprocess.Popen(["sleep", "60"])
    try:
        yield process.pid
    finally:
        process.kill()
        process.wait()


@pytest.mark.parametrize("abi", ABIS)
def test_signals_leave_the_sandbox_only_below_abi_6(
    roots: tuple[Path, Path], bystander: int, abi: int
) -> None:
    inside, _ = roots
    backend = LandlockBackend(max_abi=abi, accept_gaps=EVERY_GAP)
    result = run(backend, ExecRequest("kill", ("-TERM", str(bystander))), inside)
    if abi < 6:
        assert result.exit_code == 0
        assert wait_for(lambda: not alive(bystander))
    else:
        assert result.exit_code != 0
        assert alive(bystander)


@pytest.mark.parametrize("abi", ABIS)
def test_moving_a_file_between_directories_of_a_root_needs_abi_2(
    roots: tuple[Path, Path], abi: int
) -> None:
    inside, _ = roots
    (inside / "a").mkdir()
    (inside / "b").mkdir()
    (inside / "a" / "f").write_bytes(b"f")
    code = (
        "import os\n"
        "try: os.rename('a/f', 'b/f'); print('moved')\n"
        "except OSError as e: print('refused', e.errno)\n"
    )
    result = run(
        LandlockBackend(max_abi=abi, accept_gaps=EVERY_GAP), python(code), inside
    )
    expected = f"refused {18}" if abi == 1 else "moved"  # 18: EXDEV
    assert result.stdout.decode().strip() == expected


@pytest.fixture
def abstract_listener() -> Iterator[str]:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    name = f"\0goatherd-test-{os.getpid()}-{id(server)}"
    server.bind(name)
    server.listen(4)
    try:
        yield name[1:]
    finally:
        server.close()


@pytest.mark.parametrize("abi", ABIS)
def test_network_denial_is_refused_below_abi_4_and_scopes_abstract_sockets_from_6(
    roots: tuple[Path, Path], abstract_listener: str, abi: int
) -> None:
    inside, _ = roots
    backend = LandlockBackend(
        network=NetworkMode.DENY, max_abi=abi, accept_gaps=EVERY_GAP
    )
    code = (
        "import socket\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        f"try: s.connect('\\0{abstract_listener}'); print('connected')\n"
        "except OSError as e: print('refused')\n"
    )
    if abi < 4:
        with pytest.raises(ContainmentUnavailableError, match="ABI 4"):
            run(backend, python(code), inside)
        return
    result = run(backend, python(code), inside)
    assert result.stdout == (b"refused\n" if abi >= 6 else b"connected\n")


def test_open_containment_backend_passes_accepted_gaps_through() -> None:
    backend = open_containment_backend("landlock", accept_gaps=["truncate"])
    assert isinstance(backend, LandlockBackend)
    assert backend.accept_gaps == {"truncate"}
