"""Sandbox backends: the registry, the memory and git backends, containment.

Importing this package registers the built-in backends (``memory``, ``git``).
The backend modules' public names are re-exported here (one import line per
module); the helper modules (``paths``, ``textdiff``, ``merge``, ``gitrunner``,
``gitstate``, ``gitcommit``, ``process_control``, ``supervised`` and the launcher's
``launch`` package) are imported directly where needed.
"""

from goatherd.infrastructure.sandbox.containment import *
from goatherd.infrastructure.sandbox.git import *
from goatherd.infrastructure.sandbox.landlock import *
from goatherd.infrastructure.sandbox.memory import *
from goatherd.infrastructure.sandbox.registry import *
from goatherd.infrastructure.sandbox.winacl import *

# A literal list (not ``+=`` of the modules' lists) so mypy can follow the
# two-level re-export; tests/infrastructure/sandbox/test_registry.py keeps it
# equal to the modules' lists.
__all__ = [
    "CONTAINMENT_BACKENDS",
    "DEFAULT_EXEC_TIMEOUT_SECONDS",
    "ExecPlacement",
    "GitExec",
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
    "SandboxFactory",
    "WINACL_TIER",
    "WinAclBackend",
    "landlock_abi",
    "new_local_git_sandbox",
    "new_worktree_sandbox",
    "open_containment_backend",
    "open_sandbox",
    "register_sandbox",
    "sandbox_backends",
    "with_exec",
]
