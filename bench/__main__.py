"""Run the benchmark scenarios named on the command line (default: all)."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from pathlib import Path


def _scenarios() -> list[str]:
    here = Path(__file__).parent
    return sorted(
        info.name[len("bench_") :]
        for info in pkgutil.iter_modules([str(here)])
        if info.name.startswith("bench_")
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument(
        "names", nargs="*", help=f"scenarios: {', '.join(_scenarios())}"
    )
    args = parser.parse_args(argv)
    names = args.names or _scenarios()
    unknown = sorted(set(names) - set(_scenarios()))
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(unknown)}")
    for name in names:
        module = importlib.import_module(f"bench.bench_{name}")
        print(f"== {name}", flush=True)
        module.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
