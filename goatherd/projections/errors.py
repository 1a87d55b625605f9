"""The read side's exceptions: one small, flat hierarchy under :class:`ProjectionError`.

Hierarchy::

    GoatherdError (domain)
      ProjectionError                a projection cannot fold what it was given
        ProjectionModeError          the slice's mode filter or visibility contradicts
                                     the projection spec (also a ``ValueError``)
        PayloadHiddenError           a payload-reading fold met a record shape
                                     (also a ``TypeError``)
        ProjectionInputError         a record's payload breaks the schema's rules
                                     (also a ``ValueError``)

The messages of the reference are kept where the kernel spec pins them.
"""

from __future__ import annotations

from goatherd.domain.errors import GoatherdError

__all__ = [
    "PayloadHiddenError",
    "ProjectionError",
    "ProjectionInputError",
    "ProjectionModeError",
]


class ProjectionError(GoatherdError):
    """A projection cannot fold what it was given."""


class ProjectionModeError(ProjectionError, ValueError):
    """Raised when a slice does not satisfy a projection spec's requirements.

    The mode message is pinned by the kernel spec:
    ``projection 'NAME' requires mode_filter='REQ'; got 'ACTUAL'``.
    """


class PayloadHiddenError(ProjectionError, TypeError):
    """Raised when a payload-reading fold meets a record whose payload is hidden."""


class ProjectionInputError(ProjectionError, ValueError):
    """Raised when a record's payload breaks its schema (an unknown relation kind)."""
