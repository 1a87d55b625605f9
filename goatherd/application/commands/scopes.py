"""Scope commands: create a root, fork, merge, discard, halt, inject, facts, prune.

Each handler checks its rules on the caught-up model and records its
decision as one append guarded by the heads of the paths it read
(:mod:`goatherd.application.decisions`). A command given a ``seq`` is a
retry: its intent is looked up first and a committed one is not decided
again. Owned sandboxes are destroyed after the record that ends their scope,
and the destruction is recorded too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from goatherd.application.commands.claims import check_no_claim_needs
from goatherd.application.commands.context import RuntimeContext
from goatherd.application.decisions import Decision
from goatherd.application.ports import Addressed, Sandbox
from goatherd.application.runtime import fork_intent, lifecycle_intent
from goatherd.domain import (
    AppendReceipt,
    OpaqueRecord,
    RecordInputError,
    RecordMode,
    ReservedSchemaError,
    RootScopeError,
    RunCompleted,
    SandboxDestroyed,
    ScopeAggregate,
    ScopeDiscarded,
    UnknownFactError,
    decode_payload,
    is_runtime_schema,
    validate_schema_ref,
)

__all__ = [
    "RUNTIME_NAMESPACE",
    "append_fact",
    "check_fact_parents",
    "check_fact_schema",
    "create_root",
    "destroy_owned_sandbox",
    "first_record_id",
    "fork",
    "halt",
    "inject",
    "merge_or_discard",
    "parent_of",
    "prune_terminal",
    "record_run_completed",
]

RUNTIME_NAMESPACE = "goatherd."
"""Schema refs under this prefix are the runtime's; ``append_fact`` refuses them."""


def _address(sandbox: Sandbox | None) -> tuple[str, str]:
    if sandbox is None:
        return "", ""
    path = sandbox.address() if isinstance(sandbox, Addressed) else ""
    return sandbox.backend(), path


def create_root(ctx: RuntimeContext, owner: str, sandbox: Sandbox | None) -> str:
    """Record ``owner`` as a root scope; bind ``sandbox`` (not owned) here.

    Raises:
        ScopeExistsError: the owner is a scope already (in any process).
    """
    backend, path = _address(sandbox)
    with ctx.lock:
        intent = lifecycle_intent("create", owner, "", ctx.next_seq(None))

        def decide() -> Decision:
            event = ctx.model.scope(owner).create(
                sandbox_backend=backend, sandbox_path=path
            )
            return Decision().place(event, owner)

        ctx.record(intent, decide)
        ctx.sandboxes.bind(owner, sandbox, owns=False)
    return owner


def fork(
    ctx: RuntimeContext,
    parent_id: str,
    child_owner: str,
    isolated: Sandbox | None,
    seq: int | None,
) -> str:
    """Fork ``child_owner`` from ``parent_id``; an ``isolated`` sandbox is owned.

    The parent's baseline is captured before the decision (a capture can be
    slow); the decision re-checks the parent on the caught-up model.

    Raises:
        ScopeNotFoundError, ScopeStateError, ScopeExistsError; the sandbox's
        errors (a failed baseline capture fails the fork).
    """
    parent = ctx.known(parent_id)
    intent = fork_intent(parent.owner, child_owner, ctx.next_seq(seq))
    if ctx.committed(intent, seq):
        _bind_isolated(ctx, child_owner, isolated)
        return child_owner
    binding = ctx.binding(parent.owner)
    baseline = binding.sandbox.capture() if binding is not None else None
    backend, path = _address(isolated)
    with ctx.lock:

        def decide() -> Decision:
            here = ctx.model.scope(parent.owner)
            child = ctx.model.scope(child_owner)
            event = here.fork(
                child,
                child_head=ctx.model.path_head(child_owner),
                baseline=baseline,
                isolated=isolated is not None,
                sandbox_backend=backend,
                sandbox_path=path,
                workspace=ctx.model.scope(ctx.model.workspace_owner(parent.owner)),
            )
            guard = ctx.model.workspace_owner(parent.owner)
            return Decision().place(event, parent.owner, child_owner).guard(guard)

        ctx.record(intent, decide)
        _bind_isolated(ctx, child_owner, isolated)
    return child_owner


def _bind_isolated(ctx: RuntimeContext, owner: str, sandbox: Sandbox | None) -> None:
    if sandbox is not None:
        ctx.sandboxes.bind(owner, sandbox, owns=True)


def parent_of(scope: ScopeAggregate) -> str:
    """Return the scope's parent owner.

    Raises:
        RootScopeError: the scope is a root.
    """
    if scope.parent_owner is None:
        raise RootScopeError(scope.scope_id)
    return scope.parent_owner


def merge_or_discard(
    ctx: RuntimeContext, parent_owner: str, child_owner: str, verb: str, seq: int | None
) -> None:
    """Merge or discard ``child_owner`` from ``parent_owner`` (``verb``).

    A discard of a child the trace already records discarded by this parent
    (a discard or a settle ``discarded``: the same record) is that operation
    again, under any ``seq`` and from any process: it records nothing and
    finishes the teardown a crash after the record cut short.

    Raises:
        ScopeNotFoundError, ScopeStateError, NotAChildError,
        InconsistentTraceError; the sandbox's errors (after the record).
    """
    ctx.known("scope:" + parent_owner)
    ctx.known("scope:" + child_owner)
    with ctx.lock:
        intent = lifecycle_intent(verb, parent_owner, child_owner, ctx.next_seq(seq))
        if not ctx.committed(intent, seq):

            def decide() -> Decision | None:
                parent = ctx.model.scope(parent_owner)
                child = ctx.model.scope(child_owner)
                if verb == "discard" and _discarded_by(child, parent_owner):
                    return None  # recorded already: only the teardown is left
                event = (
                    parent.merge(child) if verb == "merge" else parent.discard(child)
                )
                spaces = check_no_claim_needs(ctx.model, child, f"cannot {verb} scope")
                decision = Decision().place(event, parent_owner, child_owner)
                return decision.guard(*spaces)

            ctx.record(intent, decide)
    destroy_owned_sandbox(ctx, child_owner)


def _discarded_by(child: ScopeAggregate, parent_owner: str) -> bool:
    """Whether ``child`` ended by ``parent_owner``'s discard of it.

    The discard record names the child and cites its fork, so its id is the
    same for every decision to discard this child: the one that ended it is
    recognised by value.
    """
    if child.is_active or child.parent_owner != parent_owner:
        return False
    child.require_consistent()
    cause = (child.fork_point,) if child.fork_point else ()
    event = ScopeDiscarded(
        caused_by=cause, child_owner=child.owner, child_scope=child.scope_id
    )
    return child.terminal_record == event.record_id()


def halt(ctx: RuntimeContext, scope_id: str, seq: int | None) -> None:
    """Halt the scope (it ends ``discarded``); destroy an owned sandbox.

    Raises:
        ScopeNotFoundError; ScopeStateError for a merged scope.
    """
    owner = ctx.known(scope_id).owner
    with ctx.lock:
        intent = lifecycle_intent("halt", owner, "", ctx.next_seq(seq))
        if not ctx.committed(intent, seq):

            def decide() -> Decision | None:
                scope = ctx.model.scope(owner)
                event = scope.halt()
                if event is None:
                    return None
                spaces = check_no_claim_needs(ctx.model, scope, "cannot halt scope")
                return Decision().place(event, owner).guard(*spaces)

            ctx.record(intent, decide)
    destroy_owned_sandbox(ctx, owner)


def inject(ctx: RuntimeContext, scope_id: str, guidance: str, seq: int | None) -> str:
    """Record guidance on an active scope; return the record id.

    Raises:
        ScopeNotFoundError; ScopeStateError unless active.
    """
    owner = ctx.known(scope_id).owner
    with ctx.lock:
        intent = lifecycle_intent("inject", owner, "", ctx.next_seq(seq))
        prior = ctx.first_record(intent, seq)
        if prior is not None:
            return prior

        def decide() -> Decision:
            event = ctx.model.scope(owner).inject(guidance)
            return Decision().place(event, owner)

        return first_record_id(ctx.record(intent, decide))


def first_record_id(receipt: AppendReceipt | None) -> str:
    """Return the id of the first record a decision appended.

    Read from the receipt, not the decided event: the append fills in the
    causes of an event that names none (the path's head, ADR 0087).
    """
    assert receipt is not None
    assert receipt.fact_ids
    return receipt.fact_ids[0]


def check_fact_schema(schema_ref: str) -> None:
    """Refuse schemas the runtime reserves for its own records.

    Raises:
        ReservedSchemaError: a ``goatherd.*`` or retired runtime schema.
        RecordInputError: an empty schema ref, or one that is no string.
    """
    try:
        validate_schema_ref(schema_ref)
    except RecordInputError as error:
        raise RecordInputError(f"append_fact: {error}") from None
    if schema_ref.startswith(RUNTIME_NAMESPACE) or is_runtime_schema(schema_ref):
        raise ReservedSchemaError(schema_ref)


def check_fact_parents(caused_by: Sequence[str]) -> tuple[str, ...]:
    """Return the explicit parents of a fact as a tuple, checked.

    Raises:
        TypeError: one string where a sequence of record ids is expected.
        RecordInputError: an entry that is no non-empty string, or a repeat.
    """
    if isinstance(caused_by, str):
        raise TypeError(
            "append_fact: caused_by takes a sequence of record ids,"
            f" not one string: write caused_by=({caused_by!r},)"
        )
    parents = tuple(caused_by)
    for parent in parents:
        if not isinstance(parent, str) or not parent:
            raise RecordInputError(
                f"append_fact: caused_by holds {parent!r}, not a record id"
            )
    repeated = sorted({p for p in parents if parents.count(p) > 1})
    if repeated:
        raise RecordInputError(f"append_fact: caused_by repeats {repeated[0]}")
    return parents


def append_fact(
    ctx: RuntimeContext,
    scope_id: str,
    schema_ref: str,
    kind_label: str,
    payload: Mapping[str, Any],
    seq: int | None,
    caused_by: Sequence[str] = (),
) -> str:
    """Append one capture of the caller's own schema on the scope's path.

    Any lifecycle state may record facts. The record cites ``caused_by``
    when given (exactly those, in order), else the scope path's head: the
    record before it there, or for a child's first record its fork record
    (ADR 0087). Returns the record id.

    Raises:
        ScopeNotFoundError; ReservedSchemaError; RecordInputError for an
        empty schema or a bad or unknown parent; CanonicalEncodingError for
        a payload that is not plain JSON; TypeError for a bare string as
        ``caused_by``.
    """
    check_fact_schema(schema_ref)
    parents = check_fact_parents(caused_by)
    owner = ctx.known(scope_id).owner
    event = OpaqueRecord(
        caused_by=parents,
        record_schema=schema_ref,
        record_mode=RecordMode.CAPTURE,
        record_kind_label=kind_label or schema_ref,
        record_payload=dict(payload),
    )
    with ctx.lock:
        intent = lifecycle_intent("fact", owner, "", ctx.next_seq(seq))
        prior = ctx.first_record(intent, seq)
        if prior is not None:
            return prior
        try:
            receipt = ctx.record(intent, lambda: Decision().place(event, owner))
        except UnknownFactError as error:
            # The heads a decision cites exist: an unknown parent is the caller's.
            raise RecordInputError(f"append_fact: caused_by: {error}") from None
        return first_record_id(receipt)


def record_run_completed(
    ctx: RuntimeContext, scope_id: str, payload: Mapping[str, Any], seq: int | None
) -> str:
    """Record a reversible run's ``run.completed`` on its child's path.

    Raises:
        ScopeNotFoundError; RecordDecodeError for a payload that is not a
        run record; CanonicalEncodingError for one that is not plain JSON.
    """
    owner = ctx.known(scope_id).owner
    event = decode_payload(RunCompleted.SCHEMA, RunCompleted.MODE.value, payload)
    with ctx.lock:
        intent = lifecycle_intent("run-completed", owner, "", ctx.next_seq(seq))
        prior = ctx.first_record(intent, seq)
        if prior is not None:
            return prior
        return first_record_id(
            ctx.record(intent, lambda: Decision().place(event, owner))
        )


def prune_terminal(ctx: RuntimeContext) -> int:
    """Record every listed, terminal, unpruned scope as pruned; return how many."""
    with ctx.lock:
        intent = lifecycle_intent("prune-terminal", "runtime", "", ctx.next_seq(None))
        count: list[int] = []

        def decide() -> Decision:
            decision = Decision()
            pruned = 0
            for scope in ctx.model.scopes():
                event = scope.prune() if scope.listed else None
                if event is not None:
                    decision = decision.place(event, scope.owner)
                    pruned += 1
            count.append(pruned)
            return decision

        ctx.record(intent, decide)
        return count[-1] if count else 0


def destroy_owned_sandbox(ctx: RuntimeContext, owner: str) -> None:
    """Tear down ``owner``'s OWNED sandbox and record it (no-op otherwise).

    Raises:
        SandboxError: the teardown failed (nothing is recorded then).
    """
    binding = ctx.owned_binding(owner)
    if binding is None:
        return
    backend, path = _address(binding.sandbox)
    binding.sandbox.destroy()
    ctx.sandboxes.forget(owner)
    with ctx.lock:
        intent = lifecycle_intent("sandbox-destroyed", owner, "", ctx.next_seq(None))

        def decide() -> Decision | None:
            if ctx.model.scope(owner).sandbox_destroyed:
                return None
            event = SandboxDestroyed(
                owner=owner, backend=backend, sandbox_path=path or None
            )
            return Decision().place(event, owner)

        ctx.record(intent, decide)
