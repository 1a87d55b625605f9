"""The recorded task-runtime trace replays byte for byte and reads as recorded.

``golden/tasks_v1.json`` (written once by ``golden.py``) is appended batch by
batch to a fresh store: every record must get the id it was recorded with
(on a SQLite file and on PostgreSQL), the kernel projections must answer what
they answered then, and today's task runtime must carry on from each run's
state: a finished run starts without running or appending anything, the run
killed before its frontier gets it without running its body, the run killed
mid-body runs again and ends once.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from goatherd.application import start_task_sync
from goatherd.domain import execution_id_for
from goatherd.infrastructure.store import open_trace_store
from tests.application.tasks import golden
from tests.application.tasks.golden import (
    FIXTURE,
    RUNS,
    TASKS,
    answers,
    registry,
    replay,
)

RECORDED = json.loads(FIXTURE.read_text())


@pytest.fixture
def url(durable_store_url: str) -> str:
    with open_trace_store(durable_store_url) as store:
        replay(store, RECORDED["ops"])
    return durable_store_url


def test_the_recorded_runs_are_all_here() -> None:
    executions = {execution_id_for(f"{run}:create") for run in RUNS}
    assert executions <= set(RECORDED["expected"])


def test_the_trace_replays_byte_for_byte_and_reads_as_recorded(url: str) -> None:
    with open_trace_store(url) as store:
        assert answers(store) == RECORDED["expected"]


@pytest.mark.parametrize("run_id", ["run:leaf", "run:tree", "run:failed", "run:raced"])
def test_a_finished_run_starts_without_running_or_appending(
    url: str, run_id: str
) -> None:
    calls: Counter[str] = Counter()
    with open_trace_store(url) as store:
        before = store.max_position()
        run = start_task_sync(store, registry(calls), TASKS[run_id], run_id).unwrap()
        assert run.done()
        assert store.max_position() == before
    assert calls == Counter()


def test_the_run_killed_before_its_frontier_gets_it_without_running(
    url: str,
) -> None:
    calls: Counter[str] = Counter()
    run_id = "run:ended-no-cut"
    with open_trace_store(url) as store:
        before = store.max_position()
        run = start_task_sync(store, registry(calls), TASKS[run_id], run_id).unwrap()
        assert run.wait().outputs == {"leaf": True}
        assert store.max_position() == before + 1  # the frontier record
    assert calls == Counter()


def test_the_run_killed_mid_body_runs_again_and_ends_once(url: str) -> None:
    calls: Counter[str] = Counter()
    run_id = "run:mid-body"
    with open_trace_store(url) as store:
        run = start_task_sync(store, registry(calls), TASKS[run_id], run_id).unwrap()
        history = run.history()
        assert history.root.outputs == {"whole": True}
        assert [f.kind for f in history.published_facts] == ["half"]
    assert calls == Counter({"Halfway": 1})


def test_the_fixture_is_never_rewritten() -> None:
    before = FIXTURE.read_text()
    with pytest.raises(SystemExit, match="committed fixtures never change"):
        golden.main()
    assert FIXTURE.read_text() == before
