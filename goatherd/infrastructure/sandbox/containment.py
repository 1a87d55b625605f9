"""Choosing a containment backend by name (``landlock``, ``winacl``).

``open_containment_backend`` builds the backend and probes it, so a host
learns at configuration time (not at the first command) that the platform
cannot confine; an unknown name lists the known ones.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from goatherd.application.errors import SandboxConfigError
from goatherd.application.ports import ContainmentBackend, NetworkMode
from goatherd.infrastructure.sandbox.landlock import LandlockBackend
from goatherd.infrastructure.sandbox.winacl import WinAclBackend

__all__ = ["CONTAINMENT_BACKENDS", "open_containment_backend"]

CONTAINMENT_BACKENDS: Final = ("landlock", "winacl")


def open_containment_backend(
    name: str,
    network: NetworkMode = NetworkMode.ALLOW,
    *,
    accept_gaps: Iterable[str] = (),
) -> ContainmentBackend:
    """Return the probed backend ``name`` enforcing ``network``.

    ``accept_gaps`` names the Landlock guarantees an older kernel may lack
    (``truncate``, ``signals``; see ``docs/containment.md``); without them
    such a kernel is refused.

    Raises:
        SandboxConfigError: for an unknown name or gap.
        ContainmentUnavailableError: when this platform cannot enforce it.
    """
    backend: ContainmentBackend
    if name == "landlock":
        backend = LandlockBackend(network=network, accept_gaps=frozenset(accept_gaps))
    elif name == "winacl":
        backend = WinAclBackend(network=network)
    else:
        known = ", ".join(CONTAINMENT_BACKENDS)
        raise SandboxConfigError(
            f'unknown containment backend "{name}" (available: {known})'
        )
    backend.probe()
    return backend
