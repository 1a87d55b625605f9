"""``goatherd traceui`` as a user runs it: a real server process over a trace file.

It follows commits another process makes (SSE and ``/api/records``), refuses
requests for any Host but loopback names and its bound address, reports a
busy port as one line with exit code 3 before announcing anything, and serves
a user's projection given with ``--module``.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from goatherd.cli import EXIT_ADDRESS_IN_USE, main
from tests.cli.user_projection import NAME

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
MODULE = "tests.cli.user_projection:BashCallCount"
ANNOUNCED = re.compile(r" on (http://\S+)/ \(Ctrl-C to stop\)$")

APPEND = """
import sys
from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT, AppendBatch, AppendGroup, RecordDraft,
)
from goatherd.infrastructure.store import SQLiteTraceStore

with SQLiteTraceStore(sys.argv[1]) as store:
    draft = RecordDraft("capture", "app.note.v1", {"from": "another process"})
    group = AppendGroup("agent:elsewhere", fact_drafts=(draft,))
    receipt = store.append(TRUSTED_APPEND_CONTEXT, AppendBatch("other:1", (group,)))
print(receipt.fact_ids[0])
"""


def _goatherd(*argv: str) -> list[str]:
    return [sys.executable, "-m", "goatherd", *argv]


def _start(db: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    """Start ``goatherd traceui`` on a free port; return it and its announced URL."""
    proc = subprocess.Popen(
        _goatherd("traceui", "--db", str(db), "--addr", "127.0.0.1:0", *extra),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = ANNOUNCED.search(line.rstrip("\n"))
    if not found:
        proc.kill()
        raise AssertionError(f"not announced: {line!r}")
    url = found.group(1)
    assert not url.endswith(":0")  # the port actually bound
    return proc, url


@contextmanager
def traceui(db: Path, *extra: str) -> Iterator[str]:
    """Run ``goatherd traceui`` on a free port; yield its announced URL."""
    proc, url = _start(db, *extra)
    try:
        yield url
    finally:
        proc.terminate()
        _out, err = proc.communicate(timeout=20)
        assert "Traceback" not in err, err


def _append_and_await_its_event(url: str, db: Path) -> tuple[str, dict[str, Any]]:
    """Connect to the SSE stream, append from another process, await the event."""
    with httpx.stream("GET", url + "/api/events", timeout=20) as response:
        assert response.status_code == 200
        lines = response.iter_lines()
        assert next(lines).startswith("retry:")
        assert next(lines) == ": connected"
        done = subprocess.run(
            [sys.executable, "-c", APPEND, str(db)],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        record_id = done.stdout.strip()
        for line in lines:
            if line.startswith("data: "):
                event = json.loads(line[len("data: ") :])
                if event["id"] == record_id:
                    return record_id, dict(event)
    raise AssertionError("the stream ended before the appended record arrived")


def test_traceui_follows_commits_of_another_process(trace_file) -> None:
    path, _ = trace_file
    with traceui(path, "--interval", "0.05") as url:
        before = httpx.get(url + "/api/health").json()["records"]
        record_id, event = _append_and_await_its_event(url, path)
        assert event["owner"] == "agent:elsewhere"
        assert event["payload"] == {"from": "another process"}
        page = httpx.get(url + "/api/records", params={"path": "agent:elsewhere"})
        assert [r["id"] for r in page.json()["records"]] == [record_id]
        after = httpx.get(url + "/api/health").json()["records"]
        assert after > before


def test_traceui_refuses_a_host_that_is_not_loopback_or_allowed(
    trace_file,
) -> None:
    path, ids = trace_file
    with traceui(path, "--allow-host", "ui.example.test") as url:
        port = url.rsplit(":", 1)[1]
        for host in ("evil.example", f"evil.example:{port}", "127.0.0.1.evil.test"):
            refused = httpx.get(url + "/api/records", headers={"Host": host})
            assert refused.status_code == 421, host
            assert ids["call"] not in refused.text
            assert "not allowed" in refused.json()["error"]
        for host in (f"localhost:{port}", f"127.0.0.1:{port}", "ui.example.test"):
            allowed = httpx.get(url + "/api/records", headers={"Host": host})
            assert allowed.status_code == 200, host
            assert ids["call"] in allowed.text
        events = httpx.get(url + "/api/events", headers={"Host": "evil.example"})
        assert events.status_code == 421


def test_a_busy_port_is_one_line_and_exit_code_3_before_any_announcement(
    trace_file,
) -> None:
    path, _ = trace_file
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = subprocess.run(
            _goatherd("traceui", "--db", str(path), "--addr", f"127.0.0.1:{port}"),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == EXIT_ADDRESS_IN_USE == 3
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert f"127.0.0.1:{port} is already in use" in done.stderr


def test_traceui_serves_a_users_projection_given_with_module(trace_file) -> None:
    path, _ = trace_file
    with traceui(path, "--module", MODULE) as url:
        names = [p["name"] for p in httpx.get(url + "/api/projections").json()[
            "projections"
        ]]  # fmt: skip
        assert NAME in names
        rows = httpx.get(f"{url}/api/projections/{NAME}").json()["rows"]
        assert rows == [{"owner": "agent:main", "calls": 1}]
        assert httpx.get(url + "/api/projections/nope").status_code == 404


class TestModuleOption:
    def test_list_catch_up_and_rebuild_run_a_users_projection(
        self, trace_file, capsys
    ) -> None:
        path, _ = trace_file
        db = ["--db", str(path), "--module", MODULE]
        assert main(["projections", "list", *db, "--json"]) == 0
        listed = {s["name"]: s for s in json.loads(capsys.readouterr().out)}
        assert listed[NAME]["lag"] > 0
        assert main(["projections", "catch-up", *db]) == 0
        capsys.readouterr()
        assert main(["projections", "list", *db, "--json"]) == 0
        listed = {s["name"]: s for s in json.loads(capsys.readouterr().out)}
        assert listed[NAME]["lag"] == 0
        assert main(["projections", "rebuild", NAME, *db, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["name"] == NAME

    def test_a_factory_is_accepted(self, trace_file, capsys) -> None:
        path, _ = trace_file
        spec = "tests.cli.user_projection:made_by_a_factory"
        argv = ["projections", "rebuild", NAME, "--db", str(path), "--module", spec]
        assert main(argv) == 0
        assert f"rebuilt {NAME}" in capsys.readouterr().out

    @pytest.mark.parametrize(
        ("spec", "says"),
        [
            ("tests.cli.user_projection", "PKG.MOD:NAME"),
            ("tests.cli.no_such_module:X", "cannot import"),
            ("tests.cli.user_projection:missing", "has no 'missing'"),
            ("tests.cli.user_projection:NOT_A_PROJECTION", "is not a Projection"),
            ("tests.cli.user_projection:BashCalls", "BashCalls() failed"),
        ],
    )
    def test_a_bad_module_is_one_line_naming_it(
        self, trace_file, capsys, spec: str, says: str
    ) -> None:
        path, _ = trace_file
        assert main(["projections", "list", "--db", str(path), "--module", spec]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1
        assert says in err
        assert main(["traceui", "--db", str(path), "--module", spec]) == 1
        assert says in capsys.readouterr().err


def test_traceui_announces_nothing_for_a_missing_trace(tmp_path: Path) -> None:
    missing = tmp_path / "typo.sqlite"
    done = subprocess.run(
        _goatherd("traceui", "--db", str(missing), "--addr", "127.0.0.1:0"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1
    assert not missing.exists()


@pytest.mark.timeout(90)  # before the fix, the stream and the server lived on
def test_ctrl_c_stops_the_server_while_a_page_follows_its_events(trace_file) -> None:
    """An open event stream ends cleanly instead of holding the server open."""
    path, _ = trace_file
    proc, url = _start(path)
    try:
        with httpx.stream("GET", url + "/api/events", timeout=30) as events:
            lines = events.iter_lines()
            assert next(lines).startswith("retry:")
            assert next(lines) == ": connected"
            proc.send_signal(signal.SIGINT)
            rest = list(lines)  # the stream ends: no heartbeat wait, no cut
        assert rest == [""]
        _out, err = proc.communicate(timeout=15)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode in (0, 130), err
    assert "Traceback" not in err, err
    assert "ERROR" not in err, err
