"""Operation contexts: who acts, with which presented authority (kernel-spec 4.4).

The store coerces every call's context to the operation it performs and checks
trust *before* touching state. The two ready-made trusted contexts are what the
runtime uses for its own records.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from goatherd.domain.records import (
    DEFAULT_SCHEMA_ENVIRONMENT,
    TRUSTED_AUTHORITY,
    TRUSTED_TRUST_MODE,
    VisibilityProfile,
)

__all__ = [
    "AppendContext",
    "OPERATION_KINDS",
    "OperationContext",
    "OperationKind",
    "ReadContext",
    "TRUSTED_APPEND_CONTEXT",
    "TRUSTED_READ_CONTEXT",
]


class OperationKind(StrEnum):
    """The kernel operations an :class:`OperationContext` can be built for."""

    APPEND = "append"
    READ = "read"
    PUBLISH_CUT = "publish_cut"
    MATERIALIZE = "materialize"
    OBSERVE = "observe"


OPERATION_KINDS: Final = tuple(k.value for k in OperationKind)


@dataclass(frozen=True, slots=True)
class OperationContext:
    """The trace-facing context of one kernel operation."""

    actor_ref: str
    operation: str
    presented_authority_refs: tuple[str, ...] = ()
    schema_environment_ref: str = DEFAULT_SCHEMA_ENVIRONMENT
    visibility_profile: str = VisibilityProfile.PAYLOAD
    trust_mode: str | None = None

    @property
    def presented_witness_refs(self) -> tuple[str, ...]:
        """Alias of :attr:`presented_authority_refs`."""
        return self.presented_authority_refs

    @property
    def schema_version_set(self) -> str:
        """Alias of :attr:`schema_environment_ref`."""
        return self.schema_environment_ref

    @property
    def write_trusted(self) -> bool:
        """Whether this context may write (internal trust or the trusted ref)."""
        return (
            self.trust_mode == TRUSTED_TRUST_MODE
            or TRUSTED_AUTHORITY in self.presented_authority_refs
        )


@dataclass(frozen=True, slots=True)
class AppendContext:
    """A write context; converted to an :class:`OperationContext` per call."""

    actor_ref: str
    presented_witness_refs: tuple[str, ...] = ()
    schema_version_set: str = DEFAULT_SCHEMA_ENVIRONMENT
    trust_mode: str | None = None

    def to_operation_context(self, operation: str = "append") -> OperationContext:
        """Return the equivalent context for ``operation``."""
        return OperationContext(
            actor_ref=self.actor_ref,
            operation=operation,
            presented_authority_refs=tuple(self.presented_witness_refs),
            schema_environment_ref=self.schema_version_set,
            trust_mode=self.trust_mode,
        )


@dataclass(frozen=True, slots=True)
class ReadContext:
    """A read context; converted to an :class:`OperationContext` for reads."""

    actor_ref: str
    presented_witness_refs: tuple[str, ...] = ()
    visibility_profile: str = VisibilityProfile.PAYLOAD

    def to_operation_context(self) -> OperationContext:
        """Return the equivalent ``read`` context."""
        return OperationContext(
            actor_ref=self.actor_ref,
            operation=OperationKind.READ,
            presented_authority_refs=tuple(self.presented_witness_refs),
            visibility_profile=self.visibility_profile,
        )


TRUSTED_APPEND_CONTEXT: Final = AppendContext(
    actor_ref="runtime:internal",
    presented_witness_refs=(TRUSTED_AUTHORITY,),
    trust_mode=TRUSTED_TRUST_MODE,
)
TRUSTED_READ_CONTEXT: Final = ReadContext(
    actor_ref="runtime:internal",
    presented_witness_refs=(TRUSTED_AUTHORITY,),
)
