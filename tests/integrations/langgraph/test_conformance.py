"""LangGraph's own checkpointer conformance suite, run against GoatherdSaver.

Every capability the suite knows (base and extended) is detected and run on a
SQLite file and on PostgreSQL; nothing is skipped.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from goatherd.infrastructure.store import open_trace_store
from goatherd.integrations.langgraph import GoatherdSaver


def test_the_official_conformance_suite_passes_with_every_capability(
    trace_url: str,
) -> None:
    @checkpointer_test(name=f"GoatherdSaver[{trace_url.split(':')[0]}]")
    async def saver() -> AsyncIterator[GoatherdSaver]:
        store = open_trace_store(trace_url)
        try:
            yield GoatherdSaver(store)
        finally:
            store.close()

    report = asyncio.run(validate(saver))
    results = report.results
    assert set(results) == {c.value for c in ALL_CAPABILITIES}
    failures = {
        name: result.failures for name, result in results.items() if not result.passed
    }
    assert failures == {}
    assert all(r.detected and r.tests_skipped == 0 for r in results.values())
    assert all(r.tests_passed > 0 and r.tests_failed == 0 for r in results.values())
