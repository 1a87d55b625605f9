"""The fields a LangGraph config gives the saver, read and checked.

``CheckpointConfigError`` and the helpers that take ``thread_id``,
``checkpoint_ns`` and ``checkpoint_id`` out of ``config['configurable']`` for
the saver's read and write paths. Imports LangGraph's config type and the
domain's errors only.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig

from goatherd.domain.errors import GoatherdError

__all__ = [
    "CheckpointConfigError",
    "_configurable",
    "_id_field",
    "_namespace",
]


class CheckpointConfigError(GoatherdError, ValueError):
    """A LangGraph config lacks a field the saver needs, or has the wrong type."""


def _configurable(config: RunnableConfig | None, method: str) -> Mapping[str, Any]:
    configurable = (config or {}).get("configurable")
    if not isinstance(configurable, Mapping):
        raise CheckpointConfigError(f"{method} needs config['configurable']")
    return configurable


def _id_field(configurable: Mapping[str, Any], key: str, method: str) -> str:
    value = configurable.get(key)
    if value is None:
        raise CheckpointConfigError(f"{method} needs config['configurable'][{key!r}]")
    if isinstance(value, bool) or not isinstance(value, str | int | uuid.UUID):
        raise CheckpointConfigError(
            f"config['configurable'][{key!r}] must be a string, "
            f"got {type(value).__name__}"
        )
    return str(value)


def _namespace(configurable: Mapping[str, Any]) -> str:
    value = configurable.get("checkpoint_ns", "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise CheckpointConfigError(
            "config['configurable']['checkpoint_ns'] must be a string, "
            f"got {type(value).__name__}"
        )
    return value
