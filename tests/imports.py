"""What a fresh interpreter imports: the probe the import-graph tests share."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def modules_after(code: str) -> set[str]:
    """Run ``code`` in a fresh interpreter; return the modules it loaded."""
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    return set(json.loads(out.strip().splitlines()[-1]))
