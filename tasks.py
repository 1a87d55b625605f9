#!/usr/bin/env python3
"""Set up and run goatherd with nothing but Python 3.11 and pip.

    python3 tasks.py demo      create .venv, install goatherd, run ``goatherd demo``
    python3 tasks.py test      create .venv, install goatherd[dev], run every check
    python3 tasks.py bench     create .venv, install goatherd[dev], run the benchmarks
    python3 tasks.py mutate    create .venv, install goatherd[dev], run mutation testing
                             (--module goatherd/domain/scope.py: one module, repeated;
                             --survivors: re-test survivors and unchecked mutants;
                             --max-children N: parallel workers, default 2)

The virtual environment lives in ``.venv`` beside this file and is reinstalled
whenever ``pyproject.toml`` changes. Extra arguments after ``test`` go to
pytest; extra arguments after ``demo`` go to ``goatherd demo``.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
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

    ensure_env("dev")
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


def main(argv: list[str]) -> None:
    commands = {
        "demo": cmd_demo,
        "test": cmd_test,
        "bench": cmd_bench,
        "mutate": cmd_mutate,
    }
    if not argv or argv[0] not in commands:
        print(__doc__)
        raise SystemExit(2)
    command, rest = argv[0], argv[1:]
    commands[command](rest)


if __name__ == "__main__":
    main(sys.argv[1:])
