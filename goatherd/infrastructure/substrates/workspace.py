"""The workspace substrate: recorded file writes and execs reach a real Sandbox.

``WorkspaceSubstrate`` (ref ``workspace.sandbox.v1``; the backend goes into the
anchors, not the ref) applies ``workspace.file.write.v1`` ``{path, content_b64,
perm?}`` and ``workspace.exec.v1`` ``{command, args?, cwd?, env?, timeout_ms?}``
declarations in order and reports ``*.applied.v1`` captures caused by them.
There is no delete declaration: the Sandbox has no delete, and a truncation
recorded as a delete would be a lying trace.

Outcome honesty (runtime-spec 14.4):

* the capability gate runs FIRST over the whole batch; a backend without file
  IO (or exec) gets ``clean_failure`` with nothing attempted;
* validation failures touch nothing; an error raised by a sandbox call may
  have changed the world (backends write in chunks);
* on the first failing record: ``split_state`` if a capture already landed or
  the failure touched the world (captures and anchors of landed records only),
  else ``clean_failure``; the reason is ``record <id>: <error>``;
* an exec that ran to completion is a success whatever its exit code.

Delivery (ADR 0074): the mode of a batch with an exec is the constructor's
``exec_delivery``, said explicitly by the caller. ``at_least_once`` (the
default) lets a retry after a crash run the command again; ``at_most_once``
makes the orchestrator write a started marker first, so a crash after the
start leaves the intent in doubt and the command is never run again until
the caller resolves it. An exec cannot be made exactly once in general (a
command's effects are its own), so ``exactly_once`` is refused. A batch of
file writes only is delivered at least once: a re-dispatch writes the same
bytes to the same paths again.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from goatherd.application import SubstrateError
from goatherd.application.ports import ExecRequest, Sandbox
from goatherd.domain import (
    CAPTURE,
    MaterializationDelivery,
    MaterializationOutcome,
    MaterializationResult,
    Record,
    RecordDraft,
    WorldSideAnchor,
)

__all__ = [
    "WORKSPACE_EXEC_APPLIED_SCHEMA_REF",
    "WORKSPACE_EXEC_SCHEMA_REF",
    "WORKSPACE_FILE_WRITE_APPLIED_SCHEMA_REF",
    "WORKSPACE_FILE_WRITE_SCHEMA_REF",
    "WORKSPACE_SUBSTRATE_REF",
    "WorkspaceSubstrate",
]

WORKSPACE_SUBSTRATE_REF: Final = "workspace.sandbox.v1"
WORKSPACE_FILE_WRITE_SCHEMA_REF: Final = "workspace.file.write.v1"
WORKSPACE_EXEC_SCHEMA_REF: Final = "workspace.exec.v1"
WORKSPACE_FILE_WRITE_APPLIED_SCHEMA_REF: Final = "workspace.file.write.applied.v1"
WORKSPACE_EXEC_APPLIED_SCHEMA_REF: Final = "workspace.exec.applied.v1"
_DEFAULT_PERM: Final = 0o644


class _RecordFailedError(Exception):
    """One record failed; ``touched`` says whether the world may have changed."""

    def __init__(self, message: str, *, touched: bool) -> None:
        super().__init__(message)
        self.touched = touched


@dataclass(frozen=True, slots=True)
class _Applied:
    draft: RecordDraft
    anchor: WorldSideAnchor


class WorkspaceSubstrate:
    """Materialize file writes and execs through a :class:`Sandbox`."""

    def __init__(
        self,
        sandbox: Sandbox,
        *,
        exec_delivery: MaterializationDelivery | str = (
            MaterializationDelivery.AT_LEAST_ONCE
        ),
    ) -> None:
        """Apply through ``sandbox``; deliver batches with an exec as ``exec_delivery``.

        Raises:
            SubstrateError: ``exec_delivery`` is ``exactly_once`` (an exec
                cannot check and apply a key atomically) or unknown.
        """
        allowed = (
            MaterializationDelivery.AT_LEAST_ONCE,
            MaterializationDelivery.AT_MOST_ONCE,
        )
        if exec_delivery not in allowed:
            raise SubstrateError(
                f"workspace exec_delivery must be at_least_once or at_most_once, "
                f"got {exec_delivery!r}: a command cannot be made exactly once"
            )
        self._sandbox = sandbox
        self._exec_delivery = MaterializationDelivery(exec_delivery)

    @property
    def exec_delivery(self) -> MaterializationDelivery:
        """How a batch with an exec is delivered (given at construction)."""
        return self._exec_delivery

    def delivery_for(self, records: Sequence[Record]) -> MaterializationDelivery:
        """Return ``exec_delivery`` for a batch with an exec, else at least once."""
        if any(r.envelope.schema_ref == WORKSPACE_EXEC_SCHEMA_REF for r in records):
            return self._exec_delivery
        return MaterializationDelivery.AT_LEAST_ONCE

    @property
    def substrate_ref(self) -> str:
        return WORKSPACE_SUBSTRATE_REF

    @property
    def declaration_schemas(self) -> frozenset[str]:
        return frozenset({WORKSPACE_FILE_WRITE_SCHEMA_REF, WORKSPACE_EXEC_SCHEMA_REF})

    @property
    def capture_schemas(self) -> frozenset[str]:
        return frozenset(
            {WORKSPACE_FILE_WRITE_APPLIED_SCHEMA_REF, WORKSPACE_EXEC_APPLIED_SCHEMA_REF}
        )

    @property
    def containment(self) -> str:
        return self._sandbox.capabilities().containment

    def materialize(self, records: Sequence[Record]) -> MaterializationResult:
        """Apply ``records`` in order with honest outcomes (never raises for them)."""
        refusal = self._capability_gap(records)
        if refusal:
            return MaterializationResult(
                MaterializationOutcome.CLEAN_FAILURE, failure_reason=refusal
            )
        applied: list[_Applied] = []
        for record in records:
            try:
                applied.append(self._apply(record))
            except _RecordFailedError as failure:
                return _partial(applied, record, failure)
        return _result(MaterializationOutcome.SUCCESS, applied, "")

    def _capability_gap(self, records: Sequence[Record]) -> str:
        schemas = {record.envelope.schema_ref for record in records}
        capabilities = self._sandbox.capabilities()
        backend = self._sandbox.backend()
        if WORKSPACE_FILE_WRITE_SCHEMA_REF in schemas and not capabilities.file_io:
            return f'sandbox backend "{backend}" does not support file IO'
        if WORKSPACE_EXEC_SCHEMA_REF in schemas and not capabilities.exec:
            return f'sandbox backend "{backend}" does not support exec'
        return ""

    def _apply(self, record: Record) -> _Applied:
        schema = record.envelope.schema_ref
        if schema == WORKSPACE_FILE_WRITE_SCHEMA_REF:
            return self._write(record)
        if schema == WORKSPACE_EXEC_SCHEMA_REF:
            return self._exec(record)
        raise _RecordFailedError(
            f"unsupported declaration schema: {schema}", touched=False
        )

    def _write(self, record: Record) -> _Applied:
        path, content, perm = _parse_write(record.payload)
        try:
            self._sandbox.write_file(path, content, perm)
        except Exception as error:
            raise _RecordFailedError(
                str(error) or type(error).__name__, touched=True
            ) from error
        draft = _capture(
            record,
            WORKSPACE_FILE_WRITE_APPLIED_SCHEMA_REF,
            "workspace_file_write_applied",
            {"path": path, "digest": hashlib.sha256(content).hexdigest()},
        )
        return _Applied(draft, self._anchor("workspace_file", path=path))

    def _exec(self, record: Record) -> _Applied:
        request = _parse_exec(record.payload)
        try:
            result = self._sandbox.exec(request)
        except Exception as error:
            raise _RecordFailedError(
                str(error) or type(error).__name__, touched=True
            ) from error
        draft = _capture(
            record,
            WORKSPACE_EXEC_APPLIED_SCHEMA_REF,
            "workspace_exec_applied",
            {
                "command": request.command,
                "exit_code": result.exit_code,
                "stdout_digest": hashlib.sha256(result.stdout).hexdigest(),
                "stderr_digest": hashlib.sha256(result.stderr).hexdigest(),
            },
        )
        return _Applied(draft, self._anchor("workspace_exec", command=request.command))

    def _anchor(self, kind: str, **fields: str) -> WorldSideAnchor:
        return {
            "kind": kind,
            **fields,
            "substrate_ref": WORKSPACE_SUBSTRATE_REF,
            "backend": self._sandbox.backend(),
        }


def _capture(
    record: Record, schema_ref: str, kind_label: str, payload: Mapping[str, object]
) -> RecordDraft:
    return RecordDraft(
        mode=CAPTURE,
        schema_ref=schema_ref,
        kind_label=kind_label,
        payload=dict(payload),
        caused_by_fact_ids=(record.record_id,),
    )


def _result(
    outcome: MaterializationOutcome, applied: Sequence[_Applied], reason: str
) -> MaterializationResult:
    return MaterializationResult(
        outcome,
        tuple(a.draft for a in applied),
        reason,
        tuple(a.anchor for a in applied),
    )


def _partial(
    applied: Sequence[_Applied], record: Record, failure: _RecordFailedError
) -> MaterializationResult:
    reason = f"record {record.record_id}: {failure}"
    if applied or failure.touched:
        return _result(MaterializationOutcome.SPLIT_STATE, applied, reason)
    return _result(MaterializationOutcome.CLEAN_FAILURE, (), reason)


def _invalid(message: str) -> _RecordFailedError:
    return _RecordFailedError(message, touched=False)


def _parse_write(payload: Mapping[str, object]) -> tuple[str, bytes, int]:
    path = payload.get("path")
    if not isinstance(path, str) or not path:
        raise _invalid("path must be a non-empty string")
    encoded = payload.get("content_b64")
    if not isinstance(encoded, str):
        raise _invalid("content_b64 must be a string")
    try:
        content = base64.b64decode(encoded, validate=True)
    except binascii.Error as error:
        raise _invalid(f"content_b64 is not valid base64: {error}") from error
    return path, content, _parse_perm(payload.get("perm", _DEFAULT_PERM))


def _parse_perm(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 0o7777:
        return value
    if isinstance(value, str):
        try:
            perm = int(value, 8)
        except ValueError:
            perm = -1
        if 0 <= perm <= 0o7777:
            return perm
    raise _invalid(f"perm must be a mode number or an octal string, got {value!r}")


def _parse_exec(payload: Mapping[str, object]) -> ExecRequest:
    command = payload.get("command")
    if not isinstance(command, str) or not command:
        raise _invalid("command must be a non-empty string")
    args = payload.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise _invalid("args must be a list of strings")
    cwd = payload.get("cwd", "")
    if not isinstance(cwd, str):
        raise _invalid("cwd must be a string")
    env = payload.get("env", {})
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise _invalid("env must be an object of strings")
    timeout_ms = payload.get("timeout_ms", 0)
    if (
        not isinstance(timeout_ms, int)
        or isinstance(timeout_ms, bool)
        or timeout_ms < 0
    ):
        raise _invalid("timeout_ms must be an integer >= 0")
    return ExecRequest(
        command=command,
        args=tuple(args),
        cwd=cwd,
        env=dict(env),
        timeout=timeout_ms / 1000 if timeout_ms else None,
    )
