"""Store backends the store tests run on: SQLite memory, SQLite file, PostgreSQL.

The ``store_url`` fixture is parametrized over the three; the PostgreSQL
parameter runs only when ``GOATHERD_TEST_DB_URL`` names a server, and gives
each test a fresh schema (``search_path``), dropped afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from sqlalchemy import create_engine, text

from goatherd.infrastructure.store import SqlAlchemyTraceStore, open_trace_store

PG_ENV = "GOATHERD_TEST_DB_URL"

BACKENDS = [
    pytest.param("sqlite-memory", id="sqlite-memory"),
    pytest.param("sqlite-file", id="sqlite-file"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]
DURABLE_BACKENDS = BACKENDS[1:]


def _postgres_url() -> Iterator[str]:
    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(f"{PG_ENV} is not set: no PostgreSQL server for this run")
    schema = "t_" + uuid.uuid4().hex[:16]
    admin = create_engine(base)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    separator = "&" if "?" in base else "?"
    try:
        yield f"{base}{separator}options=" + quote(f"-csearch_path={schema}")
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def backend_url(kind: str, tmp_path: Path) -> Iterator[str]:
    """Yield a fresh, empty store URL of ``kind``."""
    if kind == "sqlite-memory":
        yield "sqlite://"
    elif kind == "sqlite-file":
        yield f"sqlite:///{tmp_path / 'trace.sqlite'}"
    else:
        yield from _postgres_url()


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh store URL on every backend (memory, file, PostgreSQL when set)."""
    yield from backend_url(request.param, tmp_path)


@pytest.fixture(params=DURABLE_BACKENDS)
def durable_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh store URL on the backends that survive a reopen (file, PostgreSQL)."""
    yield from backend_url(request.param, tmp_path)


StoreOpener = Callable[[], SqlAlchemyTraceStore]


@pytest.fixture
def open_store(store_url: str) -> Iterator[StoreOpener]:
    """Open stores on ``store_url``; every store opened is closed after the test."""
    opened: list[SqlAlchemyTraceStore] = []

    def _open() -> SqlAlchemyTraceStore:
        opened.append(open_trace_store(store_url))
        return opened[-1]

    yield _open
    for store in opened:
        store.close()


@pytest.fixture
def store(open_store: StoreOpener) -> SqlAlchemyTraceStore:
    """A fresh store on each backend."""
    return open_store()
