"""The domain's exceptions: one small, flat hierarchy under :class:`DomainError`.

Hierarchy::

    GoatherdError                    root of every exception goatherd raises on purpose
      DomainError                    a rule of the pure model was broken
        CanonicalEncodingError       a value is not plain, canonical JSON (has ``path``)
          CanonicalTypeError         ... because of a type (also a ``TypeError``)
          CanonicalValueError        ... because of a value (also a ``ValueError``)
        RecordInputError             a record/witness canonical input breaks an ABI rule
                                     (also a ``ValueError``)
        BatchShapeError              an append batch or cut spec has a bad shape
                                     (also a ``ValueError``)
        ReadRequestError             a read names an unknown mode filter, visibility
                                     profile or closure policy (also a ``ValueError``)
        TraceStoreError              a trace-store law was broken (a ``RuntimeError``)
          ContextTypeError           a write given no write context (a ``TypeError``)
          AppendRefusedError         ``append`` refused its batch; nothing written
            BatchRefusedError        ... a bad shape (also a ``BatchShapeError``)
            RecordRefusedError       ... a bad record input (a ``RecordInputError``)
            PayloadRefusedError      ... a value that is not canonical JSON (also a
                                     ``CanonicalEncodingError``; its two kinds below)
              PayloadTypeRefusedError   (also a ``CanonicalTypeError``)
              PayloadValueRefusedError  (also a ``CanonicalValueError``)
            RuntimeRecordRefusedError  a runtime record its typed event refuses
            UnheldBlobError          a runtime record naming bytes no blob holder holds
          UnknownFactError           an unknown record, parent or path entry
          UnknownFrontierError       an unknown frontier (cut) id
          AppendIntentConflictError  an intent replayed with different content
          OrdinalConflictError       an owner head moved (optimistic concurrency)
          CheckpointBlobTooLargeError  a checkpoint snapshot over the store's limit
          ReadOnlyStoreError         a write on a read-only store
          NotATraceStoreError        a missing, empty, corrupt or foreign database
      StoreUnavailableError          an outage: locked, full, read-only file, lost link
                                     (a ``RuntimeError``; raises through Results)

The store's errors live here, in the domain, so that every layer can catch them
without importing the infrastructure. Their messages are the reference's
messages (kernel-spec section 15). Other layers derive their own roots from
:class:`GoatherdError` so a caller can catch everything goatherd raises
deliberately with one clause.
"""

from __future__ import annotations

__all__ = [
    "AppendIntentConflict",
    "AppendIntentConflictError",
    "AppendRefusedError",
    "BatchRefusedError",
    "BatchShapeError",
    "CanonicalEncodingError",
    "CanonicalTypeError",
    "CanonicalValueError",
    "CheckpointBlobTooLargeError",
    "ContextTypeError",
    "DomainError",
    "GoatherdError",
    "NotATraceStoreError",
    "OrdinalConflictError",
    "PayloadRefusedError",
    "PayloadTypeRefusedError",
    "PayloadValueRefusedError",
    "ReadOnlyStoreError",
    "ReadRequestError",
    "RecordInputError",
    "RecordRefusedError",
    "RedactionRefusedError",
    "RuntimeRecordRefusedError",
    "StoreUnavailableError",
    "TraceStoreError",
    "UnheldBlobError",
    "UnknownFact",
    "UnknownFactError",
    "UnknownFrontierError",
]


class GoatherdError(Exception):
    """Root of every exception goatherd raises deliberately."""


class DomainError(GoatherdError):
    """A rule of the pure domain model was broken."""


class CanonicalEncodingError(DomainError):
    """A value cannot be encoded as canonical JSON.

    Attributes:
        path: where in the value the problem sits, e.g. ``payload.args[2]``.
        reason: what is wrong there.
    """

    def __init__(self, path: str, reason: str) -> None:
        """Record the offending ``path`` and the ``reason``."""
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class CanonicalTypeError(CanonicalEncodingError, TypeError):
    """Raised when a value or key has a type JSON cannot hold (set, bytes, object)."""


class CanonicalValueError(CanonicalEncodingError, ValueError):
    """Raised for NaN, infinities, lone surrogates and cyclic structures."""


class RecordInputError(DomainError, ValueError):
    """Raised when a record or witness canonical input breaks an ABI rule.

    The message is the reference's message (for example ``schema_ref is
    required``), so it stays recognisable across implementations.
    """


class BatchShapeError(DomainError, ValueError):
    """Raised when an append batch or a cut spec has a bad shape.

    Examples: an empty intent id, a non-atomic batch, an empty owner, an
    unknown mode, a duplicate append-local id or causal parent, an empty
    schema ref, a group targeting the witness owner path. The message is the
    reference's message.
    """


class ReadRequestError(DomainError, ValueError):
    """Raised when a read names an unknown mode filter, profile or closure policy."""


class TraceStoreError(DomainError, RuntimeError):
    """Raised when a trace-store law is broken (the reference's base store error).

    Examples: a wrong operation context, an untrusted write, an unknown context
    id or local causal ref, a record or witness id clash, a corrupt row, a
    tampered frontier index.
    """


class ContextTypeError(TraceStoreError, TypeError):
    """Raised when a call's context is not a context for that operation at all.

    Examples: ``None``, a string, or a :class:`ReadContext` passed to a write.
    A :class:`TraceStoreError` like every other refusal of the store, and a
    :class:`TypeError`, as the reference raises.
    """


class RedactionRefusedError(TraceStoreError):
    """Raised when ``redact`` may not erase a record it was asked to erase.

    Examples: a witness, a redaction record, a record a runtime fold decodes,
    a record another redaction already erased, an empty or oversized request.
    """


class AppendRefusedError(TraceStoreError):
    """Raised when ``append`` refuses the batch it was handed; nothing is written.

    The family of the door's refusals of the batch itself (every other store
    law keeps its own :class:`TraceStoreError` subclass). The subclasses that
    name a malformed batch also derive from the domain error the check found
    (:class:`BatchShapeError`, :class:`RecordInputError`,
    :class:`CanonicalEncodingError`), so either clause catches them.
    """


class BatchRefusedError(AppendRefusedError, BatchShapeError):
    """Raised when ``append`` refuses a batch of a bad shape or of wrong types.

    Examples: a batch that is not an ``AppendBatch``, a draft that is not a
    ``RecordDraft``, an empty or oversized identifier, an unknown mode, a
    duplicate append-local id. The message names the field.
    """


class RecordRefusedError(AppendRefusedError, RecordInputError):
    """Raised when ``append`` refuses a draft whose record input breaks a rule."""


class PayloadRefusedError(AppendRefusedError, CanonicalEncodingError):
    """Raised when ``append`` refuses a payload that is not plain canonical JSON.

    Attributes:
        path: where in the payload the problem sits, e.g. ``payload.args[2]``.
        reason: what is wrong there.
    """


class PayloadTypeRefusedError(PayloadRefusedError, CanonicalTypeError):
    """Raised for a payload value or key of a type JSON cannot hold."""


class PayloadValueRefusedError(PayloadRefusedError, CanonicalValueError):
    """Raised for a payload holding NaN, an infinity, a lone surrogate or a cycle."""


class UnheldBlobError(AppendRefusedError):
    """Raised when a runtime record names bytes no blob holder of the trace holds.

    A ``checkpoint.created`` record's snapshot and a ``run_output.sealed``
    record's diff are put in the blob store (under the holder
    ``<checkpoint id>#snapshot`` or ``<output id>#diff``) before the record
    naming them is appended; ``verify`` names a record whose bytes are not
    there, so the door refuses it (ADR 0088).

    Attributes:
        holder: the holder that should hold the bytes.
        digest: the address the record names.
    """

    def __init__(self, where: str, schema_ref: str, holder: str, digest: str) -> None:
        """Name the draft, its schema, the holder and the address."""
        super().__init__(
            f"cannot append {where} ({schema_ref}): it names blob {digest}, "
            f"which blob holder {holder!r} does not hold (put the bytes first)"
        )
        self.holder = holder
        self.digest = digest


class RuntimeRecordRefusedError(AppendRefusedError, ValueError):
    """Raised when an append carries a runtime record its typed event refuses.

    A record of a schema the runtime folds must decode to its event (its mode,
    every payload field's type and value) and agree with itself (a digest it
    can recompute from its own fields). The message names the draft, the
    schema and the field; nothing of the batch is written.

    Attributes:
        schema_ref: the refused record's schema.
        reason: what does not fit (names the payload field).
    """

    def __init__(self, where: str, owner: str, schema_ref: str, reason: str) -> None:
        """Name the draft, its path, its schema and what does not fit."""
        super().__init__(
            f"cannot append {where} ({schema_ref}) to {owner!r}: the runtime "
            f"cannot fold it: {reason}"
        )
        self.schema_ref = schema_ref
        self.reason = reason


class UnknownFactError(TraceStoreError):
    """Raised for an unknown record id, causal parent or path entry."""


class UnknownFrontierError(TraceStoreError):
    """Raised by ``read_owner_cutoff`` for a frontier id with no index row.

    Attributes:
        frontier_id: the id that was looked up.
    """

    def __init__(self, frontier_id: str) -> None:
        """Name the unknown ``frontier_id``."""
        super().__init__(f"unknown frontier id: {frontier_id}")
        self.frontier_id = frontier_id


class AppendIntentConflictError(TraceStoreError):
    """Raised when an append or materialize intent is replayed with other content."""


class OrdinalConflictError(TraceStoreError):
    """Raised when an owner's stored head differs from the caller's expectation.

    Retryable: reload the owner and decide again. Nothing was written.

    Attributes:
        owner: the owner path.
        expected: the next ordinal the caller expected.
        actual: the owner's stored next ordinal.
    """

    def __init__(self, owner: str, expected: int, actual: int) -> None:
        """Name the ``owner`` and both heads."""
        super().__init__(
            f"owner {owner!r} is at next ordinal {actual}, expected {expected}"
        )
        self.owner = owner
        self.expected = expected
        self.actual = actual


class CheckpointBlobTooLargeError(TraceStoreError):
    """Raised when a checkpoint snapshot exceeds the store's blob limit.

    Attributes:
        checkpoint_id: the checkpoint whose snapshot was refused.
        size: the snapshot's size in bytes.
        limit: the store's limit in bytes.
    """

    def __init__(self, checkpoint_id: str, size: int, limit: int) -> None:
        """Name the checkpoint, its size and the limit."""
        super().__init__(
            f"checkpoint {checkpoint_id}: snapshot is {size} bytes, over the "
            f"store's {limit}-byte checkpoint blob limit; store large state "
            "externally and pass a reference instead"
        )
        self.checkpoint_id = checkpoint_id
        self.size = size
        self.limit = limit


class ReadOnlyStoreError(TraceStoreError):
    """Raised by every write method of a store opened read-only."""


class NotATraceStoreError(TraceStoreError):
    """Raised when a database is missing, empty, corrupt or not a trace store."""


class StoreUnavailableError(GoatherdError, RuntimeError):
    """Raised when the database could not do its part: an outage, not a rule.

    Deliberately not a :class:`TraceStoreError` (nor a :class:`DomainError`):
    application commands turn broken rules into failure values, but an outage
    raises through them (style guide section 5).

    Examples: SQLite locked by another writer beyond the busy timeout, a full
    disk, a read-only file, a lost PostgreSQL connection. Nothing was written
    by the failed call; retrying the same intent later is safe. The message
    carries the database's own reason.
    """


UnknownFact = UnknownFactError
AppendIntentConflict = AppendIntentConflictError
