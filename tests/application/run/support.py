"""Shared helpers for the reversible-run tests: trace reading and memory sandboxes."""

from __future__ import annotations

from collections.abc import Mapping

from returns.result import Failure, Success

from goatherd.application import SandboxSpec, ScopeManager
from goatherd.domain import (
    Intervention,
    InterventionType,
    SupervisedEvent,
    SupervisionRule,
)
from goatherd.infrastructure.bootstrap import scope_manager_for
from goatherd.infrastructure.sandbox.memory import (
    MemoryRepository,
    MemorySandbox,
    MemorySandboxConfig,
)

RUN_SCHEMA = "goatherd.run.completed.v1"
DECISION_SCHEMA = "goatherd.supervisor.decision.v1"
PROPOSED_SCHEMA = "goatherd.merge.proposed.v1"
SETTLED_SCHEMA = "goatherd.run_output.settled.v1"
MERGED_SCHEMA = "goatherd.scope.merged.v1"
DISCARDED_SCHEMA = "goatherd.scope.discarded.v1"


def manager(store) -> ScopeManager:
    return scope_manager_for(store)


def live_sandbox(files: Mapping[str, bytes] | None = None) -> MemorySandbox:
    sb = MemorySandbox(MemorySandboxConfig(files=files or {"a.txt": b"1\n"}))
    sb.create(SandboxSpec())
    return sb


def fresh_sibling(repository: MemoryRepository) -> MemorySandbox:
    """A sandbox on the same repository, NOT created (the run creates it)."""
    return MemorySandbox(MemorySandboxConfig(repository=repository))


def is_live(sb: MemorySandbox) -> bool:
    try:
        sb.list_files()
    except Exception:
        return False
    return True


def workspace(sb: MemorySandbox) -> dict[str, bytes]:
    return {path: sb.read_file(path) for path in sb.list_files()}


def failure_of(result):
    assert isinstance(result, Failure), result
    return result.failure()


def value_of(result):
    assert isinstance(result, Success), result
    return result.unwrap()


def trace_size(store) -> tuple[int, int]:
    return store.fact_count(), store.max_position()


def schemas_on(store, owner: str) -> list[str]:
    return [entry.record.envelope.schema_ref for entry in store.read_path(owner)]


def payloads(store, schema_ref: str) -> list[dict[str, object]]:
    """Every record with ``schema_ref`` once, in log order (a record may sit on
    several paths: an aggregate batch places it on each owner it concerns)."""
    seen: set[str] = set()
    found: list[dict[str, object]] = []
    for entry in store.read_log(schema_refs=[schema_ref], limit=10_000):
        if entry.record.record_id not in seen:
            seen.add(entry.record.record_id)
            found.append(dict(entry.record.payload))
    return found


def run_records(store) -> list[dict[str, object]]:
    return payloads(store, RUN_SCHEMA)


def deny_paths_under(prefix: str) -> SupervisionRule:
    """A supervisor rule that denies merge proposals touching ``prefix``."""

    def match(event: SupervisedEvent) -> bool:
        return event.kind_label == "merge:proposed"

    def action(event: SupervisedEvent) -> Intervention | None:
        paths = event.payload.get("paths")
        assert isinstance(paths, list)
        if any(str(p).startswith(prefix) for p in paths):
            return Intervention(InterventionType.DENY, "", f"{prefix} is off limits")
        return None

    return SupervisionRule("no-" + prefix.rstrip("/"), match, action)
