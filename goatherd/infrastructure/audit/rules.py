"""The cross-checks ``verify`` and ``import`` share: what stored rows must agree on.

Each rule is pure: it takes the facts already read (from the tables or from
an export's lines) and returns what is wrong as plain sentences, so that
``verify`` and ``import`` refuse exactly the same things.

* A commit's **receipt** is recomputed from its path entries and records: its
  record ids, commit receipts, owner ordinal ranges and causal edges in log
  order, and its context receipts (one per non-empty group).
* A **context** id is recomputed from its content, its intent and the index of
  the group that created it; its content must match the witness of every
  record placed with it (the store derives that witness from the context).
* A **checkpoint blob** must match the ``checkpoint.created`` record that
  vouches for it: its scope, sequence, workspace state digest and whether it
  holds a snapshot.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from goatherd.domain.canonical import sha256_hex
from goatherd.domain.checkpoint import owner_of_checkpoint
from goatherd.domain.errors import DomainError
from goatherd.domain.events.checkpoint import (
    CheckpointCreated,
    CheckpointPruned,
    CheckpointRestored,
)
from goatherd.domain.events.output import OutputSealed
from goatherd.domain.identity import ROOT_WITNESS_SCHEMA_REF
from goatherd.domain.workspace import WorkspaceState
from goatherd.infrastructure.store.codec import storage_json

__all__ = [
    "BlobAddresses",
    "CONTEXT_GROUP_SEARCH",
    "DIFF_HOLDER",
    "LedgerRefs",
    "LoggedEntry",
    "SNAPSHOT_HOLDER",
    "blob_problems",
    "context_id_for",
    "context_problems",
    "is_hex_digest",
    "is_timestamp",
    "ledger_refs",
    "receipt_problems",
    "witness_kind_label",
]

CONTEXT_GROUP_SEARCH: Final = 64
"""How many group indices past its receipt slot a context id is searched at.

A context id digests the index of its group in the batch, and empty groups
(which get no context) are not retained, so the index is only known to be at
least the context's slot among the receipt's context receipts. Batches with
more than this many empty groups before a group are not produced by goatherd.
"""

_HEX64: Final = re.compile(r"[0-9a-f]{64}")
_TIMESTAMP: Final = re.compile(
    r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}(:?\d{2})?)?"
)
_U64: Final = 1 << 64


@dataclass(frozen=True, slots=True)
class LoggedEntry:
    """A path entry with a log position, with the parents of its record."""

    position: int
    path: str
    ordinal: int
    record_id: str
    context: str
    parents: tuple[str, ...]


def is_hex_digest(value: str) -> bool:
    """Whether ``value`` is a bare lowercase SHA-256 hex digest."""
    return _HEX64.fullmatch(value) is not None


def is_timestamp(value: str) -> bool:
    """Whether ``value`` is a timestamp as SQLite or PostgreSQL wrote it."""
    return _TIMESTAMP.fullmatch(value) is not None


def witness_kind_label(schema_ref: str) -> str:
    """Return the kind label the store gives a witness's entry."""
    return "witness_root" if schema_ref == ROOT_WITNESS_SCHEMA_REF else "witness"


def receipt_problems(
    intent_id: str,
    receipt: Mapping[str, Any],
    logged: Sequence[LoggedEntry],
    new_contexts: Iterable[str],
) -> list[str]:
    """Compare a stored receipt with the one its entries imply.

    Args:
        intent_id: the intent.
        receipt: the stored receipt object.
        logged: the intent's logged entries, in log order.
        new_contexts: the ids of the contexts this intent created.
    """
    problems: list[str] = []
    positions = [entry.position for entry in logged]
    if positions and positions != list(range(positions[0], positions[-1] + 1)):
        problems.append(f"its log positions {positions} are not one block")
    expected = _expected_receipt(intent_id, logged)
    for key, value in expected.items():
        if receipt.get(key) != value:
            problems.append(
                f"receipt {key} {_short(receipt.get(key))} but its "
                f"entries give {_short(value)}"
            )
    extra = sorted(set(receipt) - {*expected, "context_receipts"})
    if extra:
        problems.append(f"receipt has unknown fields {extra}")
    problems.extend(_context_receipt_problems(receipt, logged, new_contexts))
    return problems


def _expected_receipt(intent_id: str, logged: Sequence[LoggedEntry]) -> dict[str, Any]:
    ranges: dict[str, list[int]] = {}
    for entry in logged:
        first = ranges.get(entry.path, [entry.ordinal, entry.ordinal])[0]
        ranges[entry.path] = [first, entry.ordinal]
    return {
        "append_intent_id": intent_id,
        "fact_ids": [entry.record_id for entry in logged],
        "commit_receipts": [f"commit:{entry.position}" for entry in logged],
        "owner_ordinal_ranges": ranges,
        "causal_edges": [
            [parent, entry.record_id] for entry in logged for parent in entry.parents
        ],
    }


def _context_receipt_problems(
    receipt: Mapping[str, Any],
    logged: Sequence[LoggedEntry],
    new_contexts: Iterable[str],
) -> list[str]:
    stored = receipt.get("context_receipts")
    if not isinstance(stored, list) or not all(isinstance(c, str) for c in stored):
        return ["receipt context_receipts is not a list of context ids"]
    problems = []
    if _runs(stored) != _runs([entry.context for entry in logged]):
        problems.append(
            f"receipt context_receipts {_short(stored)} disagree with the contexts "
            "its entries were placed with"
        )
    missing = sorted(set(new_contexts) - set(stored))
    if missing:
        problems.append(f"it created contexts its receipt does not name: {missing}")
    return problems


def _runs(items: Sequence[str]) -> list[str]:
    return [item for i, item in enumerate(items) if i == 0 or items[i - 1] != item]


def context_id_for(intent_id: str, group_index: int, content: Mapping[str, Any]) -> str:
    """Return the id the store gives a new context of ``intent_id``'s group."""
    encoded = storage_json(dict(content), root="retained_context")
    return "context:" + sha256_hex(f"{intent_id}\0{group_index}\0{encoded}")[:32]


def context_problems(
    context_id: str,
    intent_id: str,
    content: Mapping[str, Any],
    receipt_slots: Sequence[int],
) -> list[str]:
    """Check a context id against its content and creating intent.

    Args:
        context_id: the stored id.
        intent_id: the intent the row says created it.
        content: the six content fields.
        receipt_slots: where the id appears in that intent's context receipts.
    """
    if not receipt_slots:
        return [f"context {context_id!r}: its intent {intent_id!r} does not name it"]
    low = min(receipt_slots)
    for index in range(low, low + CONTEXT_GROUP_SEARCH + len(receipt_slots)):
        if context_id_for(intent_id, index, content) == context_id:
            return []
    return [
        f"context {context_id!r}: its content and intent {intent_id!r} digest to "
        "another id (an edited context)"
    ]


def witness_context_mismatch(
    witness: Mapping[str, Any], content: Mapping[str, Any]
) -> str | None:
    """Return which field of a context disagrees with its record's witness."""
    pairs = {
        "capability_witness_refs": "authority_refs",
        "active_binding_refs": "active_binding_refs",
        "semantic_environment_refs": "semantic_environment_refs",
        "visibility_policy_refs": "visibility_policy_refs",
        "substrate_ref": "substrate_ref",
        "containment": "containment",
    }
    for name, witness_name in pairs.items():
        if content.get(name) != witness.get(witness_name):
            return name
    return None


def blob_problems(
    checkpoint_id: str,
    scope_id: str,
    seq: int,
    state: Mapping[str, Any],
    snapshot: bytes,
    created: Mapping[str, Any],
) -> list[str]:
    """Compare a checkpoint blob with the ``checkpoint.created`` record payload."""
    problems = []
    owner = owner_of_checkpoint(checkpoint_id)
    if scope_id != f"scope:{owner}":
        problems.append(f"scope_id {scope_id!r} is not the scope of {checkpoint_id!r}")
    unsigned = seq + _U64 if seq < 0 else seq
    if not owner or checkpoint_id != f"cp:{owner}:{unsigned}":
        problems.append(f"seq {unsigned} is not the sequence of {checkpoint_id!r}")
    try:
        workspace = WorkspaceState.from_json(state)
        digest = workspace.digest()
    except (DomainError, TypeError, ValueError) as exc:
        return [*problems, f"its workspace state is not valid: {exc}"]
    if digest != created.get("state_digest"):
        problems.append(
            "its workspace state digests to "
            f"{digest}, the record says {created.get('state_digest')}"
        )
    if (workspace.backend, workspace.revision) != (
        created.get("backend"),
        created.get("revision"),
    ):
        problems.append("its backend or revision disagrees with the record")
    if bool(snapshot) != created.get("has_snapshot"):
        problems.append(
            f"it holds {len(snapshot)} snapshot bytes, the record says "
            f"has_snapshot={created.get('has_snapshot')}"
        )
    return problems


@dataclass(frozen=True, slots=True)
class LedgerRefs:
    """What a materialization ledger receipt says about the trace."""

    targets: tuple[str, ...]
    produced: tuple[str, ...]
    substrate_ref: str


def ledger_refs(receipt: Mapping[str, Any]) -> LedgerRefs:
    """Read the trace references of a ledger receipt (absent fields are empty).

    The ledger is ``materialize``'s idempotency cache and its receipt's other
    fields are that command's business; the store accepts any object there.

    Raises:
        ValueError: a reference field of the wrong type.
    """
    lists = []
    for key in ("target_record_ids", "produced_record_ids"):
        value = receipt.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"receipt {key} is not a list of record ids")
        lists.append(tuple(value))
    substrate = receipt.get("substrate_ref", "")
    if not isinstance(substrate, str):
        raise ValueError("receipt substrate_ref is not text")
    return LedgerRefs(lists[0], lists[1], substrate)


SNAPSHOT_HOLDER: Final = "#snapshot"
DIFF_HOLDER: Final = "#diff"


@dataclass
class BlobAddresses:
    """The blob each checkpoint and output record names, and what was released.

    Fed with the payloads of ``checkpoint.created``, ``checkpoint.restored``,
    ``checkpoint.pruned`` and ``run_output.sealed`` records in log order. A
    restore names the snapshot digest it releases (ADR 0056), a prune releases
    the rest: neither holder must still hold its bytes.
    """

    snapshots: dict[str, str] = field(default_factory=dict)
    diffs: dict[str, str] = field(default_factory=dict)
    pruned: set[str] = field(default_factory=set)
    released: dict[str, set[str]] = field(default_factory=dict)

    def note(self, schema: str, payload: Mapping[str, Any]) -> None:
        """Take in one runtime record's payload."""
        if schema == CheckpointCreated.SCHEMA:
            digest = payload.get("snapshot_digest")
            if isinstance(digest, str) and digest:
                self.snapshots[str(payload.get("checkpoint_id"))] = digest
        elif schema == OutputSealed.SCHEMA:
            digest = payload.get("diff_blob")
            if isinstance(digest, str) and digest:
                self.diffs[str(payload.get("output_id"))] = digest
        elif schema == CheckpointPruned.SCHEMA:
            self.pruned.add(str(payload.get("checkpoint_id")))
        elif schema == CheckpointRestored.SCHEMA:
            digests = payload.get("released")
            if isinstance(digests, list):
                gone = self.released.setdefault(
                    str(payload.get("checkpoint_id")), set()
                )
                gone.update(d for d in digests if isinstance(d, str))

    def live(self) -> set[str]:
        """The addresses whose bytes a reader may still ask for."""
        return set(self.holders().values())

    def holders(self) -> dict[str, str]:
        """The holder each live address must have, and the address it holds."""
        out = {
            cp + SNAPSHOT_HOLDER: d
            for cp, d in self.snapshots.items()
            if cp not in self.pruned and d not in self.released.get(cp, ())
        }
        out.update({output + DIFF_HOLDER: d for output, d in self.diffs.items()})
        return out

    def holder_problem(self, holder: str, digest: str) -> str | None:
        """Say what is wrong with ``holder`` holding ``digest`` (``None``: fine).

        A holder no record names yet is fine: a crash between the bytes and
        their record leaves one, and the retry under the same sequence records
        the same bytes.
        """
        if holder.endswith(SNAPSHOT_HOLDER):
            named = self.snapshots.get(holder.removesuffix(SNAPSHOT_HOLDER))
        elif holder.endswith(DIFF_HOLDER):
            named = self.diffs.get(holder.removesuffix(DIFF_HOLDER))
        else:
            return f"blob holder {holder!r} is no snapshot or diff holder"
        if named is not None and named != digest:
            return f"blob holder {holder!r} holds {digest}, the trace names {named}"
        return None


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
