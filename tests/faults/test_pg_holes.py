"""PostgreSQL writers that die between drawing their numbers and COMMIT (ADR 0076).

A writer draws its log positions and commit numbers from sequences, then
writes and commits. Killed in between (SIGKILL of the client, or
``pg_terminate_backend`` of its backend), it leaves those numbers unused for
good. The next seal records each such commit number, and the positions it
took, as a hole step of the chain; ``verify``, ``export`` and ``import``
accept a recorded hole and nothing else. Each case kills a writer at one of
the store's fault points (``postgres.FAULT_POINTS``); afterwards a writer's
open seals, the trace verifies, takes more appends, and its export imports
into SQLite and PostgreSQL with the same head, verifying there too.
"""

from __future__ import annotations

import io
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    RecordDraft,
    StoreUnavailableError,
)
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.portability.jsonl import export_trace, import_trace
from goatherd.infrastructure.store import (
    SQLiteTraceStore,
    open_trace_store,
    open_trace_store_read_only,
)
from goatherd.infrastructure.store import postgres as pg
from goatherd.infrastructure.store.chain import HOLE_TABLE
from tests.zygote import Zygote, zygote

pytestmark = pytest.mark.postgres

_APPEND_POINTS = ("allocated", "written", "committing")


def admin_of(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(False)


def append(url: str, owner: str, n: int) -> None:
    draft = RecordDraft("capture", "app.step.v1", {"after": n})
    batch = AppendBatch(
        f"{owner}:after:{n}", (AppendGroup(owner, fact_drafts=(draft,)),)
    )
    with open_trace_store(url) as store:
        store.append(TRUSTED_APPEND_CONTEXT, batch)


def holes(url: str) -> list[tuple[int, str]]:
    with psycopg.connect(admin_of(url)) as conn:
        rows = conn.execute(
            "SELECT commit_seq, row_key FROM side_writes WHERE table_name = %s "
            "ORDER BY commit_seq",
            (HOLE_TABLE,),
        ).fetchall()
    return [(int(seq), str(key)) for seq, key in rows]


def problems(url: str) -> list[str]:
    with open_trace_store_read_only(url) as store:
        report = verify_trace(store, max_problems=None)
    return [f"{p.check}: {p.detail}" for p in report.problems]


def assert_recovers_and_round_trips(url: str, tmp_path: Path) -> str:
    """A writer's open seals; verify; more appends; export -> import both ways."""
    with open_trace_store(url):
        pass  # a writer opening the trace seals it (records the holes)
    found = problems(url)
    assert found == [], "\n".join(found)
    append(url, "agent:later", 1)
    with open_trace_store(url) as store:
        head = str(store.trace_head())
    assert problems(url) == []
    out = io.StringIO()
    with open_trace_store_read_only(url) as store:
        export_trace(store, out)
    lines = out.getvalue().splitlines(keepends=True)
    assert json.loads(lines[-1])["head"] == head
    with SQLiteTraceStore(tmp_path / f"copy-{uuid.uuid4().hex[:6]}.sqlite") as copy:
        assert import_trace(lines, copy).head == head
        report = verify_trace(copy, expect_head=head)
        assert report.ok, report.problems
    name = f"goatherd_copy_{uuid.uuid4().hex[:10]}"
    admin = admin_of(url)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        target = make_url(url).set(database=name).render_as_string(False)
        with open_trace_store(target) as copy:
            assert import_trace(lines, copy).head == head
            report = verify_trace(copy, expect_head=head)
            assert report.ok, report.problems
            copy.append(  # the copy goes on past every hole it holds
                TRUSTED_APPEND_CONTEXT,
                AppendBatch(
                    "copy:1",
                    (
                        AppendGroup(
                            "agent:copy",
                            fact_drafts=(RecordDraft("capture", "app.step.v1", {}),),
                        ),
                    ),
                ),
            )
            assert verify_trace(copy).ok, verify_trace(copy).problems
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return head


def gone(admin: str, database: str) -> None:
    """Wait until no session of the killed writers is left on ``database``.

    A killed launcher's fork is killed by the zygote a moment later; a
    reader must not race its last commits.
    """
    deadline = time.monotonic() + 60
    with psycopg.connect(admin, autocommit=True) as conn:
        while time.monotonic() < deadline:
            (left,) = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s "
                "AND pid <> pg_backend_pid()",
                (database,),
            ).fetchone() or (0,)
            if left == 0:
                return
            time.sleep(0.1)
    raise AssertionError(f"{left} sessions of killed writers are still on {database}")


@pytest.fixture(scope="module")
def writers() -> Iterator[Zygote]:
    with zygote(["tests.faults.pg_hole_writer"]) as z:
        yield z


# ------------------------------------------------------- SIGKILL, each point


@pytest.mark.parametrize("point", pg.FAULT_POINTS)
def test_a_writer_sigkilled_at_each_point_leaves_a_recorded_hole_that_round_trips(
    point: str, postgres_url: str, writers: Zygote, tmp_path: Path
) -> None:
    done = subprocess.run(
        writers.command(
            "tests.faults.pg_hole_writer", postgres_url, "kill", point, "agent:k"
        ),
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()[-2000:]
    append(postgres_url, "agent:other", 0)  # a commit after the dead one
    assert_recovers_and_round_trips(postgres_url, tmp_path)
    recorded = holes(postgres_url)
    assert len(recorded) == 1, recorded
    # an append abandons its two positions; a ledger row abandons none
    assert recorded[0][1] == ("-" if point == "side-allocated" else "4-5")


# ------------------------------------------- pg_terminate_backend, each point


@pytest.mark.parametrize("point", pg.FAULT_POINTS)
def test_a_writer_whose_backend_is_terminated_at_each_point_leaves_a_recorded_hole(
    point: str, postgres_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    arrived, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []
    with open_trace_store(postgres_url) as store:
        for n in range(2):
            store.append(
                TRUSTED_APPEND_CONTEXT,
                AppendBatch(
                    f"t:{n}",
                    (
                        AppendGroup(
                            "agent:t",
                            fact_drafts=tuple(
                                RecordDraft("capture", "app.step.v1", {"n": n, "i": i})
                                for i in range(2)
                            ),
                        ),
                    ),
                ),
            )

        def writer() -> None:
            try:
                if point == "side-allocated":
                    store.record_completed_materialization("t:mat", "ab" * 32, "{}")
                else:
                    store.append(
                        TRUSTED_APPEND_CONTEXT,
                        AppendBatch(
                            "t:2",
                            (
                                AppendGroup(
                                    "agent:t",
                                    fact_drafts=tuple(
                                        RecordDraft("capture", "app.step.v1", {"i": i})
                                        for i in range(2)
                                    ),
                                ),
                            ),
                        ),
                    )
            except BaseException as error:
                errors.append(error)

        thread = threading.Thread(target=writer)

        def hold(reached: str) -> None:
            if reached == point and threading.current_thread() is thread:
                arrived.set()
                release.wait(30)

        monkeypatch.setattr(pg, "fault_hook", hold)
        thread.start()
        assert arrived.wait(30)
        admin = admin_of(postgres_url)
        database = make_url(postgres_url).database
        with psycopg.connect(admin, autocommit=True) as killer:
            killed = killer.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid() "
                "AND backend_xid IS NOT NULL",
                (database,),
            ).fetchall()
        assert killed == [(True,)]
        release.set()
        thread.join(30)
        monkeypatch.setattr(pg, "fault_hook", None)
    assert len(errors) == 1, errors
    assert isinstance(errors[0], StoreUnavailableError), errors
    append(postgres_url, "agent:other", 0)
    assert_recovers_and_round_trips(postgres_url, tmp_path)
    recorded = holes(postgres_url)
    assert len(recorded) == 1, recorded
    assert recorded[0][1] == ("-" if point == "side-allocated" else "4-5")


# ----------------------------------------------------------------- the loop


@pytest.mark.slow
def test_eight_writers_killed_thirty_times_leave_a_trace_that_verifies_and_round_trips(
    postgres_url: str, tmp_path: Path
) -> None:
    # Plain processes (ADR 0066): a SIGKILL from outside kills the writer
    # itself at once, not a launcher whose fork the zygote kills later.
    kills = int(os.environ.get("GOATHERD_HOLE_KILLS", "32"))
    rng = random.Random(os.environ.get("GOATHERD_FAULT_SEED", "holes"))
    admin, database = admin_of(postgres_url), make_url(postgres_url).database
    with open_trace_store(postgres_url):
        pass  # the schema, before eight writers race to create it

    def start(n: int) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.faults.pg_hole_writer",
                postgres_url,
                "loop",
                f"agent:w{n}",
            ],
            cwd=Path(__file__).parents[2],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    procs = {n: start(n) for n in range(8)}
    serial, sigkills, terminations = 8, 0, 0
    deadline = time.monotonic() + 300
    try:
        while sigkills + terminations < kills and time.monotonic() < deadline:
            time.sleep(rng.uniform(0.05, 0.25))
            if sigkills <= terminations:
                victim = rng.choice(sorted(procs))
                procs[victim].kill()
                procs[victim].wait(30)
                del procs[victim]
                procs[serial] = start(serial)
                serial += 1
                sigkills += 1
            else:  # a backend inside its write transaction (it holds an xid)
                with psycopg.connect(admin, autocommit=True) as killer:
                    killed = killer.execute(
                        "SELECT pg_terminate_backend(pid) FROM ("
                        "SELECT pid FROM pg_stat_activity WHERE datname = %s "
                        "AND pid <> pg_backend_pid() AND backend_xid IS NOT NULL "
                        "ORDER BY random() LIMIT 1) victim",
                        (database,),
                    ).fetchall()
                terminations += killed == [(True,)]
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait(30)
        gone(admin, database or "")
    assert sigkills + terminations >= kills, (sigkills, terminations)
    assert_recovers_and_round_trips(postgres_url, tmp_path)
    recorded = holes(postgres_url)
    print(f"{sigkills} SIGKILLs, {terminations} terminations: {len(recorded)} holes")
    assert recorded, "no kill landed between allocation and COMMIT"
