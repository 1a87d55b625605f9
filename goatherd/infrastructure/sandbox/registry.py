"""The sandbox backend registry: config-driven selection of a backend by name.

Backends register a factory (``config -> Sandbox``) when their module is
imported; the built-in ones (``memory``, ``git``) are imported by the first
call here, so they are registered whichever sandbox module a program imported
(the package imports its modules lazily). ``open_sandbox`` builds a sandbox
without provisioning it (``create`` is the separate lifecycle step).
Registration mistakes are programming errors and raise at once, like
``database/sql`` drivers.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import Final

from goatherd.application.errors import SandboxConfigError, UnknownSandboxBackendError
from goatherd.application.ports import Sandbox

__all__ = ["SandboxFactory", "open_sandbox", "register_sandbox", "sandbox_backends"]

SandboxFactory = Callable[[object], Sandbox]

_lock = threading.Lock()
_factories: dict[str, SandboxFactory] = {}
_BUILTIN: Final = (
    "goatherd.infrastructure.sandbox.git",
    "goatherd.infrastructure.sandbox.memory",
)
_builtin_loaded = False


def _load_builtin() -> None:
    """Import the built-in backends' modules once (each registers itself)."""
    global _builtin_loaded
    if _builtin_loaded:
        return
    _builtin_loaded = True  # first: their own registration calls come back here
    for module in _BUILTIN:
        importlib.import_module(module)


def register_sandbox(name: str, factory: SandboxFactory) -> None:
    """Register ``factory`` under ``name``.

    Raises:
        ValueError: for an empty name, a missing factory or a duplicate name.
    """
    _load_builtin()
    if not name:
        raise ValueError("register_sandbox: empty backend name")
    if factory is None or not callable(factory):
        raise ValueError(f"register_sandbox: backend {name!r} has no factory")
    with _lock:
        if name in _factories:
            raise ValueError(f"register_sandbox: backend {name!r} registered twice")
        _factories[name] = factory


def open_sandbox(name: str, config: object = None) -> Sandbox:
    """Build (not provision) the sandbox ``name`` from its ``config``.

    Raises:
        UnknownSandboxBackendError: listing the registered names.
        SandboxConfigError: when the factory returns nothing.
    """
    _load_builtin()
    with _lock:
        factory = _factories.get(name)
        available = sorted(_factories)
    if factory is None:
        raise UnknownSandboxBackendError(name, available)
    sandbox = factory(config)
    if sandbox is None:
        raise SandboxConfigError(
            f'sandbox backend "{name}" returned a nil sandbox without an error '
            "(misconfigured factory)"
        )
    return sandbox


def sandbox_backends() -> list[str]:
    """Return the registered backend names, sorted."""
    _load_builtin()
    with _lock:
        return sorted(_factories)
