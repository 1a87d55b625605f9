#!/usr/bin/env python3
"""Set up and run goatherd with nothing but Python 3.11 and pip.

    python3 tasks.py demo      create .venv, install goatherd, run ``goatherd demo``
    python3 tasks.py check     the fast tier: ruff, mypy, import-linter, unit tests
                               (no fuzz, state machines, integration, PostgreSQL
                               or browser tests)
    python3 tasks.py test      every check and the whole test suite (in parallel)
    python3 tasks.py lint      ruff, mypy and import-linter only
    python3 tasks.py bench     the benchmarks, then a PASS/MISS summary

One virtual environment (``.venv`` beside this file, with ``goatherd[dev]``)
serves every task, so alternating tasks never reinstalls; it is reinstalled
when ``pyproject.toml`` changes. Extra arguments after ``check``/``test`` go
to pytest; after ``demo`` to ``goatherd demo``; after ``bench`` to the bench.
The tests run on ``-n auto`` pytest-xdist workers (``-n 0`` runs them in one
process).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / "python"
EXTRAS = "dev"
UNIT_TIER = "not integration and not slow and not postgres and not browser"


def _stamp() -> str:
    pyproject = (ROOT / "pyproject.toml").read_bytes()
    return hashlib.sha256(pyproject + EXTRAS.encode()).hexdigest()


def ensure_env() -> None:
    """Create the virtual environment and install ``goatherd[dev]`` once."""
    marker = VENV / ".goatherd-installed"
    wanted = _stamp()
    if marker.exists() and marker.read_text() == wanted:
        return
    if not PY.exists():
        print(f"tasks: creating {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True, clear=False).create(VENV)
    print(f"tasks: installing goatherd[{EXTRAS}] into {VENV}", flush=True)
    run([str(PY), "-m", "pip", "install", "--quiet", "--upgrade", "pip"])
    run([str(PY), "-m", "pip", "install", "--quiet", "-e", f".[{EXTRAS}]"])
    marker.write_text(wanted)


def run(cmd: list[str], env: dict[str, str] | None = None) -> None:
    """Run ``cmd`` in the repository root; exit with its code if it fails."""
    print("tasks: $ " + " ".join(cmd), flush=True)
    code = subprocess.call(cmd, cwd=ROOT, env=env)
    if code != 0:
        print(f"tasks: failed ({code}): {' '.join(cmd)}", file=sys.stderr)
        raise SystemExit(code)


def tool(name: str) -> str:
    """Return the path of a console script installed in the environment."""
    return str(BIN / name)


def _pytest_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("HYPOTHESIS_PROFILE", "ci" if env.get("CI") else "dev")
    return env


def _workers(args: list[str]) -> list[str]:
    given = any(a == "-n" or a.startswith(("-n", "--numprocesses")) for a in args)
    return [] if given else ["-n", "auto"]


def cmd_demo(args: list[str]) -> None:
    ensure_env()
    run([tool("goatherd"), "demo", *args])
    rel = os.path.relpath(tool("goatherd"))
    print(f"tasks: the goatherd command lives in the project's environment: {rel}")


def cmd_lint(args: list[str]) -> None:
    ensure_env()
    run([tool("ruff"), "format", "--check", "."])
    run([tool("ruff"), "check", "."])
    run([tool("mypy")])
    run([tool("lint-imports")])


def cmd_check(args: list[str]) -> None:
    cmd_lint([])
    pytest = [str(PY), "-m", "pytest", "-m", UNIT_TIER, "--ignore=tests/fuzz"]
    pytest += [*_workers(args), *args]
    run(pytest, env=_pytest_env())


def cmd_test(args: list[str]) -> None:
    cmd_lint([])
    run([str(PY), "-m", "pytest", *_workers(args), *args], env=_pytest_env())


def cmd_bench(args: list[str]) -> None:
    ensure_env()
    cmd = [str(PY), "-u", "-m", "bench", *args]
    print("tasks: $ " + " ".join(cmd), flush=True)
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    verdicts: list[str] = []
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        if " PASS" in line or " MISS" in line:
            verdicts.append(line.rstrip())
    code = proc.wait()
    misses = [v for v in verdicts if " MISS" in v]
    print(f"tasks: bench: {len(verdicts) - len(misses)} PASS, {len(misses)} MISS")
    for line in misses:
        print(f"tasks:   MISS {line.strip()}")
    if code:
        raise SystemExit(code)


COMMANDS = {
    "demo": cmd_demo,
    "check": cmd_check,
    "test": cmd_test,
    "lint": cmd_lint,
    "bench": cmd_bench,
}


def main(argv: list[str]) -> None:
    if argv and argv[0] in ("-h", "--help", "help"):
        print(__doc__)
        return
    if not argv or argv[0] not in COMMANDS:
        print(__doc__)
        print(f"tasks: expected one of {', '.join(COMMANDS)}", file=sys.stderr)
        raise SystemExit(2)
    COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
