"""``tasks.py``: help exits 0, unknown tasks are usage errors, the check tier."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tasks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tasks", ROOT / "tasks.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.integration  # a new interpreter
@pytest.mark.parametrize("flag", ["--help", "-h", "help"])
def test_help_exits_zero_and_names_every_task(flag: str) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tasks.py"), flag],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for task in _tasks().COMMANDS:
        assert f"python3 tasks.py {task}" in done.stdout


def test_an_unknown_task_is_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit) as info:
        _tasks().main(["nope"])
    assert info.value.code == 2
    assert "expected one of demo, check, test, lint, bench" in capsys.readouterr().err


def test_the_check_tier_leaves_out_what_is_slow_or_external() -> None:
    tier = _tasks().UNIT_TIER
    for marker in ("integration", "slow", "postgres", "browser"):
        assert f"not {marker}" in tier
