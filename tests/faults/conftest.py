"""Fixtures for the fault-injection tests: a fresh PostgreSQL database per test."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A freshly created database on the server named by GOATHERD_TEST_DB_URL."""
    base = os.environ.get("GOATHERD_TEST_DB_URL")
    if not base:
        pytest.skip("GOATHERD_TEST_DB_URL is not set (no PostgreSQL server)")
    import psycopg
    from sqlalchemy.engine import make_url

    url = make_url(base)
    name = f"goatherd_fault_{uuid.uuid4().hex[:12]}"
    admin = url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield url.set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
