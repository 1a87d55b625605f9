"""The saver's state and its index of the trace (the base of ``GoatherdSaver``).

``SaverCore`` holds the store, the limits, the authorities, the lock, the
index folded from the trace's log and the value cache; it catches the index
up with the log, appends drafts in one batch and folds them (from the receipt
when that is exact), retries a decision whose guarded heads moved, and places
a checkpoint on its path. The read path, the write path and the thread
operations build on it; it imports none of them.
"""

from __future__ import annotations

import itertools
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.base import SerializerProtocol

from goatherd.domain.contexts import TRUSTED_APPEND_CONTEXT, TRUSTED_READ_CONTEXT
from goatherd.domain.errors import OrdinalConflictError
from goatherd.domain.records import AppendBatch, AppendGroup, AppendReceipt, RecordDraft
from goatherd.domain.store import AppendAuthority, ReadAuthority, TraceStore
from goatherd.integrations.langgraph.index import CheckpointEntry, FoldItem, TraceIndex
from goatherd.integrations.langgraph.paths import fork_path, namespace_path
from goatherd.integrations.langgraph.value_cache import ValueCache
from goatherd.integrations.langgraph.values import DEFAULT_LIMITS, ValueLimits

__all__ = [
    "SaverCore",
]

_PAGE: Final = 1000
_ATTEMPTS: Final = 20


class SaverCore(BaseCheckpointSaver[int]):
    """The saver's store, index and caches, and the appends that keep them current."""

    def __init__(
        self,
        store: TraceStore,
        *,
        serde: SerializerProtocol | None = None,
        limits: ValueLimits = DEFAULT_LIMITS,
        append_context: AppendAuthority = TRUSTED_APPEND_CONTEXT,
        read_context: ReadAuthority = TRUSTED_READ_CONTEXT,
    ) -> None:
        """Index ``store`` lazily (the first call folds its log)."""
        super().__init__(serde=serde)
        self.store = store
        self.limits = limits
        self._append_context = append_context
        self._read_context = read_context
        self._lock = threading.RLock()
        self._index = TraceIndex()
        self._loaded = False
        self._intents = uuid.uuid4().hex
        self._appends = itertools.count()
        self._cache = ValueCache(store, self._index, limits, read_context)
        self._context_id: str | None = None

    # ------------------------------------------------------------- the index

    def _catch_up(self) -> None:
        while True:
            # A position range without a schema filter: the filtered read
            # joins the records table and costs several times more.
            entries = self.store.read_log(self._index.cursor, _PAGE)
            for entry in entries:
                self._index.fold(entry)
            if len(entries) < _PAGE:
                self._loaded = True
                return

    def _append(
        self,
        owner_drafts: Mapping[str, Sequence[RecordDraft]],
        guarded: Iterable[str] = (),
    ) -> None:
        """Append the drafts in one batch and fold them into the index.

        ``guarded`` owners must still have the heads the index knows: the
        store refuses the batch otherwise (``OrdinalConflictError``), because
        another writer appended there since this saver last read.
        """
        # Every append of this saver is made under one authority, hence in
        # one retained context: the first append stores it, the others reuse
        # it by id (no context row, digest or insert per append).
        groups = tuple(
            AppendGroup(
                owner, fact_drafts=tuple(drafts), retained_context=self._context_id
            )
            for owner, drafts in owner_drafts.items()
            if drafts
        )
        if not groups:
            return
        heads = self._index.heads
        expected = {owner: heads.get(owner, 0) for owner in dict.fromkeys(guarded)}
        # Unique per saver (a random prefix), process (a fork shares the
        # prefix) and append (a counter): one entropy read per saver.
        intent = f"langgraph:{self._intents}:{os.getpid()}:{next(self._appends)}"
        receipt = self.store.append(
            self._append_context,
            AppendBatch(intent, groups),
            expected_heads=expected or None,
        )
        if self._context_id is None and receipt.context_receipts:
            self._context_id = receipt.context_receipts[0]
        self._fold_own(groups, receipt)

    def _fold_own(self, groups: Sequence[AppendGroup], receipt: AppendReceipt) -> None:
        """Fold an append of this saver from its receipt, when that is exact.

        Log positions are gap-free and in commit order, so when the batch's
        positions follow the index's cursor directly, nobody else appended
        since this saver's last read and its records are the next entries of
        the log: the index folds them without reading them back. Otherwise
        it reads the log from the cursor (others' records and these, in log
        order).
        """
        start = self._index.cursor + 1
        positions = [int(c.partition(":")[2]) for c in receipt.commit_receipts]
        drafts = [(g.trace_owner_id, d) for g in groups for d in g.fact_drafts]
        if positions != list(range(start, start + len(drafts))):
            self._catch_up()
            return
        ordinals = {o: first for o, (first, _) in receipt.owner_ordinal_ranges.items()}
        for position, record_id, (owner, draft) in zip(
            positions, receipt.fact_ids, drafts, strict=True
        ):
            ordinal = ordinals[owner]
            ordinals[owner] = ordinal + 1
            self._index.fold_item(
                FoldItem(
                    position, record_id, owner, ordinal, draft.schema_ref, draft.payload
                )
            )

    def _read_unless_known(
        self, thread_id: str, namespace: str, checkpoint_id: str
    ) -> None:
        """Read the log first when a call names a checkpoint the index lacks.

        The saver cannot have written that checkpoint itself, so someone else
        did (or nobody): the index is not known to be current.
        """
        if not self._loaded:
            self._catch_up()
            return
        thread = self._index.thread(thread_id)
        if thread is None or (namespace, checkpoint_id) not in thread.checkpoints:
            self._catch_up()

    def _guarded(self, write: Callable[[], None]) -> None:
        """Run ``write`` (decide on the index, then append guarded heads).

        A put trusts the index without reading the log first: the index holds
        everything up to this saver's last read plus its own appends since.
        The heads of the paths a decision depends on are guarded, so a write
        by anyone else there makes the store refuse the append; the saver
        then reads what it missed and decides again.
        """
        if not self._loaded:
            self._catch_up()
        for attempt in range(_ATTEMPTS):
            try:
                write()
                return
            except OrdinalConflictError:
                if attempt == _ATTEMPTS - 1:
                    raise
                self._catch_up()

    def _placement(
        self,
        thread_id: str,
        namespace: str,
        parent: CheckpointEntry | None,
        checkpoint_id: str,
    ) -> str:
        if parent is None:
            return namespace_path(thread_id, namespace)
        if self._index.tips.get(parent.owner) == parent.checkpoint_id:
            return parent.owner
        return fork_path(thread_id, namespace, checkpoint_id)
