"""An execution's lifecycle states and the rules its decisions can break.

:class:`ExecutionStatus` (pending, running, succeeded, failed) and the
errors under :class:`ExecutionRuleError` that the execution aggregate's
decisions raise; the tree of them is in ``goatherd.domain.execution``, which
re-exports every name. Pure: it imports only the runtime's base errors.
"""

from __future__ import annotations

from enum import StrEnum

from goatherd.domain.runtime_errors import RuntimeRuleError

__all__ = [
    "ExecutionExistsError",
    "ExecutionNotFoundError",
    "ExecutionRuleError",
    "ExecutionStateError",
    "ExecutionStatus",
    "ExecutionTerminalError",
    "RelationExistsError",
    "RelationNotActiveError",
]


class ExecutionStatus(StrEnum):
    """The lifecycle state of an execution."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class ExecutionRuleError(RuntimeRuleError):
    """Base of the execution rules (expected failures, never bugs).

    Attributes:
        execution_id: the execution the rule is about.
    """

    def __init__(self, execution_id: str, message: str) -> None:
        """Name the execution and what is wrong."""
        super().__init__(message)
        self.execution_id = execution_id


class ExecutionNotFoundError(ExecutionRuleError, LookupError):
    """Raised when an operation needs an execution whose path has no ``created``."""

    def __init__(self, execution_id: str) -> None:
        """Name the unknown execution."""
        super().__init__(execution_id, f"execution {execution_id} not found")


class ExecutionExistsError(ExecutionRuleError):
    """Raised when a create targets an execution another record created.

    Attributes:
        created_record: the ``created`` record already on the path.
    """

    def __init__(self, execution_id: str, created_record: str) -> None:
        """Name the execution and the record that created it."""
        super().__init__(
            execution_id,
            f"execution {execution_id} exists: created by record {created_record}",
        )
        self.created_record = created_record


class ExecutionStateError(ExecutionRuleError):
    """Raised when the execution's status forbids the operation.

    Attributes:
        status: the status it has.
        operation: what was refused.
    """

    def __init__(
        self,
        execution_id: str,
        status: ExecutionStatus,
        operation: str,
        detail: str = "",
    ) -> None:
        """Name the execution, its status and the refused operation."""
        super().__init__(
            execution_id,
            f"cannot {operation} execution {execution_id}: it is {status.value}"
            + detail,
        )
        self.status = status
        self.operation = operation


class ExecutionTerminalError(ExecutionStateError):
    """Raised when the execution already ended: its terminal record is recorded.

    What a process that lost the race to end (or to publish on) a run gets.

    Attributes:
        terminal_record: the recorded terminal record.
    """

    def __init__(
        self,
        execution_id: str,
        status: ExecutionStatus,
        operation: str,
        terminal_record: str,
    ) -> None:
        """Name the execution, how it ended and the record that ended it."""
        detail = f" (terminal record {terminal_record})"
        super().__init__(execution_id, status, operation, detail)
        self.terminal_record = terminal_record


class RelationExistsError(ExecutionRuleError):
    """Raised when a spawn or adopt reuses a relation id of the execution.

    Attributes:
        relation_id: the relation id in use.
    """

    def __init__(self, execution_id: str, relation_id: str) -> None:
        """Name the execution and the relation id."""
        super().__init__(
            execution_id,
            f"relation {relation_id} of execution {execution_id} exists",
        )
        self.relation_id = relation_id


class RelationNotActiveError(ExecutionRuleError):
    """Raised when abandoning a relation that is not active on the execution.

    Attributes:
        relation_id: the relation.
    """

    def __init__(self, execution_id: str, relation_id: str) -> None:
        """Name the execution and the relation."""
        super().__init__(
            execution_id,
            f"relation {relation_id} is not an active child of {execution_id}",
        )
        self.relation_id = relation_id
