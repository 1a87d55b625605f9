"""Several real processes running one run id: one end is recorded, once.

Each racer (``racer.py``) replays the shared opening and first fact, waits
until every racer is inside its body, then races to publish and to end the
run with an end no other racer would record. The trace must hold exactly one
terminal record, nothing but the run's frontier after it, and exactly one
racer may report ``Success``: the one whose end is recorded. It runs on a
SQLite file and, when ``GOATHERD_TEST_DB_URL`` names a server, on PostgreSQL.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from goatherd.application import Registry, start_task_sync
from goatherd.domain import (
    MAX_OWNER_ORDINAL,
    TRUSTED_READ_CONTEXT,
    ExecutionCompleted,
    ExecutionFailed,
    FactPublished,
    OpaqueRecord,
    decode_fact,
    execution_id_for,
)
from goatherd.infrastructure.store import open_trace_store

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[3]
RACERS = 6
RUN = "run:race"


def race(db: str, ready: Path) -> list[str]:
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.application.tasks.racer",
                db,
                RUN,
                str(index),
                str(ready),
                str(RACERS),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for index in range(RACERS)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
        assert lines, f"racer printed no result: {out!r} {err[-2000:]!r}"
        results.append(lines[-1].removeprefix("RESULT "))
    return results


def test_racers_ending_one_run_record_exactly_one_end(
    tmp_path: Path, durable_store_url: str
) -> None:
    db, ready = durable_store_url, tmp_path / "ready"
    ready.mkdir()
    with open_trace_store(db):
        pass  # create the schema once, before the racers open the store
    results = race(db, ready)
    assert sorted(results) == ["ExecutionTerminalError"] * (RACERS - 1) + ["Success"]
    winner = results.index("Success")

    execution = execution_id_for(f"{RUN}:create")
    with open_trace_store(db) as store:
        slice_ = store.read_owner_prefix(
            TRUSTED_READ_CONTEXT, execution, MAX_OWNER_ORDINAL
        )
        events = [
            decode_fact(slice_.facts_by_id[rid]).event  # type: ignore[arg-type]
            for rid in slice_.owner_paths[execution]
        ]
        ends = [
            n
            for n, e in enumerate(events)
            if isinstance(e, ExecutionCompleted | ExecutionFailed)
        ]
        assert len(ends) == 1
        # After the end: the run's frontier only, no fact from a late racer.
        assert [type(e) for e in events[ends[0] + 1 :]] == [OpaqueRecord]
        facts = [e for e in events if isinstance(e, FactPublished)]
        assert [f.kind for f in facts][:1] == ["start"]
        assert len({f.data["by"] for f in facts[1:]}) <= 1
        # The recorded end is the winner's own: its outputs, or its error (a
        # racer that lost a publish fails with its own message).
        ended = start_task_sync(store, Registry(), "Race", RUN).unwrap().wait()
        if ended.error is None:
            assert ended.outputs == {"index": winner}
        else:
            assert ended.error.startswith(f"RuntimeError: racer {winner}")
