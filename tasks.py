#!/usr/bin/env python3
"""Set up and run goatherd with nothing but Python 3.11 and pip.

    python3 tasks.py demo      create .venv, install goatherd, run ``goatherd demo``
    python3 tasks.py check     the fast tier: ruff, mypy, import-linter, unit tests
                               (no fuzz, state machines, integration, PostgreSQL
                               or browser tests)
    python3 tasks.py test      every check and the whole test suite (in parallel)
    python3 tasks.py lint      ruff, mypy and import-linter only
    python3 tasks.py bench     the benchmarks, then a PASS/MISS summary
    python3 tasks.py mutate    mutation testing of the invariant modules
                               (docs/mutation.md; --module PATH: one module,
                               repeatable; --survivors: re-test what survived;
                               --max-children N: workers, default 2)

One virtual environment (``.venv`` beside this file, with ``goatherd[dev]``)
serves every task, so alternating tasks never reinstalls; it is reinstalled
when ``pyproject.toml`` changes. Extra arguments after ``check``/``test`` go
to pytest; after ``demo`` to ``goatherd demo``; after ``bench`` to the bench.
The tests run on ``-n auto`` pytest-xdist workers with work stealing (``-n 0``
runs them in one process), with bytecode caching on even where the shell sets
``PYTHONDONTWRITEBYTECODE`` (the ``__pycache__`` directories are git-ignored).
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import time
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
    # The suite starts hundreds of interpreters (CLI, MCP servers, killed
    # sessions); with bytecode writes off, each one compiled the project's
    # modules again and every worker re-rewrote every test module's asserts.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.setdefault("HYPOTHESIS_PROFILE", "ci" if env.get("CI") else "dev")
    return env


def _workers(args: list[str]) -> list[str]:
    given = any(a == "-n" or a.startswith(("-n", "--numprocesses")) for a in args)
    workers = [] if given else ["-n", "auto"]
    if not any(a.startswith(("--dist", "-d")) for a in args):
        # Idle workers take queued tests from busy ones; tests/conftest.py
        # starts the long tests first on every worker.
        workers += ["--dist", "worksteal"]
    return workers


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
    summary = False  # the bench's own summary table repeats every verdict
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        summary = summary or line.startswith("== summary")
        if not summary and re.search(r"\b(PASS|MISS)\b", line):
            verdicts.append(line.rstrip())
    code = proc.wait()
    misses = [v for v in verdicts if re.search(r"\bMISS\b", v)]
    print(f"tasks: bench: {len(verdicts) - len(misses)} PASS, {len(misses)} MISS")
    for line in misses:
        print(f"tasks:   MISS {line.strip()}")
    if code:
        raise SystemExit(code)


def _mutant_prefix(module: str) -> str:
    """Return the mutant-name prefix of ``module`` (a path or a dotted name)."""
    dotted = (
        module.removesuffix(".py")
        .removesuffix("*")
        .replace("/", ".")
        .replace(os.sep, ".")
    )
    return dotted if dotted.endswith(".") else dotted + "."


def _mutant_results() -> dict[str, str]:
    """Return the status of every mutant mutmut has recorded under ``mutants/``."""
    import json

    names = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests"}
    names |= {
        34: "skipped",
        36: "timeout",
        24: "timeout",
        -24: "timeout",
        152: "timeout",
    }
    names |= {
        255: "timeout",
        37: "type check",
        2: "interrupted",
        -9: "segfault",
        -11: "segfault",
    }
    out: dict[str, str] = {}
    for meta in sorted((ROOT / "mutants").rglob("*.py.meta")):
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        for key, code in codes.items():
            out[key] = "not checked" if code is None else names.get(code, "suspicious")
    return out


def _mutate_summary(prefixes: list[str]) -> None:
    """Print killed / survived / no tests / timeouts and the kill rate per module."""
    results = {
        k: v
        for k, v in _mutant_results().items()
        if any(k.startswith(p) for p in prefixes)
    }
    by_module: dict[str, dict[str, int]] = {}
    for key, status in results.items():
        module = key.rsplit(".", 1)[0]
        counts = by_module.setdefault(module, {})
        counts[status] = counts.get(status, 0) + 1
    print(f"\n{'module':44} killed survived no-tests timeout  kill rate")
    total: dict[str, int] = {}
    for module, counts in sorted([*by_module.items(), ("overall", total)]):
        if module == "overall":
            continue
        for status, n in counts.items():
            total[status] = total.get(status, 0) + n
        _mutate_row(module, counts)
    _mutate_row("overall", total)
    survivors = sorted(
        k for k, v in results.items() if v not in {"killed", "timeout", "not checked"}
    )
    print(
        f"\n{len(survivors)} not killed (mutmut show NAME in mutants/ prints the diff):"
    )
    for key in survivors:
        print(f"    {key}: {results[key]}")


def _mutate_row(module: str, counts: dict[str, int]) -> None:
    killed = counts.get("killed", 0) + counts.get("timeout", 0)
    tried = (
        sum(counts.values()) - counts.get("not checked", 0) - counts.get("skipped", 0)
    )
    rate = f"{100 * killed / tried:6.1f}%" if tried else "     -"
    print(
        f"{module:44} {counts.get('killed', 0):6} {counts.get('survived', 0):8} "
        f"{counts.get('no tests', 0):8} {counts.get('timeout', 0):7}  {rate}"
    )


_RETEST = {"survived", "not checked", "no tests", "suspicious", "interrupted"}


def cmd_mutate(args: list[str]) -> None:
    """Run mutmut on the configured targets (or ``--module`` ones) and summarise."""
    import tomllib

    ensure_env()
    modules: list[str] = []
    children, survivors_only = "2", False
    while args:
        flag, args = args[0], args[1:]
        if flag == "--survivors":
            survivors_only = True
        elif flag in {"--module", "--max-children"} and args:
            value, args = args[0], args[1:]
            if flag == "--module":
                modules.append(value)
            else:
                children = value
        else:
            print(
                f"tasks: mutate: unknown or incomplete option {flag!r}", file=sys.stderr
            )
            raise SystemExit(2)
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    targets = modules or list(config["only_mutate"])
    prefixes = [_mutant_prefix(m) for m in targets]
    names = [p + "*" for p in prefixes] if modules else []
    if survivors_only:
        previous = _mutant_results()
        names = [
            k
            for k, v in previous.items()
            if v in _RETEST and any(k.startswith(p) for p in prefixes)
        ]
        if not names:
            print("tasks: mutate: no survivors recorded for these modules")
            _mutate_summary(prefixes)
            return
    env = dict(os.environ, HYPOTHESIS_PROFILE="mutate")
    started = time.monotonic()
    code = subprocess.call(
        [tool("mutmut"), "run", "--max-children", children, *names], cwd=ROOT, env=env
    )
    print(f"\ntasks: mutmut exited {code} after {time.monotonic() - started:.0f}s")
    _mutate_summary(prefixes)
    if code != 0:
        raise SystemExit(code)


COMMANDS = {
    "demo": cmd_demo,
    "check": cmd_check,
    "test": cmd_test,
    "lint": cmd_lint,
    "bench": cmd_bench,
    "mutate": cmd_mutate,
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
