"""A run that dies at any write boundary is finished once by a retry.

The reference script is run once on a clean trace; then, for every write it
makes (each append and each cut) and both sides of it, a run dies right there
and is retried, in the same process (the same store object) and in a new one
(a fresh store on the file). The retried trace must hold exactly the
reference's records on every execution path, in the same order; the body runs
again only when the death came before its end was recorded (a death between
the end and the frontier is finished by publishing the frontier).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from goatherd.application import start_task_sync
from goatherd.infrastructure.store import SQLiteTraceStore
from tests.application.tasks.scripts import (
    Crashing,
    ProcessDied,
    Script,
    Side,
    all_paths,
    registry_for,
)

RUN = "run:crash"
SCRIPT = Script(("publish", "spawn", "spawn_abandon", "spawn_failing", "publish"))
SCRIPTS = {"Main": SCRIPT}


def reference(tmp_path: Path) -> tuple[dict[str, list[str]], list[str]]:
    db = tmp_path / "reference.sqlite"
    with Crashing(db) as store:
        start_task_sync(store, registry_for(SCRIPTS, Counter()), "Main", RUN).unwrap()
        return all_paths(store), store.writes


@pytest.fixture(scope="module")
def expected(tmp_path_factory: pytest.TempPathFactory):
    return reference(tmp_path_factory.mktemp("reference"))


def boundaries() -> list[tuple[int, Side]]:
    # 1 create, per publish 1, per spawned child: relation + create + end +
    # cut, 1 abandon, the run's end and its cut.
    writes = 1 + 2 + 3 * 4 + 1 + 2
    return [(n, side) for n in range(writes) for side in ("before", "after")]


def test_the_reference_makes_the_writes_the_boundaries_enumerate(expected) -> None:
    _, writes = expected
    assert len(writes) == len(boundaries()) // 2
    assert writes[-2:] == [f"{RUN}:complete", f"cut frontier:{RUN}:terminal"]


@pytest.mark.parametrize("new_process", [False, True], ids=["same", "new"])
@pytest.mark.parametrize(("at", "side"), boundaries())
def test_a_death_at_any_write_is_finished_once_by_a_retry(
    tmp_path: Path, expected, at: int, side: Side, new_process: bool
) -> None:
    paths, writes = expected
    calls: Counter[str] = Counter()
    registry = registry_for(SCRIPTS, calls)
    db = tmp_path / "t.sqlite"
    dying = Crashing(db, at, side)
    with pytest.raises(ProcessDied):
        start_task_sync(dying, registry, "Main", RUN)
    if new_process:
        dying.close()
        retry = SQLiteTraceStore(db)
    else:
        dying.at = None
        retry = dying
    with retry:
        run = start_task_sync(retry, registry, "Main", RUN).unwrap()
        assert run.wait().outputs == {"steps": len(SCRIPT.ops)}
        assert all_paths(retry) == paths
        assert [f.kind for f in run.history().published_facts] == SCRIPT.publishes
    # The body ran before the death unless the opening append was where it
    # died; the retry runs it again unless the end was recorded.
    end = writes.index(f"{RUN}:complete")
    died_before_end = at < end or (at == end and side == "before")
    assert calls["Main"] == int(at > 0) + int(died_before_end)
