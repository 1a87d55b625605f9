"""The collector pause around a log read: off inside, restored after, shared."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    RecordDraft,
)
from goatherd.infrastructure import SQLiteTraceStore
from goatherd.infrastructure.store.collector import collector_paused


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        (gc.enable if was else gc.disable)()


@pytest.mark.usefixtures("collector_on")
def test_the_pause_switches_the_collector_off_and_back_on_even_on_an_error() -> None:
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError, match="boom"), collector_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


@pytest.mark.usefixtures("collector_on")
def test_a_collector_the_program_disabled_stays_disabled() -> None:
    gc.disable()
    with collector_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


@pytest.mark.usefixtures("collector_on")
def test_nested_pauses_resume_only_when_the_outermost_ends() -> None:
    with collector_paused():
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


@pytest.mark.usefixtures("collector_on")
def test_overlapping_pauses_of_two_threads_leave_the_collector_on() -> None:
    first_in, second_in, first_out = (threading.Event() for _ in range(3))
    seen: list[bool] = []

    def first() -> None:
        with collector_paused():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with collector_paused():
            second_in.set()
            first_out.wait(5)
            seen.append(gc.isenabled())  # the first left; this pause still holds

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert seen == [False]
    assert gc.isenabled()


@pytest.mark.usefixtures("collector_on")
@pytest.mark.parametrize("enabled", [True, False])
def test_a_log_read_leaves_the_collector_as_it_found_it(
    tmp_path: Path, enabled: bool
) -> None:
    with SQLiteTraceStore(tmp_path / "trace.db") as store:
        drafts = tuple(RecordDraft("capture", "test.v1", {"n": n}) for n in range(5))
        store.append(
            TRUSTED_APPEND_CONTEXT,
            AppendBatch("fill", (AppendGroup("owner", fact_drafts=drafts),)),
        )
        (gc.enable if enabled else gc.disable)()
        entries = store.read_log(-1, 100)
        assert gc.isenabled() is enabled
    assert [e.record.payload for e in entries][-5:] == [{"n": n} for n in range(5)]
