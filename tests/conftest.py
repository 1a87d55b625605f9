"""Shared test configuration: Hypothesis profiles and common fixtures."""

from __future__ import annotations

import itertools
import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=50, deadline=None)
settings.register_profile(
    "ci",
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("deep", max_examples=1000, deadline=None)
# Mutation testing (python3 tasks.py mutate) runs each test many times in one
# process, once per mutant: fewer examples, no example database.
settings.register_profile(
    "mutate",
    max_examples=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.differing_executors],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every Hypothesis state machine ``slow``: long runs, not the unit tier."""
    for item in items:
        cls = getattr(item, "cls", None)
        # RuleBasedStateMachine.TestCase makes a new class in hypothesis.stateful.
        if cls is not None and cls.__module__ == "hypothesis.stateful":
            item.add_marker(pytest.mark.slow)


# How long the longest tests take on one core, in seconds (measured with
# --durations on a 2-core machine). Only the order of the run depends on it: a
# stale figure costs wall time, never a result.
LONG_TESTS: dict[str, float] = {
    "tests/stateful/test_runtime_machine.py": 7,  # each of its 4 parts
    "tests/mcp/test_recovery.py": 8,
    "tests/faults/test_soak_short.py": 14,
    "tests/faults/test_git_crash.py": 60,
    "tests/cli/test_read_only_user.py": 15,
    "tests/infrastructure/traceui/test_browser.py": 12,
    "tests/application/tasks/test_task_machine.py": 12,
    "tests/mcp/test_end_to_end.py": 10,
    "tests/readme/test_readme_cli.py": 9,
    "tests/integrations/langgraph/test_kill.py": 8,
    "tests/infrastructure/concurrency/test_concurrent_writers.py": 6,
    "tests/demo/test_crash_rerun.py": 5,
    "tests/integration/runtime/test_cross_process.py": 4,
    "tests/integrations/langgraph/test_graph_against_sqlite.py": 4,
    "tests/cli/test_lifecycle.py": 3,
    "tests/faults/test_sigkill_best_of_n.py": 1,
    "tests/infrastructure/sandbox/test_landlock_process_tree.py": 2,
}


def _weight(item: pytest.Item) -> float:
    return LONG_TESTS.get(item.nodeid.split("::", 1)[0], 0.0)


class LongTestsFirst:
    @pytest.hookimpl(trylast=True)  # after -m and -k deselected what they deselect
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Start the long tests first, spread over the workers (longest first).

        pytest-xdist's ``worksteal`` scheduler (``tasks.py test`` uses it) hands
        worker ``i`` of ``n`` the next ``len(left) // (n - i)`` tests of the
        collection, then moves tests only from the end of a busy worker's queue:
        a long test left at the end of the collection runs alone while the other
        worker idles. So each worker's share starts with its part of the long
        tests (greedy: the next longest goes to the lightest share) and is filled
        up with the other tests in their collected order.
        """
        workers = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
        long = sorted(
            (i for i in items if _weight(i) > 0), key=lambda i: (-_weight(i), i.nodeid)
        )
        if not long:
            return
        sizes, left = [], len(items)
        for worker in range(workers):
            sizes.append(left // (workers - worker))
            left -= sizes[-1]
        shares: list[list[pytest.Item]] = [[] for _ in sizes]
        loads = [0.0] * len(sizes)
        for item in long:
            free = [n for n in range(len(sizes)) if len(shares[n]) < sizes[n]]
            lightest = min(free, key=lambda n: loads[n])
            shares[lightest].append(item)
            loads[lightest] += _weight(item)
        rest = iter(i for i in items if _weight(i) == 0)
        for chosen, size in zip(shares, sizes, strict=True):
            chosen.extend(itertools.islice(rest, size - len(chosen)))
        items[:] = [item for chosen in shares for item in chosen]


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(LongTestsFirst(), "goatherd-long-tests-first")
