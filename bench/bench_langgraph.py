"""GoatherdSaver against LangGraph's own SqliteSaver (issue 18), in one run.

A real ``StateGraph`` runs ``STEPS`` supersteps on one thread; each step adds
one message (about 120 bytes of text) to a ``messages`` list, so the list holds
``STEPS`` messages at the end. Both savers run the same graph with
``durability="sync"`` (each checkpoint is written before the next step), each
on a fresh SQLite file, alternating ``ROUNDS`` times. Reported per saver:

- put throughput: checkpoints written per second of time spent inside ``put``
  and ``put_writes`` (the saver's own cost, not the graph's);
- get throughput: ``get_tuple`` of the latest checkpoint, and of ``GETS``
  earlier checkpoints spread over the history;
- bytes stored: the database file (WAL folded in) after 250, 500 and 1,000
  steps, and the growth exponent ``log2(bytes@1000 / bytes@500)`` (1 is
  linear in the messages, 2 quadratic).

Targets (issue 18): storage linear in the messages (exponent well under 2),
throughput within 2x of the SQLite saver (ratio >= 0.5). Ratios are taken
against SqliteSaver in the same round, and the median round is reported.
"""

from __future__ import annotations

import math
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages

from goatherd.integrations.langgraph import GoatherdSaver

STEPS = int(os.environ.get("BENCH_LANGGRAPH_STEPS", "1000"))
ROUNDS = int(os.environ.get("BENCH_LANGGRAPH_ROUNDS", "3"))
GETS = 50
MARKS = (STEPS // 4, STEPS // 2, STEPS)
TEXT = "lorem ipsum dolor sit amet, consectetur adipiscing elit " * 2


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    n: int


def _step(state: State) -> dict[str, Any]:
    n = state["n"] + 1
    return {"messages": [AIMessage(content=f"{n}: {TEXT}", id=f"m{n}")], "n": n}


def _graph(saver: BaseCheckpointSaver[Any]) -> Any:
    graph = StateGraph(State)
    graph.add_node("step", _step)
    graph.add_edge(START, "step")
    graph.add_conditional_edges(
        "step", lambda s: "step" if s["n"] < STEPS else "__end__"
    )
    return graph.compile(checkpointer=saver)


class _Timer:
    """Wraps a saver's write methods and sums the time spent inside them."""

    def __init__(self, saver: BaseCheckpointSaver[Any]) -> None:
        self.seconds = 0.0
        self.puts = 0
        for name in ("put", "put_writes"):
            setattr(saver, name, self._timed(getattr(saver, name), name == "put"))

    def _timed(self, fn: Callable[..., Any], count: bool) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - start
                self.puts += count

        return timed


def _file_bytes(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.stat().st_size


@contextmanager
def _open(kind: str, path: Path) -> Iterator[BaseCheckpointSaver[Any]]:
    if kind == "goatherd":
        with GoatherdSaver.from_url(path) as saver:
            yield saver
    else:
        with SqliteSaver.from_conn_string(str(path)) as sqlite_saver:
            yield sqlite_saver


def _measure(kind: str, path: Path) -> dict[str, float]:
    config: RunnableConfig = {
        "configurable": {"thread_id": "bench"},
        "recursion_limit": STEPS + 10,
    }
    sizes: dict[int, int] = {}
    with _open(kind, path) as saver:
        timer = _Timer(saver)
        app = _graph(saver)
        chunks = app.stream({"messages": [], "n": 0}, config, durability="sync")
        for step, _ in enumerate(chunks, start=1):
            if step in MARKS:
                sizes[step] = _file_bytes(path)
        history = [t.config for t in saver.list(config)]
        latest = _per_call(lambda: saver.get_tuple(config), GETS)
        picks = history[:: max(1, len(history) // GETS)][:GETS]
        start = time.perf_counter()
        for pick in picks:
            saver.get_tuple(pick)
        older = (time.perf_counter() - start) / len(picks)
    return {
        "puts_per_s": timer.puts / timer.seconds,
        "latest_get_per_s": 1 / latest,
        "older_get_per_s": 1 / older,
        **{f"bytes@{m}": float(sizes[m]) for m in MARKS},
        "growth": math.log2(sizes[MARKS[2]] / sizes[MARKS[1]]),
    }


def _per_call(fn: Callable[[], object], number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def run() -> None:
    print(f"langgraph: {STEPS} steps, one ~120-byte message per step, {ROUNDS} rounds")
    rounds: list[dict[str, dict[str, float]]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(ROUNDS):
            order = ("sqlite", "goatherd") if r % 2 == 0 else ("goatherd", "sqlite")
            rounds.append(
                {k: _measure(k, Path(tmp) / f"{k}-{r}.sqlite") for k in order}
            )
    for kind in ("sqlite", "goatherd"):
        figures = {key: [r[kind][key] for r in rounds] for key in rounds[0][kind]}
        parts = [f"{k}={statistics.median(v):,.2f}" for k, v in figures.items()]
        print(f"  {kind:9s} " + " ".join(parts))
    for key in ("puts_per_s", "latest_get_per_s", "older_get_per_s"):
        ratio = statistics.median(r["goatherd"][key] / r["sqlite"][key] for r in rounds)
        verdict = "PASS" if ratio >= 0.5 else "MISS"
        print(f"  {key} goatherd/sqlite = {ratio:.2f} (target >= 0.5) {verdict}")
    for kind in ("sqlite", "goatherd"):
        growth = statistics.median(r[kind]["growth"] for r in rounds)
        print(f"  {kind} bytes growth exponent 500->1000 steps = {growth:.2f}")
    growth = statistics.median(r["goatherd"]["growth"] for r in rounds)
    verdict = "PASS" if growth < 1.3 else "MISS"
    print(f"  goatherd storage linear (exponent < 1.3) {verdict}")
    size = statistics.median(r["goatherd"][f"bytes@{STEPS}"] for r in rounds)
    base = statistics.median(r["sqlite"][f"bytes@{STEPS}"] for r in rounds)
    print(f"  bytes at {STEPS} steps: goatherd {size:,.0f}, sqlite {base:,.0f}")
