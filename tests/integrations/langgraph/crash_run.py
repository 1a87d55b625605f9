"""A long-running graph: ``python -m ... crash_run URL MODE [THREAD]``.

``run`` streams a fresh run of ``STEPS`` steps (each adds one message), printing
each step number as its checkpoint is written; ``resume`` continues the thread
from its latest checkpoint and prints the final state as JSON; ``full`` runs a
fresh thread to its end and prints the final state. THREAD defaults to
``crash``.
"""

from __future__ import annotations

import gc
import json
import sys
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages

from goatherd.integrations.langgraph import GoatherdSaver

STEPS = 120
CONFIG: RunnableConfig = {
    "configurable": {"thread_id": "crash"},
    "recursion_limit": STEPS + 10,
}


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    n: int


def step(state: State) -> dict[str, Any]:
    n = state["n"] + 1
    return {"messages": [AIMessage(content=f"step {n} " * 20, id=f"m{n}")], "n": n}


def build(saver: BaseCheckpointSaver[Any]) -> Any:
    graph = StateGraph(State)
    graph.add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_conditional_edges(
        "step", lambda s: "step" if s["n"] < STEPS else "__end__"
    )
    return graph.compile(checkpointer=saver)


def final(values: dict[str, Any]) -> str:
    return json.dumps(
        {"n": values["n"], "messages": [[m.id, m.content] for m in values["messages"]]}
    )


def main(url: str, mode: str, thread: str = "crash") -> None:
    config: RunnableConfig = {**CONFIG, "configurable": {"thread_id": thread}}
    start = {"messages": [], "n": 0}
    with GoatherdSaver.from_url(url) as saver:
        app = build(saver)
        if mode == "run":
            for number, _ in enumerate(app.stream(start, config, durability="sync")):
                print(number, flush=True)
            return
        app.invoke(None if mode == "resume" else start, config, durability="sync")
        print(final(app.get_state(config).values))


if __name__ == "__main__":
    main(*sys.argv[1:])
    gc.freeze()  # the process ends next: no collector walk over the imports
