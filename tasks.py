#!/usr/bin/env python3
"""Set up and run goatherd with nothing but Python 3.11 and pip.

    python3 tasks.py demo      create .venv, install goatherd, run ``goatherd demo``
    python3 tasks.py test      create .venv, install goatherd[dev], run every check
    python3 tasks.py bench     create .venv, install goatherd[dev], run the benchmarks

The virtual environment lives in ``.venv`` beside this file and is reinstalled
whenever ``pyproject.toml`` changes. Extra arguments after ``test`` go to
pytest; extra arguments after ``demo`` go to ``goatherd demo``.
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


def _stamp(extras: str) -> str:
    pyproject = (ROOT / "pyproject.toml").read_bytes()
    return hashlib.sha256(pyproject + extras.encode()).hexdigest()


def ensure_env(extras: str) -> None:
    """Create the virtual environment and install goatherd (with ``extras``)."""
    marker = VENV / ".goatherd-installed"
    wanted = _stamp(extras)
    if marker.exists() and marker.read_text() == wanted:
        return
    if not PY.exists():
        print(f"tasks: creating {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True, clear=False).create(VENV)
    target = f".[{extras}]" if extras else "."
    print(f"tasks: installing goatherd{target[1:]} into {VENV}", flush=True)
    run([str(PY), "-m", "pip", "install", "--quiet", "--upgrade", "pip"])
    run([str(PY), "-m", "pip", "install", "--quiet", "-e", target])
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


def cmd_demo(args: list[str]) -> None:
    ensure_env("")
    run([tool("goatherd"), "demo", *args])
    rel = os.path.relpath(tool("goatherd"))
    print(f"tasks: the goatherd command lives in the project's environment: {rel}")


def cmd_check() -> None:
    run([tool("ruff"), "format", "--check", "."])
    run([tool("ruff"), "check", "."])
    run([tool("mypy")])
    run([tool("lint-imports")])


def cmd_test(args: list[str]) -> None:
    ensure_env("dev")
    cmd_check()
    env = dict(os.environ)
    env.setdefault("HYPOTHESIS_PROFILE", "ci" if env.get("CI") else "dev")
    run([str(PY), "-m", "pytest", *args], env=env)


def cmd_bench(args: list[str]) -> None:
    ensure_env("dev")
    run([str(PY), "-m", "bench", *args])


def main(argv: list[str]) -> None:
    if not argv or argv[0] not in {"demo", "test", "bench"}:
        print(__doc__)
        raise SystemExit(2)
    command, rest = argv[0], argv[1:]
    {"demo": cmd_demo, "test": cmd_test, "bench": cmd_bench}[command](rest)


if __name__ == "__main__":
    main(sys.argv[1:])
