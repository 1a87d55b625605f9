"""Fixtures shared by the cross-process runtime tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.runtime.support import fresh_postgres_database


@pytest.fixture(params=["sqlite", "postgresql"])
def trace(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh trace on each backend: a SQLite file, or a new PostgreSQL database."""
    if request.param == "sqlite":
        yield str(tmp_path / "trace.db")
        return
    with fresh_postgres_database() as url:
        yield url
