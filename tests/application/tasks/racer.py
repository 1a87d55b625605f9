"""A separate process running one shared run id (``python -m ...racer``).

``racer.py URL RUN_ID INDEX READY_DIR COUNT`` opens the trace (a SQLite path
or a store URL) and runs task
``Race`` under ``RUN_ID``. The body publishes the fact every racer publishes
(it replays), waits until COUNT racers are inside their bodies, publishes
three facts of its own, then returns ``{"index": INDEX}`` (even index) or
raises (odd index). Every end differs, so at most one can be recorded. It
prints ``RESULT Success`` or ``RESULT <failure type>``.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path

from returns.result import Success

from goatherd.application import Registry, TaskControl, start_task_sync
from goatherd.infrastructure.store import open_trace_store

BARRIER_TIMEOUT = 120.0


def body_for(
    index: int, ready: Path, count: int
) -> Callable[[TaskControl], dict[str, object]]:
    def body(control: TaskControl) -> dict[str, object]:
        control.publish("start", {})
        (ready / str(index)).write_text("in")
        deadline = time.monotonic() + BARRIER_TIMEOUT
        while len(list(ready.iterdir())) < count and time.monotonic() < deadline:
            time.sleep(0.005)
        try:
            for step in range(3):
                control.publish("step", {"by": index, "k": step})
        except Exception as error:  # a lost publish: end with this racer's own error
            raise RuntimeError(f"racer {index}: {type(error).__name__}") from error
        if index % 2:
            raise RuntimeError(f"racer {index} fails")
        return {"index": index}

    return body


def main() -> None:
    db, run_id, index, ready, count = sys.argv[1:6]
    registry = Registry()
    registry.register("Race", body_for(int(index), Path(ready), int(count)))
    with open_trace_store(db) as store:
        result = start_task_sync(store, registry, "Race", run_id)
    name = "Success" if isinstance(result, Success) else type(result.failure()).__name__
    print(f"RESULT {name}", flush=True)


if __name__ == "__main__":
    main()
    gc.freeze()  # the process ends next: no collector walk over the imports
