"""The lines of an export file, read and checked before their content is proven.

:func:`read_export_lines` yields a binary stream's lines within the per-line
limit; the helpers here decode one line (UTF-8, at most ``max_line_bytes``),
parse it as one JSON object without duplicate keys, refuse keys an export
never writes, and prove the header and end lines (format, ABI, line count,
SHA-256, head). :class:`ImportRejectedError` names the line at fault. It
imports the domain's ABI version and error base only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, Any, Final

from goatherd.domain.canonical import ABI_VERSION
from goatherd.domain.errors import GoatherdError

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "EXPORT_FORMAT",
    "ImportRejectedError",
    "read_export_lines",
]

EXPORT_FORMAT: Final = "goatherd.trace.jsonl.v1"
DEFAULT_MAX_LINE_BYTES: Final = 64 << 20
"""The longest export line import reads (64 MiB); longer lines are refused."""


class ImportRejectedError(GoatherdError, ValueError):
    """Raised when an export file cannot be proven; nothing was written.

    Attributes:
        line: the 1-based line number at fault (0 for the file as a whole).
        reason: what is wrong there.
    """

    def __init__(self, line: int, reason: str) -> None:
        """Record the offending ``line`` and the ``reason``."""
        where = f"line {line}" if line else "file"
        super().__init__(f"{where}: {reason}")
        self.line = line
        self.reason = reason


def read_export_lines(
    stream: IO[bytes], max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> Iterator[bytes]:
    """Yield the lines of a binary export stream, never reading past the limit.

    Raises:
        ImportRejectedError: a line longer than ``max_line_bytes``.
    """
    number = 0
    while True:
        line = stream.readline(max_line_bytes + 1)
        if not line:
            return
        number += 1
        if len(line) > max_line_bytes:
            raise ImportRejectedError(number, _too_long(max_line_bytes))
        yield line


def _too_long(limit: int) -> str:
    return (
        f"the line is longer than {limit} bytes (the import's per-line limit; "
        "raise it with --max-line-bytes)"
    )


def _decode(number: int, raw: str | bytes, limit: int) -> tuple[str, bytes]:
    if isinstance(raw, str):
        try:
            data = raw.encode("utf-8")
        except UnicodeEncodeError:
            raise ImportRejectedError(number, "the line is not valid UTF-8") from None
    else:
        data = raw
    if len(data) > limit:
        raise ImportRejectedError(number, _too_long(limit))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ImportRejectedError(number, "the line is not valid UTF-8") from None
    return text, data if data.endswith(b"\n") else data + b"\n"


class _DuplicateKeyError(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKeyError(
                    f"duplicate key {key!r} (a reader keeping the first would see "
                    "other content than one keeping the last)"
                )
            seen.add(key)
    return obj


# The keys each kind of line (and each object inside an intent line) may
# carry: what export writes. A key outside these is refused, never dropped.
_CONTEXT_KEYS: Final = frozenset(
    {
        "context_id",
        "active_binding_refs",
        "capability_witness_refs",
        "semantic_environment_refs",
        "visibility_policy_refs",
        "substrate_ref",
        "containment",
    }
)
_LINE_KEYS: Final[dict[str, frozenset[str]]] = {
    "header": frozenset({"type", "format", "abi_version", "schema_version", "records"}),
    "end": frozenset({"type", "lines", "sha256", "head"}),
    "intent": frozenset(
        {
            "type",
            "append_intent_id",
            "batch_digest",
            "committed_at",
            "receipt",
            "contexts",
            "records",
            "entries",
            "frontiers",
        }
    ),
    "side": frozenset({"type", "table", "row_key", "row_digest"}),
    "materialization": frozenset(
        {"type", "materialize_intent_id", "request_digest", "receipt", "completed_at"}
    ),
    "checkpoint": frozenset(
        {
            "type",
            "checkpoint_id",
            "scope_id",
            "seq",
            "state",
            "snapshot_b64",
            "created_at_unixnano",
        }
    ),
    "blob": frozenset({"type", "digest", "data_b64", "holders"}),
}
_INTENT_PARTS: Final[dict[str, frozenset[str]]] = {
    "contexts": _CONTEXT_KEYS,
    "records": frozenset(
        {
            "record_id",
            "schema_ref",
            "mode",
            "witness_ref",
            "caused_by",
            "payload",
            "redacted_by",
        }
    ),
    "entries": frozenset(
        {
            "path_ref",
            "path_ordinal",
            "record_id",
            "retained_context_ref",
            "kind_label",
            "commit_receipt",
            "position",
        }
    ),
    "frontiers": frozenset(
        {
            "frontier_id",
            "target_trace_owner_id",
            "through_fact_id",
            "through_owner_ordinal",
            "publisher_trace_owner_id",
            "created_by_fact_id",
        }
    ),
}


def _refuse_unknown_keys(number: int, obj: dict[str, Any]) -> None:
    kind = obj.get("type")
    allowed = _LINE_KEYS.get(kind) if isinstance(kind, str) else None
    if allowed is None:
        return  # the line's own check names an unknown type
    _only(number, obj, allowed, f"a {kind} line")
    if kind != "intent":
        return
    for part, keys in _INTENT_PARTS.items():
        items = obj.get(part)
        if not isinstance(items, list):
            continue
        for index, item in enumerate(items):
            if isinstance(item, dict):
                _only(number, item, keys, f"{part}[{index}]")


def _only(number: int, obj: dict[str, Any], allowed: frozenset[str], what: str) -> None:
    unknown = sorted(set(obj) - allowed)
    if unknown:
        shown = ", ".join(repr(key[:64]) for key in unknown[:3])
        more = f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
        raise ImportRejectedError(
            number,
            f"{what} has unknown key(s) {shown}{more} (an export writes none: "
            "nothing is dropped silently)",
        )


def _parse(number: int, text: str) -> dict[str, Any]:
    try:
        obj = json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKeyError as exc:
        raise ImportRejectedError(number, str(exc)) from None
    except RecursionError:
        raise ImportRejectedError(
            number, "the line nests JSON deeper than the parser allows"
        ) from None
    except ValueError as exc:
        raise ImportRejectedError(number, f"not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise ImportRejectedError(number, "a line must be a JSON object")
    _refuse_unknown_keys(number, obj)
    return obj


def _prove_header(number: int, obj: dict[str, Any]) -> None:
    if obj.get("type") != "header" or obj.get("format") != EXPORT_FORMAT:
        raise ImportRejectedError(number, f"not a {EXPORT_FORMAT} export (bad header)")
    if obj.get("abi_version") != ABI_VERSION:
        raise ImportRejectedError(
            number, f"ABI {obj.get('abi_version')!r} is not {ABI_VERSION}"
        )


def _prove_end(
    number: int, obj: dict[str, Any], digest: Any, accept_headless: bool
) -> None:
    if obj.get("lines") != number - 1:
        raise ImportRejectedError(
            number, f"end line counts {obj.get('lines')} lines, found {number - 1}"
        )
    if obj.get("sha256") != digest.hexdigest():
        raise ImportRejectedError(
            number, "the lines do not match the end line's SHA-256"
        )
    head = obj.get("head")
    if head is None and accept_headless:
        return
    if not isinstance(head, str) or not head:
        # Without it the chain goes unchecked, and any field only the chain
        # covers could be edited with nothing but the file's SHA-256 redone.
        raise ImportRejectedError(
            number,
            "the end line names no head (every export writes one; for an export "
            "made before heads were written, --accept-headless imports it "
            "without the chain check)",
        )
