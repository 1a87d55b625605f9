"""The runtime model: the trace's runtime fold, kept current from the log.

One :class:`RuntimeModel` per trace store per process (the composition root
shares it between managers). Every query and every decision first catches it
up: the records of runtime schemas committed since its position are decoded
and folded (:class:`~goatherd.domain.RuntimeFold`), so what it answers is
exactly the fold of the trace at that moment: another process, a restart or a
rebuilt read model compute the same values. Nothing else is remembered.

It also remembers, per path, the log position of the last runtime record on
it: a decision checks that none of the paths it guards received one after
the position it decided at (see :mod:`goatherd.application.decisions`).
A catch-up first asks the store whether anything committed after its
position (one cheap read on SQLite); and the model keeps the path heads it
saw itself (its own receipts, whole-log reads), which a decision appends
with while its view is still the log's tail (ADR 0078).

A runtime record that does not decode (an old file, a raw insert: the store's
door refuses them) is not folded, and neither is anything after it on the same
path: that path is *unreadable*. Its scope, checkpoint or output raises
:class:`~goatherd.domain.UnreadableRecordError` (an
``InconsistentTraceError``) naming the record from every read, so every command
on it fails with that error, while every other path folds and works.
:meth:`RuntimeModel.unreadable` lists them.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from goatherd.application.runtime import RuntimeTrace
from goatherd.domain import (
    AppendReceipt,
    CheckpointAggregate,
    CheckpointCreated,
    LogEntry,
    MemoryCatalog,
    OutputSealed,
    PlacedEvent,
    RecordDecodeError,
    RetainedOutputAggregate,
    RuntimeEvent,
    RuntimeFold,
    ScopeAggregate,
    ScopeDiscarded,
    ScopeForked,
    ScopeHalted,
    ScopeMerged,
    UnreadableRecordError,
    decode_fact,
    owner_of_checkpoint,
    owner_of_output,
    runtime_fold_schemas,
    workspace_owner_of,
)

__all__ = ["RecordCounts", "RuntimeModel"]

_PAGE: Final = 2000


@dataclass(frozen=True, slots=True)
class RecordCounts:
    """Distinct lifecycle records folded so far (what recovery reports).

    Attributes:
        forks: fork records.
        terminals: merge, discard and halt records.
        checkpoints: checkpoint-created records.
        sealed: sealed-output records.
    """

    forks: int = 0
    terminals: int = 0
    checkpoints: int = 0
    sealed: int = 0


_COUNTED: Final[dict[type[RuntimeEvent], str]] = {
    ScopeForked: "forks",
    ScopeMerged: "terminals",
    ScopeDiscarded: "terminals",
    ScopeHalted: "terminals",
    CheckpointCreated: "checkpoints",
    OutputSealed: "sealed",
}


class RuntimeModel:
    """The runtime fold of one trace (thread-safe; values are immutable)."""

    def __init__(self, trace: RuntimeTrace, *, page: int = _PAGE) -> None:
        """Fold ``trace``'s runtime records (lazily, on the first refresh)."""
        self._trace = trace
        self._page = max(page, 1)
        self._catalog = MemoryCatalog()
        self._fold = RuntimeFold(self._catalog)
        self._schemas = runtime_fold_schemas()
        self._position = -1
        self._last_on_path: dict[str, int] = {}
        self._known_heads: dict[str, int] = {}
        # Path heads this process can vouch for without reading them (see
        # ``vouched_heads``): exact as of the entry that set them.
        self._exact: dict[str, int] = {}
        # The record id at each of those heads (what a decision cites).
        self._exact_ids: dict[str, str] = {}
        self._gapless = True  # every entry up to the position was folded
        self._distrusted: set[str] = set()
        self._counted: dict[str, set[tuple[str, str]]] = {}
        self._unreadable: dict[str, RecordDecodeError] = {}
        self._lock = threading.RLock()

    @property
    def trace(self) -> RuntimeTrace:
        """The store the model folds."""
        return self._trace

    @property
    def position(self) -> int:
        """The log position folded through (``-1``: nothing yet)."""
        return self._position

    def refresh(self) -> int:
        """Fold every runtime record committed since the last refresh.

        A new model, or one a page or more behind, reads the log filtered to
        the runtime's schemas; a short tail is read whole and filtered here,
        which keeps every refresh one query, proportional to what is new.

        Returns:
            The position folded through.

        A runtime record that does not decode makes its path unreadable
        (see the module docs) and folding carries on without it.
        """
        # "Anything after the position?" in one cheap read where the store
        # has one (SQLite): nothing new, nothing read. Asked before taking the
        # model's lock (the store takes its own), so the catch-up stands as of
        # that read.
        tail = self._trace.cheap_tail()
        with self._lock:
            if tail is not None and tail <= self._position:
                return self._position
            # A new model (or one far behind) reads the log filtered to the
            # runtime's schemas; otherwise the tail is read whole (one query,
            # empty when nothing is new) and filtered here.
            bulk = self._position < 0
            while True:
                if bulk:
                    # Entries of other schemas are skipped: no head is exact.
                    self._exact.clear()
                    self._exact_ids.clear()
                    self._gapless = False
                entries = self._trace.read_log(
                    self._position,
                    self._page,
                    schema_refs=self._schemas if bulk else None,
                )
                for entry in entries:
                    self._fold_entry(entry, whole=not bulk)
                if len(entries) < self._page:
                    return self._position
                bulk = True  # a full page: far behind

    def adopt(
        self,
        placed: Sequence[tuple[str, RuntimeEvent]],
        receipt: AppendReceipt,
    ) -> bool:
        """Fold this process's own committed append without reading it back.

        ``placed`` lists the batch's drafts in batch order (owner, event). The
        append is folded only when its positions directly follow what the
        model has folded (nothing else committed in between); otherwise the
        next refresh reads it from the log like any other.

        Returns:
            Whether the append was folded.
        """
        positions = [_position_of(r) for r in receipt.commit_receipts]
        if len(positions) != len(placed) or len(receipt.fact_ids) != len(placed):
            return False
        with self._lock:
            if positions != list(
                range(self._position + 1, self._position + 1 + len(positions))
            ):
                return False
            if any(owner in self._unreadable for owner, _ in placed):
                return False  # the log read skips it there, like any record
            next_ordinal = {o: r[0] for o, r in receipt.owner_ordinal_ranges.items()}
            for (owner, event), record_id, position in zip(
                placed, receipt.fact_ids, positions, strict=True
            ):
                ordinal = next_ordinal[owner]
                next_ordinal[owner] = ordinal + 1
                fact = PlacedEvent(
                    event, record_id, owner, ordinal, position, receipt.append_intent_id
                )
                self._fold.apply(fact)
                self._count(fact)
                self._last_on_path[owner] = position
                self._known_heads[owner] = ordinal + 1
                self._exact[owner] = ordinal + 1
                self._exact_ids[owner] = record_id
                self._distrusted.discard(owner)
                self._position = position
            return True

    def _fold_entry(self, entry: LogEntry, *, whole: bool) -> None:
        view = entry.record.view
        if view is not None:
            head = view.owner_ordinal + 1
            self._known_heads[view.trace_owner_id] = head
            if whole:
                self._exact[view.trace_owner_id] = head
                self._exact_ids[view.trace_owner_id] = entry.record.envelope.record_id
                self._distrusted.discard(view.trace_owner_id)
        if entry.record.envelope.schema_ref in self._schemas:
            owner = view.trace_owner_id if view is not None else ""
            if owner in self._unreadable:
                self._position = entry.position
                return
            try:
                fact = decode_fact(entry.record, entry.position, entry.append_intent_id)
            except RecordDecodeError as error:
                self._unreadable[owner] = error
                self._position = entry.position
                return
            self._fold.apply(fact)
            self._count(fact)
            self._last_on_path[fact.owner] = entry.position
        self._position = entry.position

    def _count(self, fact: PlacedEvent) -> None:
        kind = _COUNTED.get(type(fact.event))
        if kind is None:
            return
        # A halt's record id is the same for every scope (its payload is
        # empty): a terminal record is distinct per record AND path.
        key = (fact.record_id, fact.owner if kind == "terminals" else "")
        if isinstance(fact.event, ScopeMerged | ScopeDiscarded):
            key = (fact.record_id, "")
        self._counted.setdefault(kind, set()).add(key)

    def record_counts(self) -> RecordCounts:
        """Return the distinct lifecycle records folded so far."""
        with self._lock:
            return RecordCounts(
                **{kind: len(keys) for kind, keys in self._counted.items()}
            )

    def knows_heads(self, heads: dict[str, int]) -> bool:
        """Whether the model has folded every entry up to these path heads.

        True means nothing (runtime record or not) landed on those paths
        beyond what the model has read, so a decision taken on it saw them.
        """
        with self._lock:
            return all(self._known_heads.get(o, 0) == h for o, h in heads.items())

    def vouched_heads(
        self, owners: Collection[str]
    ) -> tuple[int, dict[str, int]] | None:
        """Return the position and the heads of ``owners`` there, as the model saw.

        A path's head is vouched for when the model folded the entry that
        set it from the whole log (a tail read, or this process's own append
        adopted from its receipt), and a path the model never saw is vouched
        empty while the model has folded every entry since the trace began.
        ``None`` when any head is not vouched for: the caller reads them.
        The heads hold at the returned position (read together, under the
        model's lock): a caller uses them only while that position is still
        the log's tail (:meth:`is_tail`).

        A vouched head is what the model saw, so a decision that appends
        with it as expected head commits only if nothing landed on that path
        since (the store checks the heads inside its write transaction);
        when the guess is stale the append is refused and
        :meth:`distrust` sends the next attempt to the store.
        """
        with self._lock:
            heads = {}
            for owner in owners:
                if owner in self._distrusted:
                    return None
                found = self._exact.get(owner)
                if found is None:
                    if not self._gapless or owner in self._known_heads:
                        return None
                    found = 0
                heads[owner] = found
            return self._position, heads

    def vouched_head_ids(self, heads: dict[str, int]) -> dict[str, str] | None:
        """Return the record id at each of these vouched heads (``""``: empty path).

        ``None`` when the model no longer vouches for one of them exactly as
        given (another entry was folded there since): the caller reads them.
        """
        with self._lock:
            ids = {}
            for owner, head in heads.items():
                if head == 0:
                    ids[owner] = ""
                    continue
                if self._exact.get(owner) != head or owner not in self._exact_ids:
                    return None
                ids[owner] = self._exact_ids[owner]
            return ids

    def is_tail(self, position: int) -> bool:
        """Whether ``position`` is provably still the log's last (one cheap read).

        ``False`` when the store has no cheap way to tell (PostgreSQL).
        """
        return self._trace.cheap_tail() == position

    def path_head(self, owner: str) -> int:
        """Return ``owner``'s head as vouched for, else as the store reads it.

        Vouched only while nothing committed since the model's position, as
        :func:`~goatherd.application.decisions.record_decision` vouches for
        the expected heads of the append that follows.
        """
        vouched = self.vouched_heads((owner,))
        if vouched is not None and self.is_tail(vouched[0]):
            return vouched[1][owner]
        return self._trace.head(owner)

    def distrust(self, owners: Collection[str]) -> None:
        """Stop vouching for these heads until the model folds an entry there."""
        with self._lock:
            for owner in owners:
                self._exact.pop(owner, None)
                self._exact_ids.pop(owner, None)
                self._distrusted.add(owner)

    def touched_since(self, owners: set[str], position: int) -> bool:
        """Whether a runtime record landed on one of ``owners`` after ``position``."""
        with self._lock:
            return any(self._last_on_path.get(o, -1) > position for o in owners)

    # ------------------------------------------------------------- reads

    def unreadable(self) -> dict[str, RecordDecodeError]:
        """Return each unreadable path and the first record on it not decoding."""
        with self._lock:
            return dict(self._unreadable)

    def _blocking(
        self, path: str, scope_owner: str
    ) -> tuple[str, RecordDecodeError] | None:
        """Return the unreadable path that makes ``path`` unreadable, if any.

        A path is unreadable when it, its scope's path or an ancestor scope's
        path holds a record that does not decode (a skipped fork, merge or
        workspace record there may concern it).
        """
        if not self._unreadable:
            return None
        error = self._unreadable.get(path)
        if error is not None:
            return path, error
        seen: set[str] = set()
        owner = scope_owner
        while owner and owner not in seen:
            error = self._unreadable.get(owner)
            if error is not None:
                return owner, error
            seen.add(owner)
            scope = self._catalog.scopes.get(owner)
            owner = (scope.parent_owner or "") if scope is not None else ""
        return None

    def _refuse_unreadable(self, path: str, scope_owner: str) -> None:
        found = self._blocking(path, scope_owner)
        if found is None:
            return
        where, error = found
        raise UnreadableRecordError(
            path, error.record_id, where, f"{error.schema_ref}: {error.reason}"
        )

    def scope(self, owner: str) -> ScopeAggregate:
        """Return the scope of ``owner`` as folded (bare when no record names it).

        Raises:
            UnreadableRecordError: a record on the scope's path does not decode.
        """
        with self._lock:
            self._refuse_unreadable(owner, owner)
            return self._catalog.scopes.get(owner) or ScopeAggregate.bare(owner)

    def checkpoint(self, checkpoint_id: str) -> CheckpointAggregate:
        """Return the checkpoint as folded (bare when unknown).

        Raises:
            UnreadableRecordError: a record on its path or its scope's does not
                decode.
        """
        with self._lock:
            self._refuse_unreadable(checkpoint_id, owner_of_checkpoint(checkpoint_id))
            found = self._catalog.checkpoints.get(checkpoint_id)
            return found or CheckpointAggregate.bare(checkpoint_id)

    def output(self, output_id: str) -> RetainedOutputAggregate:
        """Return the output as folded (bare when unknown).

        Raises:
            UnreadableRecordError: a record on its path or its scope's does not
                decode.
        """
        with self._lock:
            self._refuse_unreadable(output_id, owner_of_output(output_id))
            found = self._catalog.outputs.get(output_id)
            return found or RetainedOutputAggregate.bare(output_id)

    def scopes(self) -> list[ScopeAggregate]:
        """Return every folded scope value, in first-fold order (readable ones)."""
        with self._lock:
            return [
                s
                for s in self._catalog.scopes.values()
                if self._blocking(s.owner, s.owner) is None
            ]

    def checkpoints(self) -> list[CheckpointAggregate]:
        """Return every folded checkpoint, in first-fold order (readable ones)."""
        with self._lock:
            return [
                c
                for c in self._catalog.checkpoints.values()
                if self._blocking(c.checkpoint_id, c.scope_owner) is None
            ]

    def outputs(self) -> list[RetainedOutputAggregate]:
        """Return every folded output, in first-fold order (readable ones)."""
        with self._lock:
            return [
                o
                for o in self._catalog.outputs.values()
                if self._blocking(o.output_id, o.scope_owner) is None
            ]

    def workspace_owner(self, owner: str) -> str:
        """Return the owner of the workspace ``owner`` works in."""
        with self._lock:
            return workspace_owner_of(self._catalog, owner)

    def children_of(self, owner: str) -> Iterator[ScopeAggregate]:
        """Yield the folded children of ``owner``, in fork order."""
        with self._lock:
            scope = self._catalog.scopes.get(owner)
            kids = [] if scope is None else list(scope.children)
            found = [
                self._catalog.scopes.get(kid)
                for kid in kids
                if self._blocking(kid, kid) is None
            ]
        yield from (kid for kid in found if kid is not None)


def _position_of(commit_receipt: str) -> int:
    """Return ``n`` of a ``commit:n`` receipt (``-1`` if it is not one)."""
    prefix, _, number = commit_receipt.partition(":")
    return int(number) if prefix == "commit" and number.isdigit() else -1
