"""The backend-neutral workspace state a sandbox captures and applies.

A :class:`WorkspaceState` has no lifecycle: it is reusable, so one fork point can
seed many speculative branches. Its digest is the kernel canonical digest of
``{"backend", "revision", "data"}`` and is what trace records cite.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from goatherd.domain.canonical import canonical_digest, canonical_json_text

__all__ = ["WorkspaceState"]


@dataclass(frozen=True, slots=True)
class WorkspaceState:
    """A captured workspace: which backend, its timeline position, opaque data.

    Attributes:
        backend: the backend that produced the state (``git``, ``memory``).
            Apply rejects a state from another backend.
        revision: the backend's timeline position (the git HEAD, a snapshot key).
        data: backend-specific, canonically digestible data (binary as base64).
    """

    backend: str
    revision: str = ""
    data: Mapping[str, Any] | None = field(default=None)

    def __post_init__(self) -> None:
        """Refuse data that could not be digested later."""
        if self.data is not None:
            # The digest's own encoder, which walks for the precise error
            # only when it refuses (the walk alone was slower than encoding).
            canonical_json_text(dict(self.data), root="workspace_state.data")

    @property
    def present(self) -> bool:
        """Whether this is a real state (a zero state has an empty backend)."""
        return self.backend != ""

    def to_json(self) -> dict[str, Any]:
        """Return the ``{"backend", "revision", "data"}`` form records carry."""
        return {
            "backend": self.backend,
            "revision": self.revision,
            "data": None if self.data is None else dict(self.data),
        }

    def digest(self) -> str:
        """Return the canonical digest of :meth:`to_json` (``sha256:...``)."""
        return canonical_digest(self.to_json(), root="workspace_state")

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> WorkspaceState:
        """Rebuild a state from its record form.

        Raises:
            ValueError: when the mapping is not a workspace state.
        """
        if not isinstance(value, Mapping):
            raise ValueError("a workspace state must be an object")
        backend = value.get("backend", "")
        revision = value.get("revision", "")
        data = value.get("data")
        if not isinstance(backend, str) or not isinstance(revision, str):
            raise ValueError("workspace state backend and revision must be strings")
        if data is not None and not isinstance(data, Mapping):
            raise ValueError("workspace state data must be an object or null")
        return cls(backend=backend, revision=revision, data=data)
