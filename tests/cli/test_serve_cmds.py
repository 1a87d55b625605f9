"""``goatherd traceui`` serves a file read-only; ``projections`` manages views."""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from goatherd.cli import main


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get_json(url: str) -> object:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


class TestTraceUi:
    @pytest.mark.integration  # a real server process
    def test_traceui_serves_an_existing_file_without_modifying_it(
        self, trace_file
    ) -> None:
        path, ids = trace_file
        before = hashlib.sha256(path.read_bytes()).hexdigest()
        port = _free_port()
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "goatherd",
                "traceui",
                "--db",
                str(path),
                "--addr",
                f"127.0.0.1:{port}",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 30
            health = None
            while time.monotonic() < deadline:
                try:
                    health = _get_json(base + "/api/health")
                    break
                except OSError:
                    time.sleep(0.2)
            assert isinstance(health, dict), proc.stderr
            records = _get_json(base + "/api/records?path=agent:main")
            assert ids["call"] in json.dumps(records)
        finally:
            proc.terminate()
            proc.communicate(timeout=10)
        assert hashlib.sha256(path.read_bytes()).hexdigest() == before

    def test_a_bad_address_is_one_clear_line(self, trace_file, capsys) -> None:
        path, _ = trace_file
        assert main(["traceui", "--db", str(path), "--addr", "localhost"]) == 1
        assert "HOST:PORT" in capsys.readouterr().err


class TestProjections:
    def test_list_catch_up_and_rebuild(self, trace_file, capsys) -> None:
        path, _ = trace_file
        assert main(["projections", "list", "--db", str(path), "--json"]) == 0
        statuses = json.loads(capsys.readouterr().out)
        names = {s["name"] for s in statuses}
        assert statuses
        assert all(s["lag"] == s["head"] - s["position"] for s in statuses)
        assert main(["projections", "catch-up", "--db", str(path)]) == 0
        capsys.readouterr()
        assert main(["projections", "list", "--db", str(path), "--json"]) == 0
        assert all(s["lag"] == 0 for s in json.loads(capsys.readouterr().out))
        name = sorted(names)[0]
        assert main(["projections", "rebuild", name, "--db", str(path)]) == 0
        assert f"rebuilt {name}" in capsys.readouterr().out

    def test_rebuilding_an_unknown_projection_names_it(
        self, trace_file, capsys
    ) -> None:
        path, _ = trace_file
        assert main(["projections", "rebuild", "nope", "--db", str(path)]) == 1
        err = capsys.readouterr().err
        assert "nope" in err
        assert not err.startswith("goatherd: error: '")

    @pytest.mark.parametrize("action", ["list", "catch-up"])
    def test_projections_need_a_database(self, action: str, capsys) -> None:
        with pytest.raises(SystemExit) as info:
            main(["projections", action])
        assert info.value.code == 2
