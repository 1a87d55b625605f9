"""The demo's supervisor: the destructive-tool guard plus one merge rule.

:func:`blocked_scope_may_not_merge` denies the merge proposal of a scope that
ever had a tool call blocked by the gate. It reads that fact from the trace
(the supervisor records every gate decision on the scope's path, ADR 0018),
not from process memory, so the rule holds after a crash and a restart too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from goatherd.application import (
    MERGE_PROPOSED_KIND_LABEL,
    MERGE_PROPOSED_SCHEMA_REF,
    ScopeManager,
    Supervisor,
)
from goatherd.domain import (
    DECLARATION,
    Intervention,
    InterventionType,
    SupervisedEvent,
    SupervisionRule,
    SupervisorIntervened,
    decode_fact,
    destructive_tool_guard,
    scope_id_for_owner,
)
from goatherd.infrastructure import SqlAlchemyTraceStore

__all__ = [
    "BLOCKED_MERGE_RULE",
    "blocked_calls",
    "blocked_scope_may_not_merge",
    "demo_supervisor",
]

BLOCKED_MERGE_RULE: Final = "blocked_scope_may_not_merge"


def blocked_calls(store: SqlAlchemyTraceStore, owner: str) -> list[str]:
    """Return the reasons of the tool calls the gate denied on ``owner``'s path.

    Merge reviews also go through the gate; their denials are not tool calls
    and are left out.
    """
    reasons: list[str] = []
    for entry in store.read_path(owner):
        event = decode_fact(entry.record).event
        if (
            isinstance(event, SupervisorIntervened)
            and event.source == "gate"
            and event.type == "deny"
            and event.trigger_schema_ref != MERGE_PROPOSED_SCHEMA_REF
        ):
            reasons.append(str(event.intervention_payload or ""))
    return reasons


def blocked_scope_may_not_merge(
    blocked: Callable[[str], list[str]],
) -> SupervisionRule:
    """Deny the merge of a scope whose tool calls the gate ever blocked.

    Args:
        blocked: returns the recorded denials of a trace owner.
    """

    def match(event: SupervisedEvent) -> bool:
        return (
            event.mode == DECLARATION
            and event.schema_ref == MERGE_PROPOSED_SCHEMA_REF
            and event.kind_label == MERGE_PROPOSED_KIND_LABEL
        )

    def action(event: SupervisedEvent) -> Intervention | None:
        reasons = blocked(event.trace_owner_id)
        if not reasons:
            return None
        return Intervention(
            InterventionType.DENY,
            scope_id_for_owner(event.trace_owner_id),
            "this scope attempted a blocked command, so it may not merge",
        )

    return SupervisionRule(BLOCKED_MERGE_RULE, match, action)


def demo_supervisor(manager: ScopeManager, store: SqlAlchemyTraceStore) -> Supervisor:
    """Return the demo's supervisor: the guard first, then the merge rule.

    It records every decision in ``store``; its bus loop is never started
    (the demo only uses the synchronous gate and the merge review).
    """
    supervisor = Supervisor(manager, None, recorder=store)
    supervisor.add_rule(destructive_tool_guard())
    supervisor.add_rule(blocked_scope_may_not_merge(lambda o: blocked_calls(store, o)))
    return supervisor
