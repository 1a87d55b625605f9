"""GoatherdSaver against LangGraph's InMemorySaver as a model, under Hypothesis.

Random sequences of puts (lists that grow, get replaced or shrink, channels that
change or stay, forks from any earlier checkpoint, several namespaces), pending
writes (regular and special) and thread deletions run on both savers. Every
thread then reads the same through ``get_tuple`` and ``list``, and a saver that
rebuilds its index from the trace (another process) reads the same again.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.types import ERROR, INTERRUPT

from goatherd.infrastructure.store import SQLiteTraceStore
from goatherd.integrations.langgraph import GoatherdSaver, ValueLimits

THREADS = ("t1", "t2")
NAMESPACES = ("", "child:1")
CHANNELS = ("messages", "count", "note")

values = st.one_of(
    st.integers(-5, 5),
    st.text(max_size=30),
    st.binary(max_size=40),
    st.lists(st.integers(0, 3), max_size=4),
    st.none(),
)
put_op = st.tuples(
    st.just("put"),
    st.sampled_from(THREADS),
    st.sampled_from(NAMESPACES),
    st.integers(0, 50),  # which earlier checkpoint is the parent (if any)
    st.dictionaries(
        st.sampled_from(CHANNELS),
        st.tuples(st.sampled_from(["grow", "replace", "shrink", "set"]), values),
        max_size=3,
    ),
)
write_op = st.tuples(
    st.just("write"),
    st.integers(0, 50),
    st.sampled_from(["task-a", "task-b"]),
    st.lists(
        st.tuples(st.sampled_from(["messages", "count", ERROR, INTERRUPT]), values),
        min_size=1,
        max_size=3,
    ),
)
delete_op = st.tuples(st.just("delete"), st.sampled_from(THREADS))
operations = st.lists(st.one_of(put_op, put_op, write_op, delete_op), max_size=25)


class Scenario:
    """Runs one operation list on a saver, with the same ids for every saver."""

    def __init__(self) -> None:
        self.puts: list[dict[str, Any]] = []
        self.versions: dict[str, int] = {}

    def state_after(
        self, parent: dict[str, Any] | None, changes: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, int], dict[str, int]]:
        channel_values = dict(parent["values"]) if parent else {}
        versions = dict(parent["versions"]) if parent else {}
        new: dict[str, int] = {}
        for channel, (how, value) in sorted(changes.items()):
            old = channel_values.get(channel)
            if how == "grow":
                base = old if isinstance(old, list) else []
                channel_values[channel] = [*base, value]
            elif how == "shrink" and isinstance(old, list) and old:
                channel_values[channel] = old[:-1]
            elif how == "replace":
                channel_values[channel] = [value]
            else:
                channel_values[channel] = value
            self.versions[channel] = self.versions.get(channel, 0) + 1
            versions[channel] = new[channel] = self.versions[channel]
        return channel_values, versions, new

    def plan(self, ops: list[Any]) -> list[Any]:
        """Fix ids, parents and values, so that every saver gets the same calls."""
        calls: list[Any] = []
        for op in ops:
            if op[0] == "put":
                _, thread, ns, pick, changes = op
                same = [
                    p
                    for p in self.puts
                    if p["thread"] == thread and p["ns"] == ns and not p["deleted"]
                ]
                parent = same[pick % len(same)] if same and pick % 3 else None
                channel_values, versions, new = self.state_after(parent, changes)
                put = {
                    "thread": thread,
                    "ns": ns,
                    "id": str(uuid6(clock_seq=-1)),
                    "parent": parent["id"] if parent else None,
                    "values": channel_values,
                    "versions": versions,
                    "new": new,
                    "deleted": False,
                }
                self.puts.append(put)
                calls.append(("put", put))
            elif op[0] == "write" and self.puts:
                target = self.puts[op[1] % len(self.puts)]
                calls.append(("write", target, op[2], op[3]))
            elif op[0] == "delete":
                # A deleted thread's checkpoints are no parents for later puts
                # (LangGraph never puts a child of a checkpoint it cannot read).
                for put in self.puts:
                    put["deleted"] = put["deleted"] or put["thread"] == op[1]
                calls.append(op)
        return calls


def config(thread: str, ns: str, checkpoint_id: str | None = None) -> Any:
    configurable = {"thread_id": thread, "checkpoint_ns": ns}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def apply(saver: BaseCheckpointSaver[Any], calls: list[Any]) -> None:
    for call in calls:
        if call[0] == "put":
            put = call[1]
            cp = empty_checkpoint()
            cp["id"] = put["id"]
            cp["channel_values"] = {
                k: (list(v) if isinstance(v, list) else v)
                for k, v in put["values"].items()
            }
            cp["channel_versions"] = dict(put["versions"])
            saver.put(
                config(put["thread"], put["ns"], put["parent"]),
                cp,
                {"step": len(put["values"])},
                dict(put["new"]),
            )
        elif call[0] == "write":
            target = call[1]
            saver.put_writes(
                config(target["thread"], target["ns"], target["id"]), call[3], call[2]
            )
        else:
            saver.delete_thread(call[1])


def snapshot(saver: BaseCheckpointSaver[Any]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for thread in THREADS:
        for ns in NAMESPACES:
            latest = saver.get_tuple(config(thread, ns))
            history = list(saver.list(config(thread, ns)))
            seen[f"{thread}/{ns}"] = {
                "latest": latest.checkpoint["id"] if latest else None,
                "history": [
                    (
                        t.checkpoint["id"],
                        t.checkpoint["channel_values"],
                        t.metadata.get("step"),
                        t.parent_config["configurable"]["checkpoint_id"]
                        if t.parent_config
                        else None,
                        t.pending_writes,
                    )
                    for t in history
                ],
            }
    return seen


@given(operations)
def test_the_saver_reads_as_langgraphs_in_memory_saver(ops: list[Any]) -> None:
    calls = Scenario().plan(ops)
    model = InMemorySaver()
    apply(model, calls)
    store = SQLiteTraceStore(":memory:")
    try:
        limits = ValueLimits(chunk_bytes=64, inline_item_bytes=16, max_list_items=2)
        saver = GoatherdSaver(store, limits=limits)
        apply(saver, calls)
        expected = snapshot(model)
        assert snapshot(saver) == expected
        assert snapshot(GoatherdSaver(store, limits=limits)) == expected
    finally:
        store.close()
