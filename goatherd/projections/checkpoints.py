"""Checkpoint and retained-output read models (runtime-spec 4 and 8).

Checkpoints: ``goatherd.checkpoint.created.v2`` makes a ``valid`` row on the
scope's own path; ``restored.v2`` marks it ``used`` (single use). Outputs:
``goatherd.run_output.sealed.v1`` makes an ``unconsumed`` row;
``settled.v1`` moves it to the action's terminal state once (consume-once: a
later settlement of a settled output is kept as ``inconsistent``).

Both records sit on two paths (the scope's and the checkpoint's or the
output's own), so the log carries each twice: a row's ``owner`` is the scope's
path (the copy not on the checkpoint's or output's path), and a second copy of
the record that moved a row changes nothing.

Pure: handlers write through :class:`~goatherd.projections.RowView` views.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

from goatherd.domain.log import LogEntry
from goatherd.projections.framework import Projection, RowView, on

__all__ = [
    "CheckpointRow",
    "CheckpointsProjection",
    "OutputRow",
    "RetainedOutputsProjection",
    "SCHEMA_CHECKPOINT_CREATED",
    "SCHEMA_CHECKPOINT_RESTORED",
    "SCHEMA_RUN_OUTPUT_SEALED",
    "SCHEMA_RUN_OUTPUT_SETTLED",
    "SETTLED_STATES",
]

SCHEMA_CHECKPOINT_CREATED: Final = "goatherd.checkpoint.created.v2"
SCHEMA_CHECKPOINT_RESTORED: Final = "goatherd.checkpoint.restored.v2"
SCHEMA_RUN_OUTPUT_SEALED: Final = "goatherd.run_output.sealed.v1"
SCHEMA_RUN_OUTPUT_SETTLED: Final = "goatherd.run_output.settled.v1"
SETTLED_STATES: Final = ("selected", "applied", "released", "discarded")


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


@dataclass(frozen=True, slots=True)
class CheckpointRow:
    """One checkpoint as the trace records it (``valid`` until restored)."""

    checkpoint_id: str
    owner: str
    backend: str = ""
    revision: str = ""
    state_digest: str = ""
    has_snapshot: bool = False
    state: str = "valid"
    created_fact_id: str = ""
    restored_fact_id: str | None = None

    @property
    def scope_id(self) -> str:
        """The checkpointed scope's id, ``scope:<owner>``."""
        return f"scope:{self.owner}"


@dataclass(frozen=True, slots=True)
class OutputRow:
    """One sealed output and its settlement state."""

    output_id: str
    owner: str
    scope_id: str = ""
    backend: str = ""
    revision: str = ""
    state_digest: str = ""
    baseline_digest: str = ""
    changed_paths: tuple[str, ...] = ()
    state: str = "unconsumed"
    sealed_fact_id: str = ""
    settled_fact_id: str | None = None
    inconsistent: str = ""


class CheckpointsProjection(Projection[RowView[CheckpointRow]]):
    """Fold checkpoint records into :class:`CheckpointRow` rows keyed by id."""

    name = "goatherd.checkpoints"
    version = 2  # 2: the owner is the scope's path, not the checkpoint's

    @on(SCHEMA_CHECKPOINT_CREATED)
    def created(self, view: RowView[CheckpointRow], entry: LogEntry) -> None:
        """Record a new valid checkpoint."""
        payload = entry.record.payload
        checkpoint_id = _text(payload.get("checkpoint_id"))
        if not checkpoint_id or entry.record.trace_owner_id == checkpoint_id:
            return  # the copy on the checkpoint's own path
        row = CheckpointRow(
            checkpoint_id=checkpoint_id,
            owner=entry.record.trace_owner_id,
            backend=_text(payload.get("backend")),
            revision=_text(payload.get("revision")),
            state_digest=_text(payload.get("state_digest")),
            has_snapshot=payload.get("has_snapshot") is True,
            created_fact_id=entry.record.record_id,
        )
        view.put(checkpoint_id, row)

    @on(SCHEMA_CHECKPOINT_RESTORED)
    def restored(self, view: RowView[CheckpointRow], entry: LogEntry) -> None:
        """Mark a checkpoint used (restoring consumes it)."""
        checkpoint_id = _text(entry.record.payload.get("checkpoint_id"))
        row = view.get(checkpoint_id)
        if row is None or row.state == "used":
            return
        view.put(
            checkpoint_id,
            replace(row, state="used", restored_fact_id=entry.record.record_id),
        )


def _changed_paths(value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(
        change["path"]
        for change in value
        if isinstance(change, dict) and isinstance(change.get("path"), str)
    )


class RetainedOutputsProjection(Projection[RowView[OutputRow]]):
    """Fold sealed/settled records into :class:`OutputRow` rows keyed by output id."""

    name = "goatherd.retained_outputs"
    version = 2  # 2: each record read once, whatever its copies

    @on(SCHEMA_RUN_OUTPUT_SEALED)
    def sealed(self, view: RowView[OutputRow], entry: LogEntry) -> None:
        """Record a new unconsumed output."""
        payload = entry.record.payload
        output_id = _text(payload.get("output_id"))
        if not output_id or entry.record.trace_owner_id == output_id:
            return  # the copy on the output's own path
        row = OutputRow(
            output_id=output_id,
            owner=entry.record.trace_owner_id,
            scope_id=_text(payload.get("scope")),
            backend=_text(payload.get("backend")),
            revision=_text(payload.get("revision")),
            state_digest=_text(payload.get("state_digest")),
            baseline_digest=_text(payload.get("baseline_digest")),
            changed_paths=_changed_paths(payload.get("changes")),
            sealed_fact_id=entry.record.record_id,
        )
        view.put(output_id, row)

    @on(SCHEMA_RUN_OUTPUT_SETTLED)
    def settled(self, view: RowView[OutputRow], entry: LogEntry) -> None:
        """Move an unconsumed output to its settlement's state, once."""
        payload = entry.record.payload
        output_id = _text(payload.get("output_id"))
        action = _text(payload.get("action"))
        row = view.get(output_id)
        if row is None or action not in SETTLED_STATES:
            return
        if row.settled_fact_id == entry.record.record_id:
            return  # another copy of the settling record
        if row.state == "unconsumed":
            row = replace(row, state=action, settled_fact_id=entry.record.record_id)
        elif not row.inconsistent:
            row = replace(
                row, inconsistent=f"output {output_id} settled again as {action}"
            )
        view.put(output_id, row)
