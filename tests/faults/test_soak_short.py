"""The soak in its short form: 8 writer processes for 6 s, every proof must hold.

The long form is one command (``.venv/bin/python -m bench.soak --minutes 3
--db URL``); its figures are in ``docs/reliability.md``. Here the same run is
short and only the proofs are asserted (never a timing): no lost or
duplicated record, projections equal a rebuild, every scope recovered, the
trace verifies, and the SSE client saw the log in order (what the bus dropped
is filled in by ``/api/records``).
"""

from __future__ import annotations

import os

import pytest

from bench.soak import run_soak, soak_database

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.timeout(600)]

SECONDS = float(os.environ.get("GOATHERD_SOAK_TEST_SECONDS", "6"))


def check(url: str) -> None:
    summary = run_soak(url, seconds=SECONDS, writers=8)
    assert summary["errors"] == []
    assert summary["proofs"] == dict.fromkeys(summary["proofs"], True), summary
    assert summary["cycles"] >= 8  # every writer got through at least one cycle


def test_eight_writers_on_sqlite_lose_and_duplicate_nothing() -> None:
    with soak_database(None) as url:
        check(url)


@pytest.mark.postgres
def test_eight_writers_on_postgresql_lose_and_duplicate_nothing() -> None:
    base = os.environ.get("GOATHERD_TEST_DB_URL")
    if not base:
        pytest.skip("GOATHERD_TEST_DB_URL is not set (no PostgreSQL server)")
    with soak_database(base) as url:
        check(url)
