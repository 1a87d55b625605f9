"""Shared test configuration: Hypothesis profiles and common fixtures."""

from __future__ import annotations

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
