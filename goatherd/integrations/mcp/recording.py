"""Each tool call as two records: a declaration before it runs, a capture after.

A call's declaration (``mcp.tool.<tool>.v1``) is caused by the last record
on the path before it (each environment's calls form one causal chain,
and two calls with the same arguments are two records); it carries the
server session and the call's arguments (long texts bounded, with their
size and digest); its capture (``mcp.tool.<tool>.result.v1``) is caused
by the declaration and carries the outcome, ``success`` among it (what the
supervisor's error-rate rule reads). Both sit on the environment's owner
path. A ``run``'s declaration has the kind label ``bash`` and its command
under ``cmd``, as the supervisor's shell rules expect.

A capture's append intent is derived from its declaration, so a call has
exactly one capture: a server that closes a call its crashed predecessor
left open (``interrupted``) and a late original cannot both record one.

Each server process records ``mcp.server.started.v1`` on the repository's
root path, with its session id, host, pid and process start time, so that
another process can tell whether a call left open belongs to a server that
is still running.
"""

from __future__ import annotations

import hashlib
import os
import socket
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from goatherd.domain import (
    CAPTURE,
    DECLARATION,
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    AppendIntentConflictError,
    LogEntry,
    RecordDraft,
)
from goatherd.infrastructure.store import SqlAlchemyTraceStore

__all__ = [
    "CallRecorder",
    "RECORD_TEXT_LIMIT",
    "RecordedCall",
    "SERVER_STARTED_SCHEMA",
    "SessionInfo",
    "TOOL_SCHEMA_PREFIX",
    "bounded_text",
    "call_schema",
    "is_call",
    "is_result",
    "process_start_ticks",
    "result_schema",
    "text_fields",
]

TOOL_SCHEMA_PREFIX: Final = "mcp.tool."
SERVER_STARTED_SCHEMA: Final = "mcp.server.started.v1"
RECORD_TEXT_LIMIT: Final = 16 * 1024
"""The most of one text (arguments, output) a record keeps, head and tail."""
_CALL_SUFFIX: Final = ".v1"
_RESULT_SUFFIX: Final = ".result.v1"


def call_schema(tool: str) -> str:
    """Return the schema of ``tool``'s declarations."""
    return f"{TOOL_SCHEMA_PREFIX}{tool}{_CALL_SUFFIX}"


def result_schema(tool: str) -> str:
    """Return the schema of ``tool``'s captures."""
    return f"{TOOL_SCHEMA_PREFIX}{tool}{_RESULT_SUFFIX}"


def is_call(entry: LogEntry) -> bool:
    """Tell whether ``entry`` is a tool call's declaration."""
    envelope = entry.record.envelope
    return (
        envelope.mode == DECLARATION
        and envelope.schema_ref.startswith(TOOL_SCHEMA_PREFIX)
        and not envelope.schema_ref.endswith(_RESULT_SUFFIX)
    )


def is_result(entry: LogEntry) -> bool:
    """Tell whether ``entry`` is a tool call's capture."""
    envelope = entry.record.envelope
    return (
        envelope.mode == CAPTURE
        and envelope.schema_ref.startswith(TOOL_SCHEMA_PREFIX)
        and envelope.schema_ref.endswith(_RESULT_SUFFIX)
    )


def bounded_text(text: str, limit: int = RECORD_TEXT_LIMIT) -> str:
    """Return ``text`` whole, or its head and tail around a note of what was cut."""
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    half = limit // 2
    head = data[:half].decode("utf-8", errors="ignore")
    tail = data[-half:].decode("utf-8", errors="ignore")
    return f"{head}\n[... {len(data) - 2 * half} bytes not recorded ...]\n{tail}"


def text_fields(name: str, text: str) -> dict[str, object]:
    """Return ``name`` (bounded), ``name_bytes`` and ``name_sha256`` for a record."""
    data = text.encode("utf-8")
    return {
        name: bounded_text(text),
        f"{name}_bytes": len(data),
        f"{name}_sha256": hashlib.sha256(data).hexdigest(),
    }


def process_start_ticks(pid: int) -> int | None:
    """Return a process's start time in clock ticks since boot (Linux), if known."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """Who a server session was: its host, pid and process start time."""

    session: str
    host: str
    pid: int
    start_ticks: int | None

    def payload(self) -> dict[str, object]:
        """Return the fields as a record payload."""
        return {
            "session": self.session,
            "host": self.host,
            "pid": self.pid,
            "start_ticks": self.start_ticks,
        }

    @classmethod
    def here(cls) -> SessionInfo:
        """Return a new session of this process."""
        pid = os.getpid()
        return cls(
            uuid.uuid4().hex[:16], socket.gethostname(), pid, process_start_ticks(pid)
        )

    @classmethod
    def from_payload(cls, payload: Mapping[str, object]) -> SessionInfo | None:
        """Read a started record's payload (``None``: not one)."""
        session, host, pid = (
            payload.get("session"),
            payload.get("host"),
            payload.get("pid"),
        )
        ticks = payload.get("start_ticks")
        if not (isinstance(session, str) and isinstance(host, str)):
            return None
        if isinstance(pid, bool) or not isinstance(pid, int):
            return None
        if ticks is not None and (
            isinstance(ticks, bool) or not isinstance(ticks, int)
        ):
            return None
        return cls(session, host, pid, ticks)

    def may_be_running(self) -> bool:
        """Whether this session's process may still run (unknown: yes)."""
        if self.host != socket.gethostname() or self.start_ticks is None:
            return True
        return process_start_ticks(self.pid) == self.start_ticks


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """A recorded declaration or capture, shaped as the supervisor's rules see it.

    Attributes:
        trace_owner_id: the path it sits on.
        tool: the tool's name.
        schema_ref: its schema.
        kind_label: its kind label.
        payload: its payload.
        record_id: its record id.
        ordinal: its ordinal on the path.
        mode: ``declaration`` or ``capture``.
    """

    trace_owner_id: str
    tool: str
    schema_ref: str
    kind_label: str
    payload: Mapping[str, object]
    record_id: str
    ordinal: int
    mode: str = DECLARATION


@dataclass(slots=True)
class CallRecorder:
    """Appends tool calls to the trace for one server session."""

    store: SqlAlchemyTraceStore
    session: SessionInfo = field(default_factory=SessionInfo.here)

    def started(self, root_owner: str, details: Mapping[str, object]) -> None:
        """Record this session's start on the root path."""
        payload = {**self.session.payload(), **details}
        self._append(
            f"mcp:{self.session.session}:started",
            root_owner,
            RecordDraft(
                CAPTURE, SERVER_STARTED_SCHEMA, payload, kind_label="mcp:started"
            ),
            (),
        )

    def declare(
        self,
        owner: str,
        tool: str,
        args: Mapping[str, object],
        after: str | None = None,
    ) -> RecordedCall:
        """Record the declaration of a call to ``tool`` on ``owner``'s path.

        ``after`` is the path's last record (``None``: read it; ``""``: none).
        """
        payload = {"session": self.session.session, **args}
        label = "bash" if tool == "run" else f"mcp:{tool}"
        intent = f"mcp:{self.session.session}:call:{uuid.uuid4().hex}"
        draft = RecordDraft(DECLARATION, call_schema(tool), payload, kind_label=label)
        parents = self._last(owner) if after is None else ((after,) if after else ())
        record_id, ordinal = self._append(intent, owner, draft, parents)
        return RecordedCall(
            owner, tool, draft.schema_ref, label, payload, record_id, ordinal
        )

    def capture(
        self, owner: str, call_id: str, tool: str, outcome: Mapping[str, object]
    ) -> RecordedCall | None:
        """Record the capture of the call ``call_id`` on ``owner``'s path.

        Returns ``None`` when the call already has a capture with other
        content (another process closed it first).
        """
        label = f"mcp:{tool}:result"
        draft = RecordDraft(
            CAPTURE, result_schema(tool), dict(outcome), kind_label=label
        )
        try:
            record_id, ordinal = self._append(
                f"{call_id}:result", owner, draft, (call_id,)
            )
        except AppendIntentConflictError:
            return None
        return RecordedCall(
            owner,
            tool,
            draft.schema_ref,
            label,
            draft.payload,
            record_id,
            ordinal,
            CAPTURE,
        )

    def _last(self, owner: str) -> tuple[str, ...]:
        """Return the path's last record: a call follows what came before it.

        Two calls with the same arguments are then two records (the ids are
        content addresses, and their parents differ), and each environment's
        calls form one causal chain.
        """
        head = self.store.head(owner)
        if head == 0:
            return ()
        last = self.store.read_path(owner, head - 2, 1)
        return (last[0].record.record_id,) if last else ()

    def _append(
        self, intent: str, owner: str, draft: RecordDraft, parents: Iterable[str]
    ) -> tuple[str, int]:
        group = AppendGroup(owner, causal_parents=tuple(parents), fact_drafts=(draft,))
        receipt = self.store.append(
            TRUSTED_APPEND_CONTEXT, AppendBatch(intent, (group,))
        )
        return receipt.fact_ids[0], receipt.owner_ordinal_ranges[owner][0]
