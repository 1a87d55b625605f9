"""Recovery: rebuild a :class:`ScopeManager` from the trace after a restart.

The trace is the registry (runtime-spec 9): fork records give the tree,
merged/discarded/halt records the terminal states, the blob table the
checkpoints (minus restored ones), sealed/settled records the outputs.
Sandboxes come back ONLY through the host's resolver: roots first, then
isolated children in tree order (parents first); shared children inherit.
A resolver error fails the whole recovery. Checkpoints whose recorded revision
the re-adopted workspace has left are invalid, never restorable.
"""

from __future__ import annotations

import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from returns.result import Result

from goatherd.application.ports import Sandbox
from goatherd.application.runtime import RuntimeEventStore, RuntimeFailure
from goatherd.application.scope_handle import (
    CheckpointEntry as _CheckpointEntry,
)
from goatherd.application.scope_handle import (
    ScopeEntry as _ScopeEntry,
)
from goatherd.application.scope_handle import (
    attempt,
)
from goatherd.application.settle import ScopeManager
from goatherd.domain import (
    SCHEMA_CHECKPOINT_CREATED,
    SCHEMA_RUN_OUTPUT_SEALED,
    SCHEMA_SCOPE_DISCARDED,
    SCHEMA_SCOPE_FORKED,
    SCHEMA_SCOPE_MERGED,
    SCHEMA_SUPERVISOR_HALT,
    RuntimeRuleError,
    owner_of_scope,
)

__all__ = ["RecoverOptions", "RecoveryError", "RecoveryStats", "recover_scopes"]

Resolver = Callable[[str, str, str], Sandbox | None]


class RecoveryError(RuntimeRuleError):
    """Raised when the trace cannot be recovered (inconsistent or refused)."""


@dataclass(slots=True)
class RecoveryStats:
    """Raw records read by each scan and the scan phase's wall time."""

    fork_records: int = 0
    terminal_records: int = 0
    checkpoint_blobs: int = 0
    sealed_outputs: int = 0
    scan_duration: float = 0.0


@dataclass(frozen=True, slots=True)
class RecoverOptions:
    """How to recover: the sandbox resolver and where to report stats."""

    resolver: Resolver | None = None
    stats: RecoveryStats | None = None


def recover_scopes(
    events: RuntimeEventStore, options: RecoverOptions | None = None
) -> Result[ScopeManager, RuntimeFailure]:
    """Rebuild the scope tree, checkpoints and outputs from the trace."""
    opts = options or RecoverOptions()
    return attempt(lambda: _recover(events, opts))


def _recover(events: RuntimeEventStore, opts: RecoverOptions) -> ScopeManager:
    stats = opts.stats if opts.stats is not None else RecoveryStats()
    started = time.perf_counter()
    manager = ScopeManager(events)
    trace = events.trace
    forks = _scan_forks(events, stats)
    owners: dict[str, None] = {}
    for fork in forks:
        owners.setdefault(fork.parent)
        owners.setdefault(fork.child)
    _check_terminals(events, stats)
    for owner in owners:
        manager._register_recovered_scope(owner, _ScopeEntry())
    _recover_checkpoints(manager, events, stats)
    sealed = trace.scan_records_by_schema(SCHEMA_RUN_OUTPUT_SEALED)
    stats.sealed_outputs = len({e.record.record_id for e in sealed})
    for entry in sealed:
        payload = entry.record.payload
        out_id = str(payload.get("output_id", ""))
        if not out_id or entry.record.trace_owner_id == out_id:
            continue
        owner = owner_of_scope(str(payload.get("scope", "")))
        if owner not in manager._scopes:
            manager._register_recovered_scope(owner, _ScopeEntry())
        manager._register_recovered_output(out_id, _seq_of(out_id))
    stats.scan_duration = time.perf_counter() - started
    if opts.resolver is not None:
        _readopt(manager, opts.resolver, forks)
        _mark_stale(manager)
    return manager


@dataclass(frozen=True, slots=True)
class _Fork:
    """One fork record as recovery needs it (the tree needs no aggregate fold)."""

    parent: str
    child: str
    isolated: bool
    backend: str
    path: str


def _scan_forks(events: RuntimeEventStore, stats: RecoveryStats) -> list[_Fork]:
    entries = events.trace.scan_records_by_schema(SCHEMA_SCOPE_FORKED)
    edges: list[_Fork] = []
    seen: set[str] = set()
    for entry in entries:
        record = entry.record
        child = record.payload.get("child_owner")
        if not child:
            raise RecoveryError(
                f"fork record {record.record_id} on {record.trace_owner_id}"
                " has no child_owner"
            )
        if record.trace_owner_id == child or record.record_id in seen:
            continue
        seen.add(record.record_id)
        payload = record.payload
        edges.append(
            _Fork(
                record.trace_owner_id,
                str(child),
                bool(payload.get("isolated")),
                str(payload.get("sandbox_backend") or ""),
                str(payload.get("sandbox_path") or ""),
            )
        )
        _check_path(payload.get("sandbox_path"), record.record_id)
    stats.fork_records = len(seen)
    return edges


def _check_path(path: object, record_id: str) -> None:
    if path and not os.path.isabs(str(path)):
        raise RecoveryError(
            f"fork record {record_id} recorded a non-absolute sandbox path {path!r}"
        )


def _check_terminals(events: RuntimeEventStore, stats: RecoveryStats) -> None:
    entries = events.trace.scan_records_by_schema(
        SCHEMA_SCOPE_MERGED, SCHEMA_SCOPE_DISCARDED, SCHEMA_SUPERVISOR_HALT
    )
    states: dict[str, str] = {}
    counted: set[tuple[str, str]] = set()
    for entry in entries:
        record = entry.record
        schema = record.envelope.schema_ref
        if schema == SCHEMA_SUPERVISOR_HALT:
            owner, state = record.trace_owner_id, "discarded"
        else:
            owner = str(record.payload.get("child_owner", ""))
            state = "merged" if schema == SCHEMA_SCOPE_MERGED else "discarded"
            if record.trace_owner_id == owner:
                continue
        counted.add((record.record_id, record.trace_owner_id))
        if owner and states.setdefault(owner, state) != state:
            raise RecoveryError(
                f"owner {owner} is recorded both {states[owner]} and {state}:"
                " the trace is inconsistent"
            )
    stats.terminal_records = len(counted)


def _recover_checkpoints(
    manager: ScopeManager, events: RuntimeEventStore, stats: RecoveryStats
) -> None:
    blobs, corrupt = events.trace.load_checkpoint_blobs()
    stats.checkpoint_blobs = len(blobs) + len(corrupt)
    recorded = {
        str(e.record.payload.get("checkpoint_id"))
        for e in events.trace.scan_records_by_schema(SCHEMA_CHECKPOINT_CREATED)
    }
    for blob in blobs:
        if blob.checkpoint_id not in recorded:
            continue  # a crash between the blob and its record: never handed out
        if blob.checkpoint_id in manager._checkpoints:
            raise RecoveryError(f"duplicate checkpoint id {blob.checkpoint_id}")
        owner = owner_of_scope(blob.scope_id)
        if owner not in manager._scopes:
            manager._register_recovered_scope(owner, _ScopeEntry())
        created = datetime.fromtimestamp(blob.created_at_ns / 1e9, UTC)
        entry = _CheckpointEntry(blob.seq, blob.state, blob.snapshot, created)
        manager._register_recovered_checkpoint(blob.checkpoint_id, entry)


def _readopt(manager: ScopeManager, resolver: Resolver, forks: list[_Fork]) -> None:
    by_child = {fork.child: fork for fork in forks}
    owners = list(manager._scopes)
    for owner in owners:
        if owner not in by_child:
            manager._scopes[owner].sandbox = _resolve(resolver, owner, "", "")
    for owner in _tree_order(owners, forks):
        fork = by_child.get(owner)
        if fork is None:
            continue
        entry = manager._scopes[owner]
        if fork.isolated:
            entry.sandbox = _resolve(resolver, owner, fork.backend, fork.path)
            entry.owns_sandbox = entry.sandbox is not None
        else:
            parent = manager._scopes.get(fork.parent)
            entry.sandbox = parent.sandbox if parent else None


def _resolve(resolver: Resolver, owner: str, backend: str, path: str) -> Sandbox | None:
    scope_id = "scope:" + owner
    try:
        return resolver(scope_id, backend, path)
    except Exception as error:
        raise RecoveryError(
            f"recover scope {scope_id}: re-adopt sandbox: {error}"
        ) from error


def _tree_order(owners: list[str], forks: list[_Fork]) -> list[str]:
    """Parents before children: roots first, then breadth-first in fork order."""
    known = set(owners)
    children: dict[str, list[str]] = {}
    has_parent: set[str] = set()
    for fork in forks:
        if fork.child in known:
            children.setdefault(fork.parent, []).append(fork.child)
            if fork.parent in known:
                has_parent.add(fork.child)
    queue = deque(o for o in owners if o not in has_parent)
    order: list[str] = []
    while queue:
        owner = queue.popleft()
        order.append(owner)
        queue.extend(children.get(owner, ()))
    return order


def _mark_stale(manager: ScopeManager) -> None:
    for cp_id, entry in manager._checkpoints.items():
        owner = manager._checkpoint_agg(cp_id).scope_owner
        scope = manager._scopes.get(owner)
        if scope is None or scope.sandbox is None or entry.invalid:
            continue
        try:
            live = scope.sandbox.capture()
        except Exception:  # noqa: S112 - unknown staleness leaves it valid
            continue
        if live.revision != entry.workspace.revision:
            entry.invalid = True


def _seq_of(identifier: str) -> int:
    try:
        return int(identifier.rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return 0
