"""The sandbox backend registry."""

from __future__ import annotations

import pytest

from goatherd.application import (
    DIFF_TRUNCATED_MARKER,
    SandboxConfigError,
    UnknownSandboxBackendError,
    truncate_diff,
)
from goatherd.infrastructure.sandbox import (
    MemorySandbox,
    open_sandbox,
    register_sandbox,
    sandbox_backends,
)


def test_the_builtin_backends_are_registered_and_sorted() -> None:
    names = sandbox_backends()
    assert "memory" in names
    assert names == sorted(names)


def test_an_unknown_backend_fails_listing_what_is_registered() -> None:
    with pytest.raises(UnknownSandboxBackendError) as caught:
        open_sandbox("podman", None)
    listed = ", ".join(sandbox_backends())
    assert (
        str(caught.value) == f'unknown sandbox backend "podman" (available: {listed})'
    )
    assert caught.value.backend == "podman"
    assert caught.value.available == tuple(sandbox_backends())


def test_registration_refuses_an_empty_name_a_missing_factory_and_a_duplicate() -> None:
    with pytest.raises(ValueError, match="empty"):
        register_sandbox("", lambda cfg: MemorySandbox())
    with pytest.raises(ValueError, match="no factory"):
        register_sandbox("nothing-here", None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="twice"):
        register_sandbox("memory", lambda cfg: MemorySandbox())
    assert "nothing-here" not in sandbox_backends()


def test_a_factory_returning_none_is_reported_as_misconfigured() -> None:
    register_sandbox("test-returns-none", lambda cfg: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(SandboxConfigError, match="misconfigured factory"):
        open_sandbox("test-returns-none", None)


def test_truncate_diff_keeps_the_first_lines_and_marks_the_cut() -> None:
    diff = "a\nb\nc\n"
    assert truncate_diff(diff, 0) == diff
    assert truncate_diff(diff, 3) == diff
    assert truncate_diff(diff, 2) == f"a\nb\n{DIFF_TRUNCATED_MARKER}"


def test_the_sandbox_package_re_exports_exactly_its_backend_modules_names() -> None:
    import importlib

    import goatherd.infrastructure.sandbox as package

    modules = [
        "containment",
        "git",
        "gitrunner",
        "landlock",
        "memory",
        "paths",
        "registry",
        "winacl",
    ]
    names = [
        name
        for module in modules
        for name in importlib.import_module(f"{package.__name__}.{module}").__all__
    ]
    assert package.__all__ == sorted(names)
    for module in modules:
        home = importlib.import_module(f"{package.__name__}.{module}")
        for name in home.__all__:
            assert getattr(package, name) is getattr(home, name), name
    assert set(dir(package)) >= set(names)
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = package.no_such_name


def test_the_builtin_backends_are_registered_whichever_module_was_imported() -> None:
    """The package imports its modules lazily; the registry imports the built-ins."""
    from tests.imports import modules_after

    code = (
        "from goatherd.infrastructure.sandbox.registry import sandbox_backends\n"
        "assert sandbox_backends() == ['git', 'memory'], sandbox_backends()\n"
    )
    loaded = modules_after(code)
    assert "goatherd.infrastructure.sandbox.landlock" not in loaded
    code = (
        "from goatherd.infrastructure.sandbox.git import GitSandbox\n"
        "from goatherd.infrastructure.sandbox import MemorySandbox, register_sandbox\n"
        "try:\n"
        "    register_sandbox('memory', lambda config: MemorySandbox())\n"
        "except ValueError as error:\n"
        "    assert 'registered twice' in str(error)\n"
        "else:\n"
        "    raise AssertionError('a second memory backend was registered')\n"
    )
    modules_after(code)
