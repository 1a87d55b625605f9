"""Owner paths of LangGraph threads, namespaces and forks on the trace.

A thread ``T`` lives under ``langgraph:T``: its root namespace on
``langgraph:T:root``, a subgraph namespace ``N`` on ``langgraph:T:ns=N``, and a
fork (a checkpoint whose parent is not the tip of the parent's path) starts a
child path ``<namespace path>:fork=<first checkpoint id>``. Components are
percent-encoded so that a ``:`` in an id never splits a path, and a component
longer than :data:`MAX_COMPONENT` characters is replaced by its SHA-256, which
keeps every owner path this saver writes under :data:`MAX_OWNER_PATH`
characters.
"""

from __future__ import annotations

import hashlib
import string
from typing import Final

__all__ = [
    "MAX_COMPONENT",
    "MAX_OWNER_PATH",
    "PATH_PREFIX",
    "encode_component",
    "fork_path",
    "namespace_path",
    "thread_path",
]

PATH_PREFIX: Final = "langgraph"
MAX_COMPONENT: Final = 96
MAX_OWNER_PATH: Final = len(PATH_PREFIX) + len(":ns=:fork=:") + 3 * MAX_COMPONENT
_SAFE: Final = frozenset(string.ascii_letters + string.digits + "._-")


def encode_component(text: str) -> str:
    """Percent-encode ``text`` (UTF-8) to one path component of bounded length."""
    encoded = "".join(
        ch if ch in _SAFE else "".join(f"%{b:02X}" for b in ch.encode("utf-8"))
        for ch in text
    )
    if len(encoded) <= MAX_COMPONENT:
        return encoded
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return "sha256=" + digest


def thread_path(thread_id: str) -> str:
    """Return the owner path of a thread (its deletion and pruning records)."""
    return f"{PATH_PREFIX}:{encode_component(thread_id)}"


def namespace_path(thread_id: str, checkpoint_ns: str) -> str:
    """Return the main owner path of one checkpoint namespace of a thread."""
    component = (
        "root" if checkpoint_ns == "" else "ns=" + encode_component(checkpoint_ns)
    )
    return f"{thread_path(thread_id)}:{component}"


def fork_path(thread_id: str, checkpoint_ns: str, checkpoint_id: str) -> str:
    """Return the owner path of a fork that starts with ``checkpoint_id``."""
    base = namespace_path(thread_id, checkpoint_ns)
    return f"{base}:fork={encode_component(checkpoint_id)}"
