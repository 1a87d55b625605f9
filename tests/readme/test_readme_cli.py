"""The README's shell session runs as written (placeholders filled from the trace).

The demo is killed mid-session (``--crash-after``: exit by SIGKILL), leaving
an attempt's output unconsumed. ``OUTPUT`` becomes the first output ``scopes``
lists (an unconsumed one: the first settle consumes it, the second is refused
in one line), ``CHECKPOINT`` the first checkpoint; the second demo resumes
and finishes; ``log --follow`` runs until it has printed an entry another
process appended, then is stopped.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
SESSION = re.compile(r"## The command line.*?```sh\n(.*?)```", re.DOTALL)

pytestmark = pytest.mark.integration


def _commands() -> list[list[str]]:
    block = SESSION.search(README.read_text(encoding="utf-8"))
    assert block is not None
    return [shlex.split(line, comments=True) for line in block.group(1).splitlines()]


def _goatherd(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "goatherd", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def test_the_readme_cli_session_runs(tmp_path: Path) -> None:
    env = dict(os.environ)
    demo_dir = tmp_path / "gd"
    names: dict[str, str] = {}
    follow_seen = False
    settled = False
    for argv in _commands():
        argv = [a.replace("/tmp/gd", str(demo_dir)) for a in argv]
        if argv[0] == "export":
            for pair in argv[1:]:
                key, _, value = pair.partition("=")
                env[key] = value
            continue
        assert argv[0] == "goatherd"
        argv = [names.get(a, a) for a in argv[1:]]
        if "--follow" in argv:
            follow_seen = _follow(argv, env)
            continue
        done = _goatherd(argv, env)
        if "--crash-after" in argv:
            assert done.returncode in (-9, 137), done.stderr  # SIGKILL, as asked
            continue
        if argv[0] == "settle" and settled:
            # Consume-once: a second settlement is refused in one line.
            assert done.returncode == 1, done.stdout
            assert "already settled" in done.stderr
            assert done.stderr.count("\n") == 1
            continue
        assert done.returncode == 0, (argv, done.stderr)
        settled = settled or argv[0] == "settle"
        if argv[0] == "scopes":
            names.update(_placeholders(env))
        if argv[0] == "diff":
            assert "@@" in done.stdout
    assert follow_seen
    assert names


def _placeholders(env: dict[str, str]) -> dict[str, str]:
    tree = json.loads(_goatherd(["scopes", "--json"], env).stdout)
    outputs = [o for s in tree["scopes"] for o in s["outputs"]]
    checkpoints = tree["checkpoints"]
    assert [o["state"] for o in outputs] == ["unconsumed"]
    assert checkpoints
    return {"OUTPUT": outputs[0]["id"], "CHECKPOINT": checkpoints[0]["id"]}


def _follow(argv: list[str], env: dict[str, str]) -> bool:
    """Start the follower, append a record from another process, see it."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "goatherd", *argv, "--interval", "0.05"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        time.sleep(1.0)
        code = (
            "import sys\n"
            "from goatherd import *\n"
            "s = open_trace_store(sys.argv[1])\n"
            "d = RecordDraft('capture', 'readme.note.v1', {'n': 1})\n"
            "g = AppendGroup('demo:main', fact_drafts=(d,))\n"
            "b = AppendBatch('readme:follow', (g,))\n"
            "s.append(TRUSTED_APPEND_CONTEXT, b)\n"
        )
        subprocess.run(
            [sys.executable, "-c", code, env["GOATHERD_DB"]], check=True, timeout=60
        )
        assert proc.stdout is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if "readme.note.v1" in line or '{"n":1}' in line:
                return True
        return False
    finally:
        proc.terminate()
        proc.communicate(timeout=10)
