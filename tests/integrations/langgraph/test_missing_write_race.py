"""Two savers racing one (task, idx) write: exactly one wins, every read agrees.

Each saver has its own store object on one trace (as two processes would);
both write the same task's write at the same index of one checkpoint with a
different value at the same moment. Whatever the log order, every saver (and
a fresh one) reads the same single write for that key: the first in the log.
"""

from __future__ import annotations

import base64
import threading
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from goatherd.infrastructure.store import open_trace_store
from goatherd.integrations.langgraph import SCHEMA_WRITE, GoatherdSaver

ROUNDS = 6


def _config(thread: str, checkpoint_id: str | None = None) -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def _checkpoint() -> Checkpoint:
    cp = empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=-1))
    cp["channel_values"] = {"x": 0}
    cp["channel_versions"] = {"x": 1}
    return cp


def test_racing_savers_agree_on_one_write(trace_url: str) -> None:
    stores = [open_trace_store(trace_url) for _ in range(3)]
    try:
        savers = [GoatherdSaver(s) for s in stores[:2]]
        for round_ in range(ROUNDS):
            thread = f"t{round_}"
            stored = savers[0].put(_config(thread), _checkpoint(), {"step": 0}, {})
            cp_id = str(stored["configurable"]["checkpoint_id"])
            barrier = threading.Barrier(2)
            errors: list[BaseException] = []
            workers = [
                threading.Thread(
                    target=_write,
                    args=(s, thread, cp_id, f"from-{n}", barrier, errors),
                )
                for n, s in enumerate(savers)
            ]
            for w in workers:
                w.start()
            for w in workers:
                w.join(timeout=60)
            assert not errors, errors

            written = [
                e.record
                for e in stores[2].read_log(-1, 1_000_000)
                if e.record.envelope.schema_ref == SCHEMA_WRITE
                and e.record.payload["thread_id"] == thread
            ]
            assert written, "no write recorded"
            first = written[0].payload["value"]
            assert isinstance(first, dict)
            reads: list[list[tuple[str, str, Any]]] = []
            for saver in (*savers, GoatherdSaver(stores[2])):
                got = saver.get_tuple(_config(thread, cp_id))
                assert got is not None
                reads.append(list(got.pending_writes or []))
            assert reads[0] == reads[1] == reads[2], reads
            assert len(reads[0]) == 1, reads[0]
            task, channel, value = reads[0][0]
            assert (task, channel) == ("task-1", "x")
            assert value in ("from-0", "from-1")
            # The winner is the first write in the log, whoever appended it.
            held = (str(first["type"]), base64.b64decode(str(first["data"])))
            assert savers[0].serde.loads_typed(held) == value
    finally:
        for store in stores:
            store.close()


def _write(
    saver: GoatherdSaver,
    thread: str,
    checkpoint_id: str,
    value: str,
    barrier: threading.Barrier,
    errors: list[BaseException],
) -> None:
    try:
        saver.get_tuple(_config(thread, checkpoint_id))  # caught up before the race
        barrier.wait(timeout=30)
        saver.put_writes(_config(thread, checkpoint_id), [("x", value)], "task-1")
    except BaseException as error:
        errors.append(error)
