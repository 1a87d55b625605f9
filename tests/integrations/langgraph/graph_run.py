"""A deterministic LangGraph ``StateGraph`` run one phase per process.

``python -m tests.integrations.langgraph.graph_run SAVER LOCATION PHASE``
opens the checkpointer (``goatherd``: a trace path or URL; ``sqlite``:
LangGraph's own SQLite saver on a file), runs one phase on thread ``t`` and
prints what the graph showed as JSON:

- ``start``: a first input, which stops at the review interrupt;
- ``resume``: resume with ``approved`` and run to the end;
- ``fork``: go back to the checkpoint after the first draft, change ``count``
  with ``update_state``, run to the interrupt again, resume with ``rejected``.
"""

from __future__ import annotations

import gc
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt

CONFIG: RunnableConfig = {"configurable": {"thread_id": "t"}}


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    count: int
    decision: str


def draft(state: State) -> dict[str, Any]:
    count = state["count"] + 1
    reply = AIMessage(content=f"draft {count}", id=f"draft-{count}")
    return {"messages": [reply], "count": count}


def review(state: State) -> dict[str, Any]:
    answer = interrupt({"question": "approve?", "count": state["count"]})
    note = HumanMessage(content=f"review: {answer}", id=f"review-{state['count']}")
    return {"decision": answer, "messages": [note]}


def finish(state: State) -> dict[str, Any]:
    text = f"done ({state['decision']}, {state['count']})"
    return {"messages": [AIMessage(content=text, id=f"done-{state['count']}")]}


def build(saver: BaseCheckpointSaver[Any]) -> Any:
    graph = StateGraph(State)
    graph.add_node("draft", draft)
    graph.add_node("review", review)
    graph.add_node("finish", finish)
    graph.add_edge(START, "draft")
    graph.add_conditional_edges(
        "draft", lambda s: "draft" if s["count"] % 3 else "review"
    )
    graph.add_edge("review", "finish")
    graph.add_edge("finish", END)
    return graph.compile(checkpointer=saver)


def plain(value: Any) -> Any:
    """Turn state values into JSON-comparable data."""
    if isinstance(value, BaseMessage):
        return [value.type, value.content, value.id]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in sorted(value.items())}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def history(app: Any) -> list[Any]:
    return [
        {
            "step": s.metadata.get("step"),
            "source": s.metadata.get("source"),
            "next": list(s.next),
            "values": plain(s.values),
            "interrupts": [plain(i.value) for t in s.tasks for i in t.interrupts],
        }
        for s in app.get_state_history(CONFIG)
    ]


def run_phase(app: Any, phase: str) -> dict[str, Any]:
    if phase == "start":
        start = {"messages": [HumanMessage(content="hi", id="h0")], "count": 0}
        out = app.invoke({**start, "decision": ""}, CONFIG)
    elif phase == "resume":
        out = app.invoke(Command(resume="approved"), CONFIG)
    else:
        earlier = next(
            s
            for s in app.get_state_history(CONFIG)
            if s.next == ("draft",) and s.values.get("count") == 1
        )
        forked = app.update_state(earlier.config, {"count": 4})
        app.invoke(None, forked)
        out = app.invoke(Command(resume="rejected"), CONFIG)
    state = app.get_state(CONFIG)
    return {
        "output": plain({k: v for k, v in out.items() if k != "__interrupt__"}),
        "next": list(state.next),
        "history": history(app),
    }


@contextmanager
def open_saver(kind: str, location: str) -> Iterator[BaseCheckpointSaver[Any]]:
    if kind == "goatherd":
        from goatherd.integrations.langgraph import GoatherdSaver

        with GoatherdSaver.from_url(location) as saver:
            yield saver
    else:
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(location) as sqlite_saver:
            yield sqlite_saver


def main(argv: list[str]) -> None:
    kind, location, phase = argv
    with open_saver(kind, location) as saver:
        result = run_phase(build(saver), phase)
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1:])
    gc.freeze()  # the process ends next: no collector walk over the imports
