"""A writable root inside the standard library or the launcher's directory.

docs/containment.md: a writable root that contains or lies inside what the
unconfined launcher runs is refused. The suite checked roots that contain it;
these lie inside it (a standard-library package, the launcher's bytecode
directory), are the standard library itself, or reach it through a symlink.
Nothing runs, and the refusal is one line naming the root.
"""

from __future__ import annotations

import importlib.util
import os
import sysconfig
from collections.abc import Callable
from pathlib import Path

import pytest

from goatherd.application import ContainmentError, ExecRequest
from goatherd.infrastructure.sandbox import LandlockBackend, landlock_abi
from goatherd.infrastructure.sandbox.launch import landlock_sys

needs_landlock = pytest.mark.skipif(
    landlock_abi() < 1, reason="this kernel has no Landlock"
)

STDLIB = os.path.realpath(sysconfig.get_paths()["stdlib"])
LAUNCH = Path(os.path.realpath(landlock_sys.__file__)).parent


def _bytecode_dir(tmp: Path) -> str:
    # Where Python writes the launcher's bytecode (made here when this run
    # writes none: PYTHONDONTWRITEBYTECODE).
    cache = Path(importlib.util.cache_from_source(str(LAUNCH / "launcher.py"))).parent
    cache.mkdir(exist_ok=True)
    return str(cache)


def _link_to_stdlib_package(tmp: Path) -> str:
    link = tmp / "json-link"
    link.symlink_to(os.path.join(STDLIB, "json"))
    return str(link)


ROOTS: dict[str, Callable[[Path], str]] = {
    "the standard library": lambda _: STDLIB,
    "a package inside the standard library": lambda _: os.path.join(STDLIB, "json"),
    "the launcher's bytecode directory": _bytecode_dir,
    "a symlink to a standard-library package": _link_to_stdlib_package,
}


@pytest.fixture
def inside(tmp_path: Path) -> Path:
    (tmp_path / "inside").mkdir()
    return tmp_path / "inside"


@needs_landlock
@pytest.mark.integration
@pytest.mark.parametrize("name", sorted(ROOTS))
def test_a_root_inside_what_the_launcher_runs_is_refused(
    inside: Path, tmp_path: Path, name: str
) -> None:
    root = ROOTS[name](tmp_path)
    marker = inside / "ran"
    with pytest.raises(ContainmentError, match="overlaps") as caught:
        LandlockBackend().run(
            ExecRequest("touch", (str(marker),)),
            writable_roots=[str(inside), root],
            cwd=str(inside),
        )
    message = str(caught.value)
    assert "\n" not in message
    assert f"writable root {os.path.realpath(root)} overlaps" in message
    assert not marker.exists()


@needs_landlock
@pytest.mark.integration
def test_a_root_beside_them_still_runs(inside: Path) -> None:
    """The rule refuses overlaps only: an unrelated root runs (the control)."""
    marker = inside / "ran"
    result = LandlockBackend().run(
        ExecRequest("touch", (str(marker),)),
        writable_roots=[str(inside)],
        cwd=str(inside),
    )
    assert result.exit_code == 0, result
    assert marker.exists()
