"""The saver's whole-thread operations: delete, erase, prune and copy.

``ThreadOperations`` hides a thread's checkpoints (``delete_thread``,
``delete_for_runs``, ``prune``) by declaration records, erases a thread's
payloads for good by redactions of the store (``erase_thread``), and copies a
thread's visible checkpoints and writes to another thread (``copy_thread``).
Imports ``saver_core`` and ``saver_drafts``.
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from goatherd.domain.records import DECLARATION, Record, RecordDraft
from goatherd.infrastructure.store import SqlAlchemyTraceStore
from goatherd.infrastructure.store.redaction import MAX_REDACTED
from goatherd.integrations.langgraph.index import (
    SCHEMA_CHECKPOINT,
    SCHEMA_CHECKPOINTS_HIDDEN,
    SCHEMA_THREAD_DELETED,
    SCHEMA_VALUE,
    SCHEMA_VALUES_ERASED,
    SCHEMA_WRITE,
    SCHEMA_WRITES,
    CheckpointEntry,
    ThreadIndex,
    WriteEntry,
)
from goatherd.integrations.langgraph.paths import thread_path
from goatherd.integrations.langgraph.saver_core import SaverCore
from goatherd.integrations.langgraph.saver_drafts import _blob_json, _Drafts
from goatherd.integrations.langgraph.value_cache import ValueCache

__all__ = [
    "PRUNE_STRATEGIES",
    "ThreadOperations",
]

PRUNE_STRATEGIES: Final = ("keep_latest", "delete")
_HIDDEN_PER_RECORD: Final = 500


class ThreadOperations(SaverCore):
    """The thread operations of ``GoatherdSaver``: delete, erase, prune, copy."""

    # ------------------------------------------------- deletion and copies

    def delete_thread(self, thread_id: str, *, reason: str = "delete_thread") -> None:
        """Hide every checkpoint and write of ``thread_id``, recording ``reason``.

        The records stay in the trace (it is append-only); the thread reads as
        empty to LangGraph from now on, and a later ``put`` starts it afresh.
        """
        with self._lock:
            self._catch_up()
            self._delete_threads([str(thread_id)], reason)

    def erase_thread(self, thread_id: str, reason: str) -> tuple[str, ...]:
        """Delete ``thread_id`` if it is visible, then erase its payloads for good.

        Erases, by recorded redactions of the store (ADR 0063), every
        checkpoint and pending-write record the thread ever had (hidden or
        not) and every value record they name that no visible checkpoint or
        write of another thread still reaches (values are stored once per
        trace and shared). What stays: record ids, schemas, parents, path
        entries, the thread's deletion records, the redaction records and the
        head. An identical value written later, by any thread, is refused by
        the store (its record id names the erasure): erase values only when
        they should not come back.

        Returns:
            The redaction record ids (one per at most ``MAX_REDACTED`` records).

        Raises:
            TypeError: the saver's store cannot redact.
            RedactionRefusedError: an empty reason.
        """
        store = self.store
        if not isinstance(store, SqlAlchemyTraceStore):
            raise TypeError("erase_thread needs a goatherd SqlAlchemyTraceStore")
        thread_id = str(thread_id)
        with self._lock:
            self._catch_up()
            self._delete_threads([thread_id], f"erase: {reason}")
            self._catch_up()
            own, digests = self._thread_records(thread_id)
            values = self._erasable_values(digests)
            doomed = sorted({*own, *values})
            done = []
            for start in range(0, len(doomed), MAX_REDACTED):
                redaction = store.redact(
                    self._append_context,
                    f"langgraph:erase:{uuid.uuid4().hex}",
                    doomed[start : start + MAX_REDACTED],
                    reason,
                )
                done.append(redaction.redaction_record_id)
            if values:
                # Lets an equal value be stored again, as a new record.
                drafts = _Drafts(self._index)
                drafts.add(
                    SCHEMA_VALUES_ERASED,
                    {
                        "thread_id": thread_id,
                        "reason": reason,
                        "values": sorted([d, r] for r, d in values.items()),
                    },
                    parents=done,
                    mode=DECLARATION,
                )
                self._append({thread_path(thread_id): drafts.drafts})
            self._cache = ValueCache(
                store, self._index, self.limits, self._read_context
            )
            self._catch_up()
            return tuple(done)

    def _thread_records(
        self, thread_id: str
    ) -> tuple[builtins.list[str], builtins.list[str]]:
        """The thread's checkpoint and write records and the value digests named."""
        records: builtins.list[str] = []
        digests: builtins.list[str] = []
        for entry in self.store.scan_records_by_schema(
            SCHEMA_CHECKPOINT, SCHEMA_WRITE, SCHEMA_WRITES
        ):
            record = entry.record
            payload = record.payload
            if record.redacted_by is not None or payload.get("thread_id") != thread_id:
                continue
            records.append(record.record_id)
            digests.extend(_named_values(payload))
        return records, digests

    def _erasable_values(self, digests: Iterable[str]) -> dict[str, str]:
        """Value records (id -> digest) ``digests`` reach and no visible thread does."""
        live: builtins.list[str] = []
        for thread in self._index.threads.values():
            for entry in thread.checkpoints.values():
                live.extend(d for d in entry.channels.values() if d is not None)
            for writes in thread.writes.values():
                live.extend(
                    w.value for w in writes.values() if isinstance(w.value, str)
                )
        kept = self._value_closure(live)
        return {r: d for r, d in self._value_closure(digests).items() if r not in kept}

    def _value_closure(self, digests: Iterable[str]) -> dict[str, str]:
        roots = sorted(
            {r for d in digests if (r := self._index.values.get(d)) is not None}
        )
        if not roots:
            return {}
        closure = self.store.read_causal_closure(self._read_context, roots)
        return {
            record.record_id: str(record.payload.get("digest"))
            for record in closure.facts_by_id.values()
            if isinstance(record, Record)
            and record.envelope.schema_ref == SCHEMA_VALUE
            and record.redacted_by is None
        }

    def _delete_threads(self, thread_ids: Sequence[str], reason: str) -> None:
        owners: dict[str, builtins.list[RecordDraft]] = {}
        for thread_id in dict.fromkeys(thread_ids):
            thread = self._index.thread(thread_id)
            if thread is None:
                continue
            latest = [
                entry.record_id
                for ns in sorted(thread.ordered)
                if (entry := thread.latest(ns)) is not None
            ]
            drafts = _Drafts(self._index)
            drafts.add(
                SCHEMA_THREAD_DELETED,
                {
                    "thread_id": thread_id,
                    "reason": reason,
                    "checkpoints": len(thread.checkpoints),
                },
                parents=latest,
                mode=DECLARATION,
            )
            owners[thread_path(thread_id)] = drafts.drafts
        if owners:
            self._append(owners)

    def _hide(
        self,
        hidden: Mapping[str, Sequence[CheckpointEntry]],
        reason: str,
        extra: Mapping[str, object],
    ) -> None:
        owners: dict[str, builtins.list[RecordDraft]] = {}
        for thread_id, entries in hidden.items():
            drafts = _Drafts(self._index)
            for start in range(0, len(entries), _HIDDEN_PER_RECORD):
                chunk = entries[start : start + _HIDDEN_PER_RECORD]
                drafts.add(
                    SCHEMA_CHECKPOINTS_HIDDEN,
                    {
                        "thread_id": thread_id,
                        "reason": reason,
                        **extra,
                        "checkpoints": [
                            [e.checkpoint_ns, e.checkpoint_id] for e in chunk
                        ],
                    },
                    parents=[e.record_id for e in chunk],
                    mode=DECLARATION,
                )
            if drafts.drafts:
                owners[thread_path(thread_id)] = drafts.drafts
        if owners:
            self._append(owners)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Hide the checkpoints (and their writes) whose metadata names these runs."""
        wanted = {str(r) for r in run_ids}
        if not wanted:
            return
        with self._lock:
            self._catch_up()
            hidden: dict[str, builtins.list[CheckpointEntry]] = {}
            for thread_id, thread in self._index.threads.items():
                for entry in sorted(thread.checkpoints.values(), key=_order):
                    meta = self.serde.loads_typed(
                        (entry.metadata.type, entry.metadata.data)
                    )
                    if str(meta.get("run_id")) in wanted:
                        hidden.setdefault(thread_id, []).append(entry)
            self._hide(hidden, "delete_for_runs", {"run_ids": sorted(wanted)})

    def prune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest"
    ) -> None:
        """Keep only each namespace's latest checkpoint, or delete the threads.

        Raises:
            ValueError: ``strategy`` is not one of :data:`PRUNE_STRATEGIES`.
        """
        if strategy not in PRUNE_STRATEGIES:
            raise ValueError(
                f"prune strategy must be one of {', '.join(PRUNE_STRATEGIES)}, "
                f"got {strategy!r}"
            )
        with self._lock:
            self._catch_up()
            ids = [str(t) for t in thread_ids]
            if strategy == "delete":
                self._delete_threads(ids, "prune:delete")
                return
            hidden: dict[str, builtins.list[CheckpointEntry]] = {}
            for thread_id in dict.fromkeys(ids):
                thread = self._index.thread(thread_id)
                if thread is None:
                    continue
                for namespace, checkpoint_ids in thread.ordered.items():
                    hidden.setdefault(thread_id, []).extend(
                        thread.checkpoints[(namespace, c)] for c in checkpoint_ids[:-1]
                    )
            self._hide(hidden, "prune:keep_latest", {})

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every visible checkpoint and write of a thread to another thread.

        The copies cite their originals as causal parents and reuse the same
        value records (values are stored once per trace).
        """
        source_id, target_id = str(source_thread_id), str(target_thread_id)
        with self._lock:
            self._catch_up()
            source = self._index.thread(source_id)
            if source is None:
                return
            for entry in sorted(source.checkpoints.values(), key=_order):
                key = (entry.checkpoint_ns, entry.checkpoint_id)
                writes = sorted(
                    source.writes.get(key, {}).values(), key=lambda w: w.sort_key
                )
                self._copy(entry, writes, target_id)

    def _copy(
        self, entry: CheckpointEntry, writes: Sequence[WriteEntry], target_id: str
    ) -> None:
        self._catch_up()
        target = self._index.thread(target_id) or ThreadIndex()
        parent = (
            target.checkpoints.get((entry.checkpoint_ns, entry.parent_id))
            if entry.parent_id is not None
            else None
        )
        record = self.store.read_fact(self._read_context, entry.record_id)
        assert isinstance(record, Record)
        drafts = _Drafts(self._index)
        payload = {
            **record.payload,
            "thread_id": target_id,
            "copied_from": entry.record_id,
        }
        drafts.add(
            SCHEMA_CHECKPOINT,
            payload,
            parents=[
                p for p in (entry.record_id, parent.record_id if parent else None) if p
            ],
            values=[d for d in entry.channels.values() if d is not None],
        )
        for write in writes:
            value = write.value
            drafts.add(
                SCHEMA_WRITE,
                {
                    "thread_id": target_id,
                    "checkpoint_ns": entry.checkpoint_ns,
                    "checkpoint_id": entry.checkpoint_id,
                    "task_id": write.task_id,
                    "task_path": write.task_path,
                    "idx": write.idx,
                    "channel": write.channel,
                    "value": {"ref": value}
                    if isinstance(value, str)
                    else _blob_json(value),
                    "copied_from": write.record_id,
                },
                parents=[write.record_id],
                values=[value] if isinstance(value, str) else [],
            )
        owner = self._placement(
            target_id, entry.checkpoint_ns, parent, entry.checkpoint_id
        )
        self._append({owner: drafts.drafts})


def _named_values(payload: Mapping[str, Any]) -> builtins.list[str]:
    """The value digests a checkpoint (channels) or write(s) (refs) name."""
    channels = payload.get("channels")
    if isinstance(channels, Mapping):
        return [d for d in channels.values() if isinstance(d, str)]
    writes = payload.get("writes")
    if isinstance(writes, list):
        return [r for w in writes if isinstance(w, Mapping) for r in _named_values(w)]
    value = payload.get("value")
    if isinstance(value, Mapping) and isinstance(value.get("ref"), str):
        return [value["ref"]]
    return []


def _order(entry: CheckpointEntry) -> tuple[str, str]:
    return (entry.checkpoint_ns, entry.checkpoint_id)
