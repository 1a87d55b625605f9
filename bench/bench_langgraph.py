"""GoatherdSaver against the savers users would pick instead, in one run.

Part 1: speed and storage against ``SqliteSaver``
(langgraph-checkpoint-sqlite) on SQLite and ``PostgresSaver``
(langgraph-checkpoint-postgres) on PostgreSQL, when ``GOATHERD_BENCH_DB_URL``
or ``GOATHERD_TEST_DB_URL`` names a server. Every measurement gets a fresh
SQLite file or a fresh PostgreSQL schema, used by one saver only.

- Speed, two shapes: ``MANY`` threads of a 3-node graph invoked once each, and
  one thread of ``LONG`` supersteps; every node adds one ~120-byte message to a
  ``messages`` list. A step costs what the graph's calls into the saver cost
  (``get_tuple``, ``put``, ``put_writes``, ``list``: timed inside the saver),
  with ``durability="sync"``. Reported: steps (``put`` calls) per second of
  that time. ``ROUNDS`` interleaved rounds (the order of the savers
  alternates); the ratio goatherd / theirs is taken per round and the median
  round is reported. Target: >= 1.0 on each backend and shape.
- History: ``list`` of the whole ``LONG``-step thread (what
  ``get_state_history`` reads), the median of ``HISTORY_READS`` reads, same
  rounds. Target: >= 1.0.
- Storage per checkpoint, four shapes (first round): one thread of a counter,
  ``MANY`` threads, one thread whose large state never changes after the
  input, and the growing message list of the ``LONG`` thread. Bytes are the
  database's (SQLite: the file with its WAL folded in; PostgreSQL: every
  relation of the schema, indexes and TOAST included) minus what the empty,
  set-up database held. Target: never more than theirs.

Part 2 (issue 18): a 1,000-step thread against ``SqliteSaver``, storage growth
exponent (linear in the messages) and put/get throughput within 2x.
"""

from __future__ import annotations

import math
import os
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict
from urllib.parse import quote

from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from sqlalchemy import create_engine, make_url, text

from goatherd.integrations.langgraph import GoatherdSaver

STEPS = int(os.environ.get("BENCH_LANGGRAPH_STEPS", "1000"))
ROUNDS = int(os.environ.get("BENCH_LANGGRAPH_ROUNDS", "3"))
MANY = int(os.environ.get("BENCH_LANGGRAPH_THREADS", "200"))
LONG = int(os.environ.get("BENCH_LANGGRAPH_LONG", "100"))
BIG = 64 * 1024
GETS = 50
HISTORY_READS = 3
MARKS = (STEPS // 4, STEPS // 2, STEPS)
TEXT = "lorem ipsum dolor sit amet, consectetur adipiscing elit " * 2
TIMED = ("get_tuple", "put", "put_writes", "list")


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    n: int


class Counter(TypedDict):
    n: int


class Big(TypedDict):
    doc: str
    n: int


def _message(n: int) -> dict[str, Any]:
    return {"messages": [AIMessage(content=f"{n}: {TEXT}", id=f"m{n}")], "n": n}


def _step(state: State) -> dict[str, Any]:
    return _message(state["n"] + 1)


def _loop(saver: BaseCheckpointSaver[Any], steps: int) -> Any:
    graph = StateGraph(State)
    graph.add_node("step", _step)
    graph.add_edge(START, "step")
    graph.add_conditional_edges(
        "step", lambda s: "step" if s["n"] < steps else "__end__"
    )
    return graph.compile(checkpointer=saver)


def _three_nodes(saver: BaseCheckpointSaver[Any]) -> Any:
    graph = StateGraph(State)
    for name in ("a", "b", "c"):
        graph.add_node(name, _step)
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    graph.add_edge("b", "c")
    return graph.compile(checkpointer=saver)


def _counter(saver: BaseCheckpointSaver[Any], steps: int) -> Any:
    graph = StateGraph(Counter)
    graph.add_node("step", lambda s: {"n": s["n"] + 1})
    graph.add_edge(START, "step")
    graph.add_conditional_edges(
        "step", lambda s: "step" if s["n"] < steps else "__end__"
    )
    return graph.compile(checkpointer=saver)


def _big(saver: BaseCheckpointSaver[Any], steps: int) -> Any:
    graph = StateGraph(Big)
    graph.add_node("step", lambda s: {"n": s["n"] + 1})
    graph.add_edge(START, "step")
    graph.add_conditional_edges(
        "step", lambda s: "step" if s["n"] < steps else "__end__"
    )
    return graph.compile(checkpointer=saver)


class _Timer:
    """Wraps a saver's methods and sums the time spent inside them."""

    def __init__(self, saver: BaseCheckpointSaver[Any], names: tuple[str, ...]):
        self.seconds = 0.0
        self.puts = 0
        for name in names:
            setattr(saver, name, self._timed(getattr(saver, name), name == "put"))

    def _timed(self, fn: Callable[..., Any], count: bool) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                result = fn(*args, **kwargs)
                if isinstance(result, Iterator):
                    result = iter(list(result))  # list() is lazy: time the reads
                return result
            finally:
                self.seconds += time.perf_counter() - start
                self.puts += count

        return timed


# ------------------------------------------------------------- backends


class _Backend:
    """A fresh database per saver: its URL, its bytes, and a way to drop it."""

    name = ""

    def goatherd(self) -> Any:
        raise NotImplementedError

    def theirs(self) -> Any:
        raise NotImplementedError

    def bytes(self) -> int:
        raise NotImplementedError

    def close(self) -> None:
        """Drop what the backend created."""


class _Sqlite(_Backend):
    name = "sqlite"

    def __init__(self, folder: Path) -> None:
        self.path = folder / f"{uuid.uuid4().hex}.sqlite"

    @contextmanager
    def goatherd(self) -> Iterator[BaseCheckpointSaver[Any]]:
        with GoatherdSaver.from_url(self.path) as saver:
            yield saver

    @contextmanager
    def theirs(self) -> Iterator[BaseCheckpointSaver[Any]]:
        with SqliteSaver.from_conn_string(str(self.path)) as saver:
            saver.setup()
            yield saver

    def bytes(self) -> int:
        with sqlite3.connect(self.path) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return self.path.stat().st_size

    def close(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)


class _Postgres(_Backend):
    name = "postgres"

    def __init__(self, url: str) -> None:
        self.schema = "lgbench_" + uuid.uuid4().hex[:12]
        self.admin = create_engine(url)
        with self.admin.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{self.schema}"'))
        separator = "&" if "?" in url else "?"
        option = quote(f"-csearch_path={self.schema}")
        self.url = f"{url}{separator}options={option}"
        plain = make_url(url).set(drivername="postgresql")
        self.libpq = (
            plain.render_as_string(hide_password=False)
            + ("&" if "?" in str(plain) else "?")
            + f"options={option}"
        )

    @contextmanager
    def goatherd(self) -> Iterator[BaseCheckpointSaver[Any]]:
        with GoatherdSaver.from_url(self.url) as saver:
            yield saver

    @contextmanager
    def theirs(self) -> Iterator[BaseCheckpointSaver[Any]]:
        with PostgresSaver.from_conn_string(self.libpq) as saver:
            saver.setup()
            yield saver

    def bytes(self) -> int:
        query = text(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = :schema AND c.relkind IN ('r', 'm')"
        )
        with self.admin.begin() as conn:
            return int(conn.execute(query, {"schema": self.schema}).scalar_one())

    def close(self) -> None:
        with self.admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{self.schema}" CASCADE'))
        self.admin.dispose()


def _pg_url() -> str | None:
    return os.environ.get("GOATHERD_BENCH_DB_URL") or os.environ.get(
        "GOATHERD_TEST_DB_URL"
    )


@contextmanager
def _fresh(backend: str, folder: Path) -> Iterator[_Backend]:
    made: _Backend
    if backend == "sqlite":
        made = _Sqlite(folder)
    else:
        url = _pg_url()
        assert url is not None
        made = _Postgres(url)
    try:
        yield made
    finally:
        made.close()


# --------------------------------------------------------------- shapes


def _config(thread: str, limit: int = 50) -> RunnableConfig:
    return {"configurable": {"thread_id": thread}, "recursion_limit": limit}


def _run_many(saver: BaseCheckpointSaver[Any]) -> None:
    app = _three_nodes(saver)
    for t in range(MANY):
        app.invoke({"messages": [], "n": 0}, _config(f"t{t}"), durability="sync")


def _run_long(saver: BaseCheckpointSaver[Any]) -> None:
    app = _loop(saver, LONG)
    app.invoke({"messages": [], "n": 0}, _config("long", LONG + 10), durability="sync")


def _run_counter(saver: BaseCheckpointSaver[Any]) -> None:
    app = _counter(saver, LONG)
    app.invoke({"n": 0}, _config("counter", LONG + 10), durability="sync")


def _run_big(saver: BaseCheckpointSaver[Any]) -> None:
    app = _big(saver, LONG // 2)
    doc = "".join(f"{i:08x}" for i in range(BIG // 8))
    app.invoke({"doc": doc, "n": 0}, _config("big", LONG + 10), durability="sync")


SPEED = {f"{MANY} threads x 3 nodes": _run_many, f"{LONG}-step thread": _run_long}
STORAGE = {
    "one thread": _run_counter,
    f"{MANY} threads": _run_many,
    "large unchanged state": _run_big,
    "growing message list": _run_long,
}


def _speed(kind: str, backend: _Backend, shape: str) -> dict[str, float]:
    opened = backend.goatherd() if kind == "goatherd" else backend.theirs()
    with opened as saver:
        before = backend.bytes()
        timer = _Timer(saver, TIMED)
        SPEED[shape](saver)
        out = {
            "steps_per_s": timer.puts / timer.seconds,
            "bytes_per_cp": (backend.bytes() - before) / timer.puts,
        }
        if shape.endswith("thread"):
            samples = []
            for _ in range(HISTORY_READS):
                start = time.perf_counter()
                history = list(saver.list(_config("long")))
                samples.append(time.perf_counter() - start)
                assert len(history) == timer.puts, (len(history), timer.puts)
            out["history_per_s"] = 1 / statistics.median(samples)
    return out


def _storage(kind: str, backend: _Backend, shape: str) -> float:
    opened = backend.goatherd() if kind == "goatherd" else backend.theirs()
    with opened as saver:
        before = backend.bytes()
        timer = _Timer(saver, ("put",))
        STORAGE[shape](saver)
        return (backend.bytes() - before) / timer.puts


def _verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def _against_theirs(folder: Path) -> None:
    backends = ["sqlite"] + (["postgres"] if _pg_url() else [])
    if len(backends) == 1:
        print(
            "  PostgreSQL: skipped (set GOATHERD_BENCH_DB_URL or GOATHERD_TEST_DB_URL)"
        )
    print(
        f"langgraph vs SqliteSaver / PostgresSaver: {MANY} threads x 3 nodes, "
        f"a {LONG}-step thread, {ROUNDS} interleaved rounds, durability=sync"
    )
    speed: dict[tuple[str, str], list[dict[str, dict[str, float]]]] = {}
    for r in range(ROUNDS):
        for backend in backends:
            for shape in SPEED:
                kinds = ("theirs", "goatherd") if r % 2 == 0 else ("goatherd", "theirs")
                result = {}
                for kind in kinds:
                    with _fresh(backend, folder) as fresh:
                        result[kind] = _speed(kind, fresh, shape)
                speed.setdefault((backend, shape), []).append(result)
    for (backend, shape), rounds in speed.items():
        theirs = "SqliteSaver" if backend == "sqlite" else "PostgresSaver"
        for kind in ("theirs", "goatherd"):
            rates = [r[kind]["steps_per_s"] for r in rounds]
            name = theirs if kind == "theirs" else "goatherd"
            print(
                f"  {backend} {shape}: {name} {statistics.median(rates):,.1f} steps/s"
            )
        ratio = statistics.median(
            r["goatherd"]["steps_per_s"] / r["theirs"]["steps_per_s"] for r in rounds
        )
        print(
            f"  {backend} {shape}: step goatherd/{theirs} = {ratio:.2f} "
            f"(target >= 1.0) {_verdict(ratio >= 1.0)}"
        )
        if "history_per_s" in rounds[0]["goatherd"]:
            history = statistics.median(
                r["goatherd"]["history_per_s"] / r["theirs"]["history_per_s"]
                for r in rounds
            )
            print(
                f"  {backend} {shape}: history list goatherd/{theirs} = "
                f"{history:.2f} (target >= 1.0) {_verdict(history >= 1.0)}"
            )
    for backend in backends:
        theirs = "SqliteSaver" if backend == "sqlite" else "PostgresSaver"
        for shape in STORAGE:
            sizes = {}
            for kind in ("theirs", "goatherd"):
                with _fresh(backend, folder) as fresh:
                    sizes[kind] = _storage(kind, fresh, shape)
            ratio = sizes["goatherd"] / sizes["theirs"]
            print(
                f"  {backend} storage, {shape}: {sizes['goatherd']:,.0f} bytes per "
                f"checkpoint, {theirs} {sizes['theirs']:,.0f} "
                f"(goatherd/theirs {ratio:.2f}, target <= 1.0) {_verdict(ratio <= 1.0)}"
            )


# ------------------------------------------------------------- issue 18


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
        timer = _Timer(saver, ("put", "put_writes"))
        app = _loop(saver, STEPS)
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


def _growth(folder: Path) -> None:
    print(f"langgraph: {STEPS} steps, one ~120-byte message per step, {ROUNDS} rounds")
    rounds: list[dict[str, dict[str, float]]] = []
    for r in range(ROUNDS):
        order = ("sqlite", "goatherd") if r % 2 == 0 else ("goatherd", "sqlite")
        rounds.append({k: _measure(k, folder / f"{k}-{r}.sqlite") for k in order})
    for kind in ("sqlite", "goatherd"):
        figures = {key: [r[kind][key] for r in rounds] for key in rounds[0][kind]}
        parts = [f"{k}={statistics.median(v):,.2f}" for k, v in figures.items()]
        print(f"  {kind:9s} " + " ".join(parts))
    for key in ("puts_per_s", "latest_get_per_s", "older_get_per_s"):
        ratio = statistics.median(r["goatherd"][key] / r["sqlite"][key] for r in rounds)
        print(
            f"  {key} goatherd/sqlite = {ratio:.2f} (target >= 0.5) "
            f"{_verdict(ratio >= 0.5)}"
        )
    for kind in ("sqlite", "goatherd"):
        growth = statistics.median(r[kind]["growth"] for r in rounds)
        print(f"  {kind} bytes growth exponent 500->1000 steps = {growth:.2f}")
    growth = statistics.median(r["goatherd"]["growth"] for r in rounds)
    print(f"  goatherd storage linear (exponent < 1.3) {_verdict(growth < 1.3)}")
    size = statistics.median(r["goatherd"][f"bytes@{STEPS}"] for r in rounds)
    base = statistics.median(r["sqlite"][f"bytes@{STEPS}"] for r in rounds)
    print(f"  bytes at {STEPS} steps: goatherd {size:,.0f}, sqlite {base:,.0f}")


def run() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _against_theirs(Path(tmp))
        if STEPS > 0:
            _growth(Path(tmp))
