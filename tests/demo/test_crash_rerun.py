"""``goatherd demo --crash-after N`` SIGKILLs itself; the same command resumes.

The crash points are found by counting the records of a full run (each
published path entry counts one): early, mid-attempt, inside the careful
agent's restore, inside the winner's settle window (its claim is in, the
effect and the settle records are not), right after the winner settled, and
while the losers are being discarded. Each crash is followed by a rerun of
the same command, which must finish the session exactly once.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from goatherd.demo.state import COMPLETED_SCHEMA, ROUND_SCHEMA
from goatherd.domain import (
    CheckpointClaimed,
    OutputClaimed,
    OutputSettled,
)
from goatherd.infrastructure.store import open_trace_store_read_only
from tests.demo.support import (
    assert_final_state,
    count_schema,
    log_of,
    run_demo_process,
)

pytestmark = pytest.mark.integration

Entry = tuple[int, str, str, dict[str, object]]
IntentEntry = tuple[int, str, str, dict[str, object]]
Landmark = Callable[[list[Entry]], int]


def _after(entries: list[Entry], schema: str, owner: str = "") -> int:
    """N that crashes right after the first matching entry (positions are 0-based)."""
    return next(p + 1 for p, o, s, _ in entries if s == schema and owner in ("", o))


WINNER = "demo:main:attempt-2"
LOSER = "demo:main:attempt-1"
LANDMARKS: dict[str, Landmark] = {
    "early, after the round is planned": lambda log: _after(log, ROUND_SCHEMA),
    "mid-attempt, after the careful agent's failing test run": lambda log: _after(
        log, "demo.tool.run_tests.v1", WINNER
    ),
    "inside the restore, after its claim": lambda log: _after(
        log, CheckpointClaimed.SCHEMA
    ),
    "inside the winner's settle window, after its claim": lambda log: _after(
        log, OutputClaimed.SCHEMA
    ),
    "after the winner settled, before its decision": lambda log: _after(
        log, OutputSettled.SCHEMA, WINNER
    ),
    "while the losers are discarded": lambda log: _after(
        log, OutputSettled.SCHEMA, LOSER
    ),
}


@pytest.fixture(scope="module")
def reference_log(tmp_path_factory) -> list[Entry]:
    directory = tmp_path_factory.mktemp("reference") / "demo"
    done = run_demo_process(directory)
    assert done.returncode == 0, done.stderr
    return log_of(directory / "trace.sqlite")


def crash(directory: Path, n: int) -> None:
    done = run_demo_process(directory, "--crash-after", str(n))
    assert done.returncode == -signal.SIGKILL, (done.returncode, done.stderr)
    assert f"--crash-after {n}: killing this process now" in done.stderr


def rerun(directory: Path) -> str:
    done = run_demo_process(directory)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("where", list(LANDMARKS))
def test_a_crash_and_a_rerun_finish_the_session_exactly_once(
    tmp_path, reference_log, where
):
    n = LANDMARKS[where](reference_log)
    assert 1 <= n < len(reference_log)
    directory = tmp_path / "demo"
    # The first run dies at the crash point; the trace keeps what committed.
    crash(directory, n)
    trace = directory / "trace.sqlite"
    assert count_schema(trace, COMPLETED_SCHEMA) == 0
    # The same command again recovers from the trace and finishes.
    out = rerun(directory)
    assert "resumed from the trace and completed" in out
    assert "SELECTED" in out
    assert "DENIED" in out
    assert_final_state(directory)
    assert count_schema(trace, COMPLETED_SCHEMA) == 1
    # A third run finds the session complete and writes nothing.
    before = log_of(trace)
    assert "already complete" in rerun(directory)
    assert log_of(trace) == before


def test_the_winners_claimed_settlement_is_finished_under_its_own_intent(
    tmp_path, reference_log
):
    n = LANDMARKS["inside the winner's settle window, after its claim"](reference_log)
    directory = tmp_path / "demo"
    crash(directory, n)
    # One claim record, placed on the output's path and on the parent's.
    claimed = sorted(
        {
            (payload["output_id"], payload["settle_intent"])
            for _, _, schema, payload in log_of(directory / "trace.sqlite")
            if schema == OutputClaimed.SCHEMA
        }
    )
    assert len(claimed) == 1
    out = rerun(directory)
    assert f"under its intent {claimed[0][1]}" in out
    settled = [
        (payload["output_id"], payload["action"], intent)
        for _, intent, schema, payload in _log_with_intents(directory / "trace.sqlite")
        if schema == OutputSettled.SCHEMA and payload["action"] == "selected"
    ]
    assert {(s[0], s[2]) for s in settled} == {claimed[0]}
    # The whole session stayed in one round: nothing had to run again.
    assert "in 2 rounds" not in out
    assert_final_state(directory)


def test_a_crash_during_the_resume_is_resumed_too(tmp_path, reference_log):
    n = LANDMARKS["mid-attempt, after the careful agent's failing test run"](
        reference_log
    )
    directory = tmp_path / "demo"
    crash(directory, n)
    # The resume itself dies after a few records (it discards, then plans).
    crash(directory, 3)
    out = rerun(directory)
    assert "resumed from the trace and completed in 2 rounds" in out
    assert "UNFINISHED" not in out
    assert_final_state(directory)
    assert count_schema(directory / "trace.sqlite", COMPLETED_SCHEMA) == 1


def _log_with_intents(trace: Path) -> list[IntentEntry]:
    """Every path entry: (position, append intent, schema, payload)."""
    store = open_trace_store_read_only(trace)
    try:
        return [
            (
                e.position,
                e.append_intent_id,
                e.record.envelope.schema_ref,
                dict(e.record.payload),
            )
            for e in store.read_log(-1, 100_000)
        ]
    finally:
        store.close()
