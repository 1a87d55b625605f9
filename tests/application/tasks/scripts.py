"""Scripted task bodies and a store that dies at a chosen write, for crash tests.

A :class:`Script` is what a body does, step by step (publish, spawn a leaf and
await it, spawn and abandon, spawn a failing leaf, adopt a finished run), and
how it ends. Bodies are deterministic, so a retry after a crash re-issues the
same intents with the same content. :class:`Crashing` is a real SQLite store
whose process "dies" (``ProcessDied``, a ``BaseException`` nothing catches)
right before or right after its N-th write (an append or a cut).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypeVar

from goatherd.application import Registry, TaskControl
from goatherd.domain import (
    MAX_OWNER_ORDINAL,
    TRUSTED_READ_CONTEXT,
    AppendBatch,
    AppendContext,
    AppendReceipt,
    Cut,
    CutSpec,
    ExecutionCreated,
    LogEntry,
    OperationContext,
    RuntimeEvent,
    decode_fact,
)
from goatherd.infrastructure.store import SQLiteTraceStore

Op = Literal["publish", "spawn", "spawn_abandon", "spawn_failing", "adopt"]
OPS: tuple[Op, ...] = ("publish", "spawn", "spawn_abandon", "spawn_failing", "adopt")
Side = Literal["before", "after"]
T = TypeVar("T")


class ProcessDied(BaseException):
    """Stands for the process dying: nothing after it runs."""


@dataclass(frozen=True)
class Script:
    """What a scripted body does and how it ends.

    Attributes:
        ops: the steps, in order.
        fails: end by raising instead of returning outputs.
        adopt: ``(execution_id, frontier_id)`` of a finished run to adopt.
    """

    ops: tuple[Op, ...]
    fails: bool = False
    adopt: tuple[str, str] | None = None

    @property
    def publishes(self) -> list[str]:
        """The kinds of the facts the body publishes, in order."""
        return [f"p{n}" for n, op in enumerate(self.ops) if op == "publish"]


def registry_for(scripts: Mapping[str, Script], calls: Counter[str]) -> Registry:
    """Return a registry running ``scripts[task_ref]``; ``calls`` counts bodies."""
    registry = Registry()

    def leaf() -> dict[str, object]:
        calls["Leaf"] += 1
        return {"leaf": True}

    def broken() -> None:
        calls["Broken"] += 1
        raise ValueError("broken leaf")

    registry.register("Leaf", leaf)
    registry.register("Broken", broken)
    for ref, script in scripts.items():
        registry.register(ref, _body(ref, script, calls))
    return registry


def _body(
    ref: str, script: Script, calls: Counter[str]
) -> Callable[[TaskControl], dict[str, object]]:
    def body(control: TaskControl) -> dict[str, object]:
        calls[ref] += 1
        for n, op in enumerate(script.ops):
            _step(control, n, op, script)
        if script.fails:
            raise RuntimeError(f"{ref} fails")
        return {"steps": len(script.ops)}

    return body


def _step(control: TaskControl, n: int, op: Op, script: Script) -> None:
    if op == "publish":
        control.publish(f"p{n}", {"n": n})
    elif op == "spawn":
        control.await_terminal(control.spawn("Leaf", {"n": n}))
    elif op == "spawn_abandon":
        control.abandon(control.spawn("Leaf", {"n": n}))
    elif op == "spawn_failing":
        control.spawn("Broken", {"n": n})
    elif script.adopt is not None:
        control.adopt(*script.adopt)


DeathPoint = Callable[[int, str], bool]
"""``(write index, write name) -> die here?``; a write's name is its append
intent, or ``cut <frontier id>`` for a published cut."""


class Crashing(SQLiteTraceStore):
    """A real store whose process dies right before or after a chosen write.

    ``at`` is the write's index, or a :data:`DeathPoint` choosing it by name
    (the first write it accepts); ``None`` never dies.
    """

    def __init__(
        self, path: Path, at: int | DeathPoint | None = None, side: Side = "before"
    ):
        super().__init__(path)
        self.at = at
        self.side = side
        self.writes: list[str] = []
        self.died = ""

    def append(
        self,
        context: AppendContext | OperationContext,
        batch: AppendBatch,
        *,
        expected_heads: Mapping[str, int] | None = None,
    ) -> AppendReceipt:
        return self._fault_write(
            batch.append_intent_id,
            lambda: super(Crashing, self).append(
                context, batch, expected_heads=expected_heads
            ),
        )

    def publish_cut(
        self, context: AppendContext | OperationContext, spec: CutSpec
    ) -> Cut:
        return self._fault_write(
            f"cut {spec.frontier_id}",
            lambda: super(Crashing, self).publish_cut(context, spec),
        )

    def _fault_write(self, name: str, write: Callable[[], T]) -> T:
        index = len(self.writes)
        self.writes.append(name)
        dies = not self.died and self._chosen(index, name)
        if dies and self.side == "before":
            self.died = f"before write {index} ({name})"
            raise ProcessDied(self.died)
        done = write()
        if dies:
            self.died = f"after write {index} ({name})"
            raise ProcessDied(self.died)
        return done

    def _chosen(self, index: int, name: str) -> bool:
        if self.at is None:
            return False
        if isinstance(self.at, int):
            return index == self.at
        return self.at(index, name)


def execution_ids(store: SQLiteTraceStore) -> list[str]:
    """Return every execution created in the trace, in creation order."""
    owners = []
    for entry in _log(store, ExecutionCreated.SCHEMA):
        view = entry.record.view
        if view is not None and view.trace_owner_id not in owners:
            owners.append(view.trace_owner_id)
    return owners


def _log(store: SQLiteTraceStore, schema: str) -> Iterator[LogEntry]:
    after = -1
    while True:
        page = store.read_log(after, 1000, schema_refs=[schema])
        yield from page
        if len(page) < 1000:
            return
        after = page[-1].position


def path_ids(store: SQLiteTraceStore, owner: str) -> list[str]:
    """Return the record ids on ``owner``'s path, in path order."""
    slice_ = store.read_owner_prefix(TRUSTED_READ_CONTEXT, owner, MAX_OWNER_ORDINAL)
    return list(slice_.owner_paths.get(owner, ()))


def path_events(store: SQLiteTraceStore, owner: str) -> list[RuntimeEvent]:
    """Return the decoded events on ``owner``'s path, in path order."""
    slice_ = store.read_owner_prefix(TRUSTED_READ_CONTEXT, owner, MAX_OWNER_ORDINAL)
    return [
        decode_fact(slice_.facts_by_id[rid]).event  # type: ignore[arg-type]
        for rid in slice_.owner_paths.get(owner, ())
    ]


def all_paths(store: SQLiteTraceStore) -> dict[str, list[str]]:
    """Return every execution path of the trace with its record ids."""
    return {owner: path_ids(store, owner) for owner in execution_ids(store)}
