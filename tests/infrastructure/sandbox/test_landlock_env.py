"""The request's environment reaches only the confined command, never the launcher.

Real dynamic-loader hooks built with gcc in the test: a library whose
constructor writes a file outside the writable roots, loaded through
``LD_PRELOAD`` or ``LD_AUDIT`` from the request's environment. The loader runs
it in every process that starts with that environment; it must run only
after Landlock confines the command, so its outside write fails while its
inside write (proof that it ran at all) lands.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from goatherd.application import ExecRequest
from goatherd.infrastructure.sandbox import LandlockBackend, landlock_abi
from tests.infrastructure.sandbox.native import compile_c, needs_gcc

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(landlock_abi() < 1, reason="this kernel has no Landlock"),
    needs_gcc,
]

HOOK = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void mark(const char *var) {
    const char *path = getenv(var);
    if (!path) return;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) return;
    char line[64];
    int n = snprintf(line, sizeof line, "%d\n", (int)getpid());
    write(fd, line, n);
    close(fd);
}

__attribute__((constructor)) static void hook(void) {
    mark("HOOK_OUTSIDE");
    mark("HOOK_INSIDE");
}

/* Makes the library a valid LD_AUDIT module too. */
unsigned int la_version(unsigned int version) { return version; }
"""


@pytest.fixture(scope="module")
def hook(tmp_path_factory: pytest.TempPathFactory) -> Path:
    build = tmp_path_factory.mktemp("hook")
    return compile_c(build, "hook.so", HOOK, "-shared", "-fPIC")


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    return inside, outside


def _run(request: ExecRequest, inside: Path) -> None:
    result = LandlockBackend().run(
        request, writable_roots=[str(inside)], cwd=str(inside)
    )
    assert result.exit_code == 0, result.stderr


@pytest.mark.parametrize("variable", ["LD_PRELOAD", "LD_AUDIT"])
def test_a_loader_hook_from_the_request_runs_only_confined(
    hook: Path, roots: tuple[Path, Path], variable: str
) -> None:
    inside, outside = roots
    env = {
        variable: str(hook),
        "HOOK_OUTSIDE": str(outside / "escaped.txt"),
        "HOOK_INSIDE": str(inside / "ran.txt"),
    }
    _run(ExecRequest("true", env=env), inside)
    # The hook ran in the command (so the variable reached it) ...
    assert (inside / "ran.txt").read_text().strip()
    # ... and nowhere unconfined: nothing was written outside the roots.
    assert list(outside.iterdir()) == []


def test_the_launcher_runs_with_an_empty_environment(roots: tuple[Path, Path]) -> None:
    # The command's parent is the launcher: its environment block is empty
    # although the request and the host both carry variables.
    inside, _ = roots
    request = ExecRequest(
        "sh",
        ("-c", 'cat /proc/$PPID/environ | wc -c; echo "$PYTHONSAFEPATH $GREETING"'),
        env={"PYTHONSAFEPATH": "x", "GREETING": "hi", "LD_PRELOAD": ""},
    )
    result = LandlockBackend().run(
        request, writable_roots=[str(inside)], cwd=str(inside)
    )
    assert result.stdout.split(b"\n")[:2] == [b"0", b"x hi"]


def test_python_variables_in_the_request_reach_a_python_command(
    roots: tuple[Path, Path],
) -> None:
    inside, _ = roots
    (inside / "extra").mkdir()
    (inside / "extra" / "helper_mod.py").write_text("VALUE = 'from PYTHONPATH'\n")
    request = ExecRequest(
        sys.executable,
        ("-c", "import helper_mod; print(helper_mod.VALUE)"),
        env={"PYTHONPATH": str(inside / "extra")},
    )
    result = LandlockBackend().run(
        request, writable_roots=[str(inside)], cwd=str(inside)
    )
    assert result.stdout == b"from PYTHONPATH\n"


def test_the_host_environment_still_reaches_the_command(
    roots: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    inside, _ = roots
    monkeypatch.setenv("GOATHERD_TEST_HOST_VAR", "from the host")
    result = LandlockBackend().run(
        ExecRequest("sh", ("-c", 'echo "$GOATHERD_TEST_HOST_VAR"')),
        writable_roots=[str(inside)],
        cwd=str(inside),
    )
    assert result.stdout == b"from the host\n"


def test_environment_bytes_that_are_not_utf8_reach_the_command_exactly(
    roots: tuple[Path, Path],
) -> None:
    inside, _ = roots
    raw = b"caf\xe9 \xff\xfe end"
    request = ExecRequest(
        "sh", ("-c", 'printf %s "$RAW"'), env={"RAW": os.fsdecode(raw)}
    )
    result = LandlockBackend().run(
        request, writable_roots=[str(inside)], cwd=str(inside)
    )
    assert result.stdout == raw
