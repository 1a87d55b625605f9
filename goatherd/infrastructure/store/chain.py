r"""The commit chain: a head digest over everything each commit wrote (ADR 0038).

Every committed append intent has a commit number (``commit_seq``, 0-based,
in commit order), a **commit digest** over what that commit wrote, and a
**head digest** that chains it to the head before it::

    commit_digest = sha256(storage JSON of the commit object)
    head(k)       = sha256("goatherd.trace.chain.v1\\n" + head(k-1) + "\\n"
                           + commit_digest(k))
    head(-1)      = 64 zeros

The commit object holds ``commit_seq``; the intent's id, batch digest,
stored receipt text and commit time; the contexts it created (every column);
its path entries (path, ordinal, record id, context, kind label, commit
receipt, position); the metadata of every record those entries place (id,
digest, schema, mode, witness, parents), never the payload bytes, so a later
recorded redaction of a payload leaves the chain verifiable (the record id
still pins the payload); and the frontier index rows it wrote. The head is
therefore a fingerprint of the whole trace: any rewrite, reordering or
truncation of what a reader shows or trusts changes it (the rebuildable edge
rows and counters are not in it; ``verify`` checks those against what is).

Since schema v3 a write to a side table (the materialization ledger, the
checkpoint blob table) is a step of the same chain (ADR 0064): it takes the
next commit number, and its commit digest covers ``{"side": table,
"commit_seq", "row_key", "row_digest"}`` (the ``side`` key sets it apart
from an append commit's object); ``row_digest`` is :func:`row_digest` of the
row it left, ``null`` for a delete.

A **hole step** (table :data:`HOLE_TABLE`, ADR 0076) is the side step that
takes a commit number a PostgreSQL writer drew and never committed (it died,
or its backend was terminated, between drawing its numbers and ``COMMIT``).
:func:`seal` records one for every such number below the safe high-water
mark; its row key names the log positions that writer drew and abandoned
(:func:`hole_key`), its row digest is ``null``. ``verify``, ``export`` and
``import`` accept a gap in the positions or commit numbers that hole steps
record, and nothing else.

``meta.head`` holds ``<commits> <head digest>`` after the last linked commit.
On SQLite every commit links itself inside its transaction. PostgreSQL
writers commit in any order, so each stores its commit digest and
:func:`seal` links the commits below the safe high-water mark later (any
writer may; reading the head seals first). Traces written before the chain
existed are sealed the same way when a writer opens them.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import groupby
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]
from typing import Any, Final

__all__ = [
    "ChainProblem",
    "ChainReport",
    "CommitContent",
    "FrontierRow",
    "GENESIS",
    "HOLE_TABLE",
    "SideContent",
    "TraceHead",
    "commit_digest",
    "commit_time",
    "format_head",
    "hole_key",
    "link",
    "parse_head",
    "parse_hole_key",
    "row_digest",
    "side_digest",
    "step_digest",
]

GENESIS: Final = "0" * 64
_PREFIX: Final = "goatherd.trace.chain.v1\n"
_ENCODE: Final = c_make_encoder(
    None, None, encode_basestring_ascii, None, ":", ",", True, False, False
)

ContextRow = tuple[str, str, str, str, str, str, str]
EntryRow = tuple[str, int, str, str, str, str, int | None]
RecordMeta = tuple[str, str, str, str, str, tuple[str, ...]]
FrontierRow = tuple[str, str, str, int, str | None, str]


@dataclass(frozen=True, slots=True)
class TraceHead:
    """A trace's head: how many commits are chained, and the digest after them.

    ``str(head)`` is ``<commits>:sha256:<64 hex>``, the form to note down
    outside the trace and to hand to ``verify --expect-head``.
    """

    commits: int
    digest: str

    def __str__(self) -> str:
        return format_head(self.commits, self.digest)


@dataclass(frozen=True, slots=True)
class ChainProblem:
    """One commit whose stored chain disagrees with what the trace holds."""

    commit_seq: int | None
    append_intent_id: str | None
    detail: str
    side: str | None = None
    """A side step's ``<table> <row key>`` (``None``: an append commit)."""

    def __str__(self) -> str:
        where = f"commit {self.commit_seq}" if self.commit_seq is not None else "chain"
        if self.append_intent_id is not None:
            where += f" (intent {self.append_intent_id!r})"
        if self.side is not None:
            where += f" (side write {self.side})"
        return f"{where}: {self.detail}"


@dataclass(frozen=True, slots=True)
class ChainReport:
    """The chain recomputed from the rows, against what is stored.

    Attributes:
        head: the head recomputed over every commit.
        stored: the head ``meta`` states (``None``: none stored).
        problems: every disagreement, in commit order.
        expected: ``None`` when no head was expected; else whether the
            expected head is a head of this chain (the trace extends it).
        unsealed: commits whose links are not stored yet (PostgreSQL writers
            still below the high-water mark, or a trace never sealed).
    """

    head: TraceHead
    stored: TraceHead | None
    problems: tuple[ChainProblem, ...] = field(default=())
    expected: bool | None = None
    unsealed: int = 0

    @property
    def ok(self) -> bool:
        """Whether the stored chain matches the rows (and any expected head)."""
        return not self.problems and self.expected is not False


@dataclass(frozen=True, slots=True)
class CommitContent:
    """What one commit wrote, in the form its digest covers."""

    commit_seq: int
    append_intent_id: str
    batch_digest: str
    receipt_json: str
    committed_at: str
    contexts: Sequence[ContextRow] = ()
    entries: Sequence[EntryRow] = ()
    records: Sequence[RecordMeta] = ()
    frontiers: Sequence[FrontierRow] = ()


@dataclass(frozen=True, slots=True)
class SideContent:
    """One side step: which side-table row it wrote, and the digest it left."""

    commit_seq: int
    table_name: str
    row_key: str
    row_digest: str | None

    @property
    def label(self) -> str:
        """``<table> '<row key>'``, as problems name the step."""
        return f"{self.table_name} {self.row_key!r}"


HOLE_TABLE: Final = "goatherd:hole"
"""The pseudo table of hole steps: commit numbers a dead writer abandoned."""

_NO_POSITIONS: Final = "-"


def hole_key(positions: tuple[int, int] | None) -> str:
    """Return a hole step's row key: ``<first>-<last>`` positions, or ``-``."""
    if positions is None:
        return _NO_POSITIONS
    first, last = positions
    return f"{first}-{last}"


def parse_hole_key(key: str) -> tuple[int, int] | None:
    """Return the positions ``(first, last)`` a hole step records, or ``None``.

    Raises:
        ValueError: a key that is not ``-`` or ``<first>-<last>`` with
            ``0 <= first <= last`` (written in plain decimal digits).
    """
    if key == _NO_POSITIONS:
        return None
    first, sep, last = key.partition("-")
    if not (
        sep
        and first.isascii()
        and first.isdigit()
        and last.isascii()
        and last.isdigit()
        and len(key) <= 41
        and str(int(first)) == first
        and str(int(last)) == last
        and int(first) <= int(last)
    ):
        raise ValueError(
            f"hole key {key[:60]!r} is not '-' or '<first>-<last>' positions"
        )
    return int(first), int(last)


def side_digest(content: SideContent) -> str:
    """Return the bare SHA-256 hex of a side step's canonical storage JSON.

    Raises:
        TypeError: a value of the wrong type (a tampered row).
    """
    obj = {
        "side": content.table_name,
        "commit_seq": content.commit_seq,
        "row_key": content.row_key,
        "row_digest": content.row_digest,
    }
    _check(obj)
    return hashlib.sha256("".join(_ENCODE(obj, 0)).encode("ascii")).hexdigest()


def step_digest(content: CommitContent | SideContent) -> str:
    """Return the commit digest of either kind of step."""
    if isinstance(content, SideContent):
        return side_digest(content)
    return commit_digest(content)


def row_digest(columns: dict[str, object]) -> str:
    """Return ``sha256:<hex>`` of a side-table row's canonical storage JSON.

    ``columns`` holds every column by name, text or integers; byte columns
    are given as the ``sha256:<hex>`` of their bytes.
    """
    _check(columns)
    text = "".join(_ENCODE(columns, 0))
    return "sha256:" + hashlib.sha256(text.encode("ascii")).hexdigest()


def commit_digest(content: CommitContent, *, checked: bool = True) -> str:
    """Return the bare SHA-256 hex of a commit's canonical storage JSON.

    ``checked=False``: the values come from an append the store just checked
    (every one text or an integer), so the per-value type walk is skipped.

    Raises:
        TypeError, ValueError: a value that is not text or an integer (a
            tampered row); the caller reports it.
    """
    records = sorted({r[0]: r for r in content.records}.values())
    obj = {
        "commit_seq": content.commit_seq,
        "append_intent_id": content.append_intent_id,
        "batch_digest": content.batch_digest,
        "receipt_json": content.receipt_json,
        "committed_at": content.committed_at,
        "contexts": sorted(content.contexts),
        "entries": sorted(content.entries, key=_entry_key),
        "records": [[*r[:5], list(r[5])] for r in records],
        "frontiers": sorted(content.frontiers),
    }
    if checked:
        _check(obj)
    text = "".join(_ENCODE(obj, 0))
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _entry_key(entry: EntryRow) -> tuple[str, int]:
    return entry[0], entry[1]


def _check(value: object) -> None:
    # Every leaf must be text, an integer or null: a blob or a float in a
    # tampered row would otherwise encode and digest quietly.
    if isinstance(value, dict):
        for item in value.values():
            _check(item)
    elif isinstance(value, list | tuple):
        for item in value:
            _check(item)
    elif not (value is None or isinstance(value, str) or type(value) is int):
        raise TypeError(f"{type(value).__name__} value {value!r:.40} in a chained row")


def commit_time(*, postgres: bool) -> str:
    """Return now (UTC) as the database's ``CURRENT_TIMESTAMP`` text would read.

    SQLite: ``YYYY-MM-DD HH:MM:SS``; PostgreSQL: with microseconds and
    ``+00``. The writer sets ``committed_at`` itself, not through the column
    default, because the commit digest covers it.
    """
    if postgres:
        return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f+00")
    # Whole seconds: the text changes once a second, so it is formatted once
    # a second (strftime was a tenth of an append's Python time).
    global _SECOND_TEXT
    second = int(time.time())
    cached = _SECOND_TEXT
    if cached[0] != second:
        cached = _SECOND_TEXT = (
            second,
            time.strftime(_SECOND_FORMAT, time.gmtime(second)),
        )
    return cached[1]


_SECOND_FORMAT: Final = "%Y-%m-%d %H:%M:%S"
_SECOND_TEXT: tuple[int, str] = (-1, "")


def link(previous: str, digest: str) -> str:
    """Return the head after a commit with ``digest`` on top of ``previous``."""
    return hashlib.sha256(f"{_PREFIX}{previous}\n{digest}".encode("ascii")).hexdigest()


def format_head(commits: int, digest: str) -> str:
    """Return the printable head: ``<commits>:sha256:<hex>``."""
    return f"{commits}:sha256:{digest}"


def parse_head(text: str) -> TraceHead:
    """Parse ``<commits>:sha256:<hex>`` (or ``sha256:<hex>``, or bare hex, commits 0).

    Raises:
        ValueError: not a head (a one-line message naming what is wrong).
    """
    value = text.strip()
    commits = -1
    count, sep, rest = value.partition(":")
    if sep and count.isdigit():
        commits, value = int(count), rest
    value = value.removeprefix("sha256:")
    if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        raise ValueError(
            f"not a trace head: {text[:80]!r} "
            "(want <commits>:sha256:<64 lowercase hex>)"
        )
    return TraceHead(commits, value)


def meta_value(commits: int, digest: str) -> str:
    """Return the ``meta.head`` value: ``<commits> <hex>``."""
    return f"{commits} {digest}"


def parse_meta(value: str | None) -> tuple[int, str | None]:
    """Return ``(commits, digest or None)`` of a ``meta.head`` value."""
    if not value:
        return 0, None
    count, _, digest = value.partition(" ")
    return int(count), (digest or None)


# ------------------------------------------------------------------ rows


def contents_from_rows(
    intents: Iterable[Sequence[Any]],
    contexts: Iterable[Sequence[Any]],
    entries: Iterable[Sequence[Any]],
    frontiers: Iterable[Sequence[Any]],
) -> Iterator[tuple[Sequence[Any], CommitContent | SideContent | ChainProblem]]:
    """Rebuild each commit's content from row streams sorted by ``commit_seq``.

    ``intents`` rows are ``(commit_seq, intent, batch_digest, receipt_json,
    commit_digest, head_digest, committed_at[, side table])``; a row naming a
    side table is a side step ``(commit_seq, row_key, row_digest, NULL,
    commit_digest, head_digest, NULL, table)``. The others start with ``commit_seq``
    followed by the columns :class:`CommitContent` holds (entries joined with
    their record's metadata, ``caused_by_json`` still text).
    """
    streams = (
        _by_seq(contexts),
        _by_seq(entries),
        _by_seq(frontiers),
    )
    pending: list[tuple[int, list[Sequence[Any]]] | None] = [
        next(s, None) for s in streams
    ]
    for intent in intents:
        seq = intent[0]
        parts: list[list[Sequence[Any]]] = []
        for index, stream in enumerate(streams):
            current = pending[index]
            while current is not None and current[0] < seq:
                current = next(stream, None)
            if current is not None and current[0] == seq:
                parts.append(current[1])
                pending[index] = next(stream, None)
            else:
                parts.append([])
                pending[index] = current
        yield intent, _content(intent, *parts)


def _by_seq(rows: Iterable[Sequence[Any]]) -> Iterator[tuple[int, list[Sequence[Any]]]]:
    for seq, group in groupby(rows, key=lambda row: row[0]):
        yield seq, list(group)


def _content(
    intent: Sequence[Any],
    contexts: list[Sequence[Any]],
    entries: list[Sequence[Any]],
    frontiers: list[Sequence[Any]],
) -> CommitContent | SideContent | ChainProblem:
    if len(intent) > 7 and intent[7] is not None:
        return _side_content(intent)
    seq, intent_id = intent[0], intent[1]
    try:
        records = [
            (e[8], e[9], e[10], e[11], e[12], _parents(e[13]))
            for e in entries
            if e[8] is not None
        ]
        return CommitContent(
            commit_seq=seq,
            append_intent_id=intent_id,
            batch_digest=intent[2],
            receipt_json=intent[3],
            committed_at=intent[6],
            contexts=[tuple(c[1:8]) for c in contexts],
            entries=[tuple(e[1:8]) for e in entries],
            records=records,
            frontiers=[tuple(f[1:7]) for f in frontiers],
        )
    except (TypeError, ValueError) as error:
        return ChainProblem(seq, intent_id, f"a row is malformed: {error}")


def _side_content(row: Sequence[Any]) -> SideContent | ChainProblem:
    """A side step from a union row ``(seq, key, row digest, ..., table)``."""
    seq, key, digest, table = row[0], row[1], row[2], row[7]
    label = f"{table} {key!r}"
    if not isinstance(table, str) or not isinstance(key, str):
        return ChainProblem(seq, None, "a row is malformed: its table or key", label)
    if digest is not None and not isinstance(digest, str):
        return ChainProblem(seq, None, "a row is malformed: its row digest", label)
    return SideContent(seq, table, key, digest)


def _parents(text: object) -> tuple[str, ...]:
    if not isinstance(text, str):
        raise TypeError(f"caused_by_json is {type(text).__name__}, not text")
    value = json.loads(text)
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise ValueError("caused_by_json is not a list of ids")
    return tuple(value)
