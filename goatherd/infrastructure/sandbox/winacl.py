"""The Windows containment backend (write-restricted tokens), refused elsewhere.

The seed's ``sandbox/winacl`` confines a command with a write-restricted
token, per-root capability SIDs, a Low integrity level and a mandatory label
(enforcement tier ``native-access-check-deny``). Those are Windows kernel
objects; on any other platform choosing this backend fails at once with a
clear message instead of running the command unconfined.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from goatherd.application.errors import ContainmentUnavailableError
from goatherd.application.ports import ExecRequest, ExecResult, NetworkMode

__all__ = ["WINACL_TIER", "WinAclBackend"]

WINACL_TIER: Final = "native-access-check-deny"


@dataclass(frozen=True, slots=True)
class WinAclBackend:
    """Windows write-restricted-token containment; unavailable on this build.

    Construction succeeds so configuration can be inspected, but ``probe``
    and ``run`` always refuse: goatherd does not ship the Windows token code.
    """

    network: NetworkMode = NetworkMode.ALLOW

    def name(self) -> str:
        return "winacl"

    def tier(self) -> str:
        return WINACL_TIER

    def probe(self) -> None:
        if sys.platform != "win32":
            raise ContainmentUnavailableError(
                f"winacl: the Windows containment backend needs Windows "
                f"(write-restricted tokens, integrity labels); this platform is "
                f"{sys.platform} - use the landlock backend on Linux"
            )
        raise ContainmentUnavailableError(
            "winacl: the Windows containment backend is not implemented in this "
            "build of goatherd; refusing to run the command unconfined"
        )

    def run(
        self, request: ExecRequest, *, writable_roots: Sequence[str], cwd: str
    ) -> ExecResult:
        self.probe()
        raise AssertionError("unreachable: probe always raises")  # pragma: no cover
