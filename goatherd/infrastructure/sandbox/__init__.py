"""Sandbox backends: the registry, the memory and git backends, containment.

The backend modules' public names are re-exported here, each module imported
the first time one of its names is read (PEP 562 module ``__getattr__``, as
the layer packages do, ADR 0081): a command that diffs a git worktree loads
no Landlock, seccomp or Windows backend (ADR 0089). The built-in backends
(``memory``, ``git``) register when their module is imported, and the
registry imports both before it registers, opens or lists any backend.
``GitRunner`` (git with goatherd's safe configuration) and the path guards
(``clean_relative``, ``resolve_inside``) are public too, for programs that
drive a workspace themselves, as the demo does. The other helper modules
(``textdiff``, ``merge``, ``gitoptions``, ``gitworkdir``, ``gitapply``,
``gitstate``, ``gitcommit``, ``process_control``,
``supervised`` and the launcher's ``launch`` package) are imported directly
where needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from goatherd.domain._lazy import named_homes

if TYPE_CHECKING:
    from goatherd.infrastructure.sandbox.containment import *
    from goatherd.infrastructure.sandbox.git import *
    from goatherd.infrastructure.sandbox.gitrunner import *
    from goatherd.infrastructure.sandbox.landlock import *
    from goatherd.infrastructure.sandbox.memory import *
    from goatherd.infrastructure.sandbox.paths import *
    from goatherd.infrastructure.sandbox.registry import *
    from goatherd.infrastructure.sandbox.winacl import *

# A literal list (not ``+=`` of the modules' lists) so mypy can follow the
# two-level re-export; tests/infrastructure/sandbox/test_registry.py keeps it
# and ``_HOMES`` equal to the modules' lists.
__all__ = [
    "CONTAINMENT_BACKENDS",
    "DEFAULT_EXEC_TIMEOUT_SECONDS",
    "ExecPlacement",
    "GIT_TIMEOUT_SECONDS",
    "GitExec",
    "GitRunner",
    "GitSandbox",
    "GitSandboxConfig",
    "LANDLOCK_TIER",
    "LandlockBackend",
    "LandlockGap",
    "MEMORY_BACKEND",
    "MemoryRepository",
    "MemorySandbox",
    "MemorySandboxConfig",
    "NETWORK_MIN_ABI",
    "ProcessControl",
    "ProcessControlChoice",
    "SAFE_CONFIG",
    "SandboxFactory",
    "WINACL_TIER",
    "WinAclBackend",
    "clean_relative",
    "landlock_abi",
    "new_local_git_sandbox",
    "new_worktree_sandbox",
    "open_containment_backend",
    "open_sandbox",
    "register_sandbox",
    "resolve_inside",
    "sandbox_backends",
    "with_exec",
]

_MODULES: Final = (
    "containment",
    "git",
    "gitrunner",
    "landlock",
    "memory",
    "paths",
    "registry",
    "winacl",
)
_HOMES: Final = {
    "CONTAINMENT_BACKENDS": "containment",
    "open_containment_backend": "containment",
    "DEFAULT_EXEC_TIMEOUT_SECONDS": "git",
    "ExecPlacement": "git",
    "GitExec": "git",
    "GitSandbox": "git",
    "GitSandboxConfig": "git",
    "new_local_git_sandbox": "git",
    "new_worktree_sandbox": "git",
    "with_exec": "git",
    "GIT_TIMEOUT_SECONDS": "gitrunner",
    "GitRunner": "gitrunner",
    "SAFE_CONFIG": "gitrunner",
    "LANDLOCK_TIER": "landlock",
    "LandlockBackend": "landlock",
    "LandlockGap": "landlock",
    "NETWORK_MIN_ABI": "landlock",
    "ProcessControl": "landlock",
    "ProcessControlChoice": "landlock",
    "landlock_abi": "landlock",
    "MEMORY_BACKEND": "memory",
    "MemoryRepository": "memory",
    "MemorySandbox": "memory",
    "MemorySandboxConfig": "memory",
    "clean_relative": "paths",
    "resolve_inside": "paths",
    "SandboxFactory": "registry",
    "open_sandbox": "registry",
    "register_sandbox": "registry",
    "sandbox_backends": "registry",
    "WINACL_TIER": "winacl",
    "WinAclBackend": "winacl",
}


__getattr__, __dir__ = named_homes(__name__, globals(), _HOMES)
