"""Trace URLs for the LangGraph saver tests: a SQLite file and PostgreSQL.

PostgreSQL runs when ``GOATHERD_TEST_DB_URL`` names a server (``tasks.py test``
in CI always sets it) and gives each test a fresh schema.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.infrastructure.backends import backend_url

TRACE_BACKENDS = [
    pytest.param("sqlite-file", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


@pytest.fixture(params=TRACE_BACKENDS)
def trace_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty trace URL on SQLite and on PostgreSQL."""
    yield from backend_url(request.param, tmp_path)
