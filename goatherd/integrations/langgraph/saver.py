"""``GoatherdSaver``: a LangGraph checkpointer whose storage is a goatherd trace.

Every checkpoint, every pending write and every distinct channel value is a
record on the thread's owner paths (see ``paths``); deletion and pruning are
records that hide what came before them. The saver keeps no state of its own
beyond an index folded from the trace's log (see ``index``) and caches of
immutable value records, so any number of savers, in any number of processes,
can share one trace.
"""

from __future__ import annotations

import asyncio
import base64
import builtins
import itertools
import os
import threading
import uuid
from collections.abc import (
    AsyncIterator,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import contextmanager
from typing import Any, Final

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from goatherd.domain.contexts import TRUSTED_APPEND_CONTEXT, TRUSTED_READ_CONTEXT
from goatherd.domain.errors import GoatherdError, OrdinalConflictError
from goatherd.domain.records import (
    CAPTURE,
    DECLARATION,
    AppendBatch,
    AppendGroup,
    AppendReceipt,
    Record,
    RecordDraft,
)
from goatherd.domain.store import AppendAuthority, ReadAuthority, TraceStore
from goatherd.infrastructure.store import SqlAlchemyTraceStore, open_trace_store
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
    FoldItem,
    RejectedRecord,
    ThreadIndex,
    TraceIndex,
    WriteEntry,
)
from goatherd.integrations.langgraph.paths import (
    fork_path,
    namespace_path,
    thread_path,
)
from goatherd.integrations.langgraph.value_cache import MissingValueError, ValueCache
from goatherd.integrations.langgraph.values import (
    DEFAULT_LIMITS,
    Blob,
    EncodedValue,
    ValueLimits,
    encode_blob,
)

__all__ = [
    "CheckpointConfigError",
    "GoatherdSaver",
    "MissingValueError",
    "PRUNE_STRATEGIES",
]

PRUNE_STRATEGIES: Final = ("keep_latest", "delete")
_PAGE: Final = 1000
_HIDDEN_PER_RECORD: Final = 500
_ATTEMPTS: Final = 20


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


def version_key(version: object) -> str:
    """Return the key a channel version is indexed under (type and text)."""
    return f"{type(version).__name__}:{version}"


def _blob_json(blob: Blob) -> dict[str, object]:
    return {"type": blob.type, "data": base64.b64encode(blob.data).decode("ascii")}


class _Drafts:
    """The drafts of one append, with the value records it adds or reuses."""

    def __init__(self, index: TraceIndex) -> None:
        self._index = index
        self._local: dict[str, str] = {}
        self.drafts: list[RecordDraft] = []

    def parents(
        self, digests: Iterable[str]
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        stored: list[str] = []
        local: list[str] = []
        for digest in dict.fromkeys(digests):
            if digest in self._local:
                local.append(self._local[digest])
            else:
                stored.append(self._index.values[digest])
        return tuple(stored), tuple(local)

    def add_value(self, encoded: EncodedValue) -> str:
        for node, links in zip(encoded.nodes, encoded.links, strict=True):
            digest = str(node["digest"])
            if digest in self._index.values or digest in self._local:
                continue
            stored, local = self.parents(links)
            name = f"value-{len(self._local)}"
            payload = dict(node)
            generation = self._index.erased.get(digest)
            if generation is not None:  # stored again after an erasure
                payload["generation"] = generation
            self.drafts.append(
                RecordDraft(
                    mode=CAPTURE,
                    schema_ref=SCHEMA_VALUE,
                    payload=payload,
                    append_local_id=name,
                    caused_by_fact_ids=stored,
                    caused_by_local_refs=local,
                )
            )
            self._local[digest] = name
        return encoded.digest

    def add(
        self,
        schema_ref: str,
        payload: Mapping[str, object],
        *,
        parents: Sequence[str] = (),
        values: Iterable[str] = (),
        mode: str = CAPTURE,
    ) -> None:
        stored, local = self.parents(values)
        self.drafts.append(
            RecordDraft(
                mode=mode,
                schema_ref=schema_ref,
                payload=payload,
                caused_by_fact_ids=tuple(dict.fromkeys([*parents, *stored])),
                caused_by_local_refs=local,
            )
        )


class GoatherdSaver(BaseCheckpointSaver[int]):
    """A LangGraph checkpointer over a goatherd trace (SQLite or PostgreSQL).

    Use :meth:`from_url` to open a trace by path or URL, or pass an open
    store. Thread-safe; the async methods run the sync ones on a worker
    thread. Channel values are serialized with the saver's ``serde`` and
    stored once per distinct value; a list that grows stores only its new
    items (LangGraph's reducers build new lists from the old items, which the
    saver recognizes by identity or equality; mutating an item of a stored
    list in place is not detected).

    Args:
        store: the trace store (the saver does not close it).
        serde: LangGraph's serializer (default: ``JsonPlusSerializer``).
        limits: record size bounds for values.
        append_context: the authority appends are made under.
        read_context: the authority reads are made under.
    """

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

    @classmethod
    @contextmanager
    def from_url(
        cls, url: str | os.PathLike[str], **kwargs: Any
    ) -> Iterator[GoatherdSaver]:
        """Open the trace at ``url`` (a path or SQLAlchemy URL), closing it after."""
        store = open_trace_store(url)
        try:
            yield cls(store, **kwargs)
        finally:
            store.close()

    @property
    def rejected_records(self) -> tuple[RejectedRecord, ...]:
        """Records with the saver's schemas that it ignored, and why."""
        with self._lock:
            self._catch_up()
            return tuple(self._index.rejected)

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
        groups = tuple(
            AppendGroup(owner, fact_drafts=tuple(drafts))
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

    # ------------------------------------------------------------ get / list

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Return the checkpoint ``config`` names, or its namespace's latest."""
        configurable = _configurable(config, "get_tuple")
        thread_id = _id_field(configurable, "thread_id", "get_tuple")
        namespace = _namespace(configurable)
        checkpoint_id = get_checkpoint_id(config)
        with self._lock:
            self._catch_up()
            thread = self._index.thread(thread_id)
            if thread is None:
                return None
            if checkpoint_id is None:
                entry = thread.latest(namespace)
            else:
                entry = thread.checkpoints.get((namespace, str(checkpoint_id)))
            return None if entry is None else self._tuple(thread, entry)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # LangGraph's name
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Yield matching checkpoints, newest (highest checkpoint id) first.

        The matches are fixed when iteration starts; each tuple is built (its
        values deserialized) only when it is reached.
        """
        with self._lock:
            self._catch_up()
            candidates = self._candidates(config, before)
        found = 0
        for thread, entry in candidates:
            if limit is not None and found >= limit:
                return
            with self._lock:
                item = self._matching_tuple(thread, entry, filter or {})
            if item is not None:
                found += 1
                yield item

    def _candidates(
        self, config: RunnableConfig | None, before: RunnableConfig | None
    ) -> builtins.list[tuple[ThreadIndex, CheckpointEntry]]:
        configurable = (config or {}).get("configurable") or {}
        threads: Iterable[ThreadIndex]
        if configurable.get("thread_id") is not None:
            found = self._index.thread(_id_field(configurable, "thread_id", "list"))
            threads = [found] if found else []
        else:
            threads = self._index.threads.values()
        namespace = configurable.get("checkpoint_ns")
        only_id = configurable.get("checkpoint_id")
        before_id = get_checkpoint_id(before) if before else None
        candidates = [
            (thread, entry)
            for thread in threads
            for entry in thread.checkpoints.values()
            if (namespace is None or entry.checkpoint_ns == namespace)
            and (only_id is None or entry.checkpoint_id == str(only_id))
            and (before_id is None or entry.checkpoint_id < str(before_id))
        ]
        candidates.sort(key=lambda pair: pair[1].checkpoint_id, reverse=True)
        return candidates

    def _matching_tuple(
        self, thread: ThreadIndex, entry: CheckpointEntry, wanted: Mapping[str, Any]
    ) -> CheckpointTuple | None:
        if wanted:
            metadata = self.serde.loads_typed(
                (entry.metadata.type, entry.metadata.data)
            )
            if any(metadata.get(k) != v for k, v in wanted.items()):
                return None
        return self._tuple(thread, entry)

    def _tuple(self, thread: ThreadIndex, entry: CheckpointEntry) -> CheckpointTuple:
        checkpoint: Checkpoint = self.serde.loads_typed(
            (entry.checkpoint.type, entry.checkpoint.data)
        )
        digests = [d for d in entry.channels.values() if d is not None]
        key = (entry.checkpoint_ns, entry.checkpoint_id)
        writes = sorted(thread.writes.get(key, {}).values(), key=lambda w: w.sort_key)
        digests += [w.value for w in writes if isinstance(w.value, str)]
        values = self._cache.values(self.serde, digests)
        checkpoint["channel_values"] = {
            channel: values[digest]
            for channel, digest in entry.channels.items()
            if digest is not None
        }
        config: RunnableConfig = {
            "configurable": {
                "thread_id": entry.thread_id,
                "checkpoint_ns": entry.checkpoint_ns,
                "checkpoint_id": entry.checkpoint_id,
            }
        }
        parent: RunnableConfig | None = None
        if entry.parent_id is not None:
            parent = {
                "configurable": {
                    "thread_id": entry.thread_id,
                    "checkpoint_ns": entry.checkpoint_ns,
                    "checkpoint_id": entry.parent_id,
                }
            }
        return CheckpointTuple(
            config=config,
            checkpoint=checkpoint,
            metadata=self.serde.loads_typed((entry.metadata.type, entry.metadata.data)),
            parent_config=parent,
            pending_writes=[
                (w.task_id, w.channel, self._write_value(w, values)) for w in writes
            ],
        )

    def _write_value(self, write: WriteEntry, values: Mapping[str, Any]) -> Any:
        if isinstance(write.value, str):
            return values[write.value]
        return self.serde.loads_typed((write.value.type, write.value.data))

    # ------------------------------------------------------------------ put

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Record ``checkpoint``: new channel values once each, then the checkpoint."""
        configurable = _configurable(config, "put")
        thread_id = _id_field(configurable, "thread_id", "put")
        namespace = _namespace(configurable)
        parent_id = configurable.get("checkpoint_id")
        checkpoint_id = str(checkpoint["id"])
        key = (namespace, checkpoint_id)

        def write() -> None:
            thread = self._index.thread(thread_id) or ThreadIndex()
            parent = (
                thread.checkpoints.get((namespace, str(parent_id)))
                if parent_id is not None
                else None
            )
            drafts = _Drafts(self._index)
            channels, versions = self._channels(
                checkpoint, new_versions, namespace, thread, parent, drafts
            )
            payload = {
                "thread_id": thread_id,
                "checkpoint_ns": namespace,
                "checkpoint_id": checkpoint_id,
                "parent_checkpoint_id": None if parent_id is None else str(parent_id),
                **serialized,
                "channels": channels,
                "versions": versions,
            }
            if _already_stored(thread.checkpoints.get(key), payload):
                return
            drafts.add(
                SCHEMA_CHECKPOINT,
                payload,
                parents=[parent.record_id] if parent else [],
                values=[d for d in channels.values() if d is not None],
            )
            owner = self._placement(thread_id, namespace, parent, checkpoint_id)
            guard = {thread_path(thread_id), owner}
            if parent is not None:
                guard.add(parent.owner)
            self._append({owner: drafts.drafts}, sorted(guard))

        with self._lock:
            serialized = self._serialized(config, checkpoint, metadata)
            if parent_id is not None:
                self._read_unless_known(thread_id, namespace, str(parent_id))
            self._guarded(write)
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": namespace,
                "checkpoint_id": checkpoint_id,
            }
        }

    def _serialized(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
    ) -> dict[str, object]:
        stored = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        stored["channel_values"] = {}
        meta = get_serializable_checkpoint_metadata(config, metadata)
        return {
            "checkpoint": _blob_json(self._cache.blob(self.serde, stored)),
            "metadata": _blob_json(self._cache.blob(self.serde, meta)),
            "summary": _summary(meta),
        }

    def _channels(
        self,
        checkpoint: Checkpoint,
        new_versions: ChannelVersions,
        namespace: str,
        thread: ThreadIndex,
        parent: CheckpointEntry | None,
        drafts: _Drafts,
    ) -> tuple[dict[str, str | None], dict[str, str]]:
        values = checkpoint.get("channel_values") or {}
        all_versions = {**checkpoint.get("channel_versions", {}), **new_versions}
        channels: dict[str, str | None] = {}
        versions: dict[str, str] = {}
        for channel, version in all_versions.items():
            key = version_key(version)
            if channel not in new_versions:
                known = thread.versions.get((namespace, channel, key), _MISSING)
                if known is not _MISSING:
                    channels[channel], versions[channel] = known, key  # type: ignore[assignment]
                    continue
                if channel not in values:
                    continue
            versions[channel] = key
            if channel not in values:
                channels[channel] = None
                continue
            base = parent.channels.get(channel) if parent else None
            channels[channel] = drafts.add_value(
                self._cache.encode(self.serde, values[channel], base)
            )
        return channels, versions

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

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Record each pending write of ``task_id`` (a repeated write is kept once)."""
        configurable = _configurable(config, "put_writes")
        thread_id = _id_field(configurable, "thread_id", "put_writes")
        namespace = _namespace(configurable)
        checkpoint_id = _id_field(configurable, "checkpoint_id", "put_writes")

        def write() -> None:
            thread = self._index.thread(thread_id) or ThreadIndex()
            entry = thread.checkpoints.get((namespace, checkpoint_id))
            held_now = {
                key: _write_form(w)
                for key, w in thread.writes.get((namespace, checkpoint_id), {}).items()
            }
            drafts = _Drafts(self._index)
            kept: builtins.list[tuple[dict[str, object], builtins.list[str]]] = []
            for position, (channel, value) in enumerate(writes):
                key = (str(task_id), WRITES_IDX_MAP.get(channel, position))
                if key in held_now and key[1] >= 0:
                    continue  # a regular write is kept once
                held, refs = self._write_json(value, drafts)
                form = (channel, task_path, held)
                if held_now.get(key) == form:
                    continue  # the same special write again
                held_now[key] = form
                kept.append(({"idx": key[1], "channel": channel, "value": held}, refs))
            head = {
                "thread_id": thread_id,
                "checkpoint_ns": namespace,
                "checkpoint_id": checkpoint_id,
                "task_id": str(task_id),
                "task_path": task_path,
            }
            parents = [entry.record_id] if entry else []
            for chunk in _write_chunks(kept, self.limits.chunk_bytes):
                refs = [r for _, chunk_refs in chunk for r in chunk_refs]
                if len(chunk) == 1:
                    payload = {**head, **chunk[0][0]}
                    drafts.add(SCHEMA_WRITE, payload, parents=parents, values=refs)
                else:
                    payload = {**head, "writes": [w for w, _ in chunk]}
                    drafts.add(SCHEMA_WRITES, payload, parents=parents, values=refs)
            main = namespace_path(thread_id, namespace)
            owner = entry.owner if entry else main
            # Writes of a checkpoint land on its path, or on the namespace's
            # main path when the writer did not know the checkpoint.
            guard = {thread_path(thread_id), owner, main}
            self._append({owner: drafts.drafts}, sorted(guard))

        with self._lock:
            self._read_unless_known(thread_id, namespace, checkpoint_id)
            self._guarded(write)

    def _write_json(
        self, value: Any, drafts: _Drafts
    ) -> tuple[dict[str, object], builtins.list[str]]:
        blob = self._cache.blob(self.serde, value)
        if len(blob.data) <= self.limits.inline_item_bytes:
            return _blob_json(blob), []
        digest = drafts.add_value(encode_blob(blob, self.limits))
        return {"ref": digest}, [digest]

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

    # ----------------------------------------------------------------- async

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async :meth:`get_tuple` (runs on a worker thread)."""
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # LangGraph's name
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async :meth:`list` (each tuple is built on a worker thread)."""
        items = self.list(config, filter=filter, before=before, limit=limit)
        while (item := await asyncio.to_thread(next, items, None)) is not None:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async :meth:`put` (runs on a worker thread)."""
        return await asyncio.to_thread(
            self.put, config, checkpoint, metadata, new_versions
        )

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Async :meth:`put_writes` (runs on a worker thread)."""
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """Async :meth:`delete_thread` (runs on a worker thread)."""
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def aerase_thread(self, thread_id: str, reason: str) -> tuple[str, ...]:
        """Async :meth:`erase_thread` (runs on a worker thread)."""
        return await asyncio.to_thread(self.erase_thread, thread_id, reason)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async :meth:`delete_for_runs` (runs on a worker thread)."""
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async :meth:`copy_thread` (runs on a worker thread)."""
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(
        self, thread_ids: Sequence[str], *, strategy: str = "keep_latest"
    ) -> None:
        """Async :meth:`prune` (runs on a worker thread)."""
        await asyncio.to_thread(lambda: self.prune(thread_ids, strategy=strategy))


_MISSING: Final = object()


def _already_stored(entry: CheckpointEntry | None, payload: Mapping[str, Any]) -> bool:
    """Whether a put repeats the visible checkpoint ``entry`` exactly."""
    return (
        entry is not None
        and entry.parent_id == payload["parent_checkpoint_id"]
        and _blob_json(entry.checkpoint) == payload["checkpoint"]
        and _blob_json(entry.metadata) == payload["metadata"]
        and dict(entry.channels) == payload["channels"]
        and dict(entry.versions) == payload["versions"]
    )


def _write_form(entry: WriteEntry) -> tuple[str, str, Mapping[str, object]]:
    """A held write as (channel, task path, stored value) for comparison."""
    value = entry.value
    held = {"ref": value} if isinstance(value, str) else _blob_json(value)
    return (entry.channel, entry.task_path, held)


def _write_chunks(
    kept: Sequence[tuple[dict[str, object], builtins.list[str]]], limit: int
) -> Iterator[Sequence[tuple[dict[str, object], builtins.list[str]]]]:
    """Split a call's writes into records of at most ``limit`` inline bytes."""
    start, size = 0, 0
    for n, (write, _) in enumerate(kept):
        value = write["value"]
        data = value.get("data", "") if isinstance(value, dict) else ""
        grown = size + len(str(data))
        if n > start and grown > limit:
            yield kept[start:n]
            start, grown = n, len(str(data))
        size = grown
    if start < len(kept):
        yield kept[start:]


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


def _summary(metadata: Mapping[str, Any]) -> dict[str, object]:
    """The metadata fields a trace reader wants to see without deserializing."""
    out: dict[str, object] = {}
    for key in ("source", "step", "run_id"):
        value = metadata.get(key)
        if isinstance(value, str) or (
            isinstance(value, int) and not isinstance(value, bool)
        ):
            out[key] = value
    return out
