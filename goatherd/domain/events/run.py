"""Events of the reversible run and of supervisor interventions.

``run.completed`` is a reversible run's execution record on the child's path
(authority evidence and outcome); ``supervisor.intervention`` is a rule's
intervention on the scope it concerns. Both carry explicit ``null`` for
absent values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from goatherd.domain.events.base import RuntimeEvent, register_event
from goatherd.domain.records import RecordMode

__all__ = ["RunCompleted", "SupervisorIntervened"]


@register_event
@dataclass(frozen=True, kw_only=True)
class RunCompleted(RuntimeEvent):
    """A reversible run ended (the child's path)."""

    SCHEMA = "goatherd.run.completed.v1"
    MODE = RecordMode.CAPTURE
    KIND_LABEL = "run:completed"

    parent_scope: str
    child_scope: str
    isolated: bool
    status: str
    authority: tuple[Mapping[str, Any], ...]
    proposal_record_id: str | None
    decision_record_id: str | None
    change_count: int
    changes: tuple[Mapping[str, str], ...]
    output_id: str | None
    output_action: str | None
    checkpoint_id: str | None
    reason: str | None


@register_event
@dataclass(frozen=True, kw_only=True)
class SupervisorIntervened(RuntimeEvent):
    """A supervisor rule intervened (the scope's path)."""

    SCHEMA = "goatherd.supervisor.intervention.v1"
    MODE = RecordMode.CAPTURE
    KIND_LABEL = "supervisor:intervention"

    type: str
    scope_id: str
    rule: str
    source: str
    intervention_payload: Any = field(metadata={"key": "payload"})
    trigger_record_id: str | None
    trigger_position: int | None
    trigger_schema_ref: str
