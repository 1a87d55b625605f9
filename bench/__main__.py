"""Run the benchmark scenarios named on the command line (default: all).

Every line a scenario prints that holds ``PASS`` or ``MISS`` is collected
(``bench/report.py``), and the run ends with a summary table of them: one
line per target of every scenario that ran. A scenario that raises is
reported in the table and the run goes on; the exit code is then 1.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import traceback
from pathlib import Path

from bench.report import Verdicts, VerdictTap


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
    verdicts = Verdicts()
    out = sys.stdout
    tap = VerdictTap(out, verdicts)
    sys.stdout = tap
    try:
        for name in names:
            tap.scenario(name)
            print(f"== {name}", flush=True)
            try:
                module = importlib.import_module(f"bench.bench_{name}")
                module.run()
            except Exception as error:  # reported; the run goes on
                traceback.print_exc()
                verdicts.fail(name, error)
        tap.end_line()
    finally:
        sys.stdout = out
    print()
    print("\n".join(verdicts.table()), flush=True)
    return 1 if verdicts.errors else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
