"""``python -m bench soak``: the concurrent-load soak with environment knobs.

``GOATHERD_SOAK_MINUTES`` (default 0.5), ``GOATHERD_SOAK_DB`` (a SQLite path/URL
or a ``postgresql+psycopg://`` server URL; default: a temporary SQLite file)
and ``GOATHERD_SOAK_WRITERS`` (default 8). The same run with flags:
``python -m bench.soak --minutes 3 --db URL`` (see ``bench/soak.py``).
"""

from __future__ import annotations

import json
import os

from bench.soak import run_soak, soak_database


def run() -> None:
    minutes = float(os.environ.get("GOATHERD_SOAK_MINUTES", "0.5"))
    writers = int(os.environ.get("GOATHERD_SOAK_WRITERS", "8"))
    with soak_database(os.environ.get("GOATHERD_SOAK_DB")) as url:
        summary = run_soak(url, seconds=minutes * 60, writers=writers)
    print(json.dumps(summary, indent=2, sort_keys=True))
    failed = [name for name, ok in summary["proofs"].items() if not ok]
    if failed:
        raise SystemExit(f"soak proofs failed: {', '.join(failed)}")
