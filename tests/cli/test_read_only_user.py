"""Every read command works for a user who may not write the trace or its directory.

An auditor's account, a read-only mount: the trace file is ``0444`` in a
``0555`` directory. Run as root, the commands run as ``nobody`` (root ignores
permissions); run as anyone else, the permissions apply to them. Each command
must succeed and leave the directory exactly as it was (no ``-wal``, ``-shm``
or journal files).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.cli.test_lifecycle import _session

pytestmark = pytest.mark.integration

NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def _as_reader(argv: list[str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "goatherd", *argv]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: cannot drop to a reader")
        command = [*NOBODY, *command]
    return subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd="/",
        env={**os.environ, "HOME": "/nonexistent"},
    )


@pytest.fixture
def locked() -> Iterator[tuple[Path, dict[str, str]]]:
    """A recorded session's trace, read-only, in a read-only directory."""
    # Not under pytest's tmp_path: that is private to the user running pytest.
    base = Path(tempfile.mkdtemp(prefix="goatherd-ro-"))
    base.chmod(0o755)
    work = base / "work"
    work.mkdir()
    trace = base / "db" / "trace.sqlite"
    trace.parent.mkdir()
    ids = _session(str(trace), work)
    for path in [*work.rglob("*"), work]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | stat.S_IROTH | stat.S_IXOTH)
    trace.chmod(0o444)
    trace.parent.chmod(0o555)
    try:
        yield trace, ids
    finally:
        trace.parent.chmod(0o755)
        shutil.rmtree(base)


def test_read_commands_work_without_write_permission(locked) -> None:
    trace, ids = locked
    before = sorted(p.name for p in trace.parent.iterdir())
    db = ["--db", str(trace)]
    log = _as_reader(["log", "--json", *db])
    assert log.returncode == 0, log.stderr
    record = json.loads(log.stdout)[0]["record_id"]
    for argv in (
        ["stats"],
        ["show", record],
        ["verify"],
        ["recover"],
        ["export"],
        ["scopes"],
        ["diff", ids["out0"]],
        ["history", "agent:main"],
    ):
        done = _as_reader([*argv, *db])
        assert done.returncode == 0, (argv, done.stderr)
    _serves(trace, record)
    assert sorted(p.name for p in trace.parent.iterdir()) == before


def _serves(trace: Path, record: str) -> None:
    """``goatherd traceui`` as the reader: it serves the trace's records."""
    command = [sys.executable, "-m", "goatherd", "traceui", "--db", str(trace)]
    command += ["--addr", "127.0.0.1:0"]
    if os.geteuid() == 0:
        command = [*NOBODY, *command]
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/"
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert " on http://" in line, proc.stderr.read() if proc.stderr else line
        url = line.split(" on ", 1)[1].split("/ (", 1)[0]
        page = httpx.get(url + "/api/records", params={"path": "agent:main"})
        assert page.status_code == 200
        assert record in page.text
    finally:
        proc.terminate()
        proc.communicate(timeout=20)
