"""Defaults the parser shows in ``--help``, kept free of heavy imports.

They mirror ``goatherd.infrastructure`` (the demo directory, the trace UI's
address, import's line limit); ``tests/cli/test_startup.py`` checks that they agree.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Final

__all__ = ["DEFAULT_ADDR", "DEFAULT_MAX_LINE_BYTES", "default_demo_dir"]

DEFAULT_ADDR: Final = "127.0.0.1:8321"
DEFAULT_MAX_LINE_BYTES: Final = 64 << 20


def default_demo_dir() -> Path:
    """Return ``<tempdir>/goatherd-demo``, as the demo does."""
    return Path(tempfile.gettempdir()) / "goatherd-demo"
