"""Every escape route of test_confinement, on every Landlock ABI simulable here.

``max_abi`` makes the backend use only an older ABI's rights, exactly as on
such a kernel; the gaps of the older ABIs are accepted so that they run at
all. Every route must still leave the outside tree byte-identical on every
ABI, and ``truncate()`` - the one write the table lists as a gap of ABI 1 and
2 - must change the outside file exactly there and nowhere else.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from goatherd.application import ExecRequest
from goatherd.infrastructure.sandbox import LandlockBackend, LandlockGap, landlock_abi
from tests.security.test_confinement import ESCAPES, outside_tree

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(landlock_abi() < 1, reason="this kernel has no Landlock"),
]
ABIS = [abi for abi in range(1, 8) if abi <= landlock_abi()]


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    (outside / "keep.txt").write_bytes(b"precious\n")
    (outside / "sub").mkdir()
    (inside / "mine.txt").write_bytes(b"mine\n")
    return inside, outside


def _confined(inside: Path, abi: int, script: str) -> None:
    backend = LandlockBackend(max_abi=abi, accept_gaps=frozenset(LandlockGap))
    backend.run(
        ExecRequest("sh", ("-c", script)), writable_roots=[str(inside)], cwd=str(inside)
    )


@pytest.mark.parametrize("abi", ABIS)
@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_every_route_stays_closed_on_every_abi(
    roots: tuple[Path, Path], name: str, abi: int
) -> None:
    inside, outside = roots
    before = outside_tree(outside)
    _confined(inside, abi, ESCAPES[name].format(out=outside) + "; exit 0")
    assert outside_tree(outside) == before


@pytest.mark.parametrize("abi", ABIS)
def test_the_truncate_system_call_is_the_gap_of_abi_1_and_2_only(
    roots: tuple[Path, Path], abi: int
) -> None:
    inside, outside = roots
    code = f"import os; os.truncate('{outside}/keep.txt', 0)"
    _confined(inside, abi, f'{sys.executable} -c "{code}"; exit 0')
    expected = b"" if abi < 3 else b"precious\n"
    assert (outside / "keep.txt").read_bytes() == expected
