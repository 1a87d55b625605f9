"""``goatherd recover DB`` shows what the runtime would rebuild, without writing."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from goatherd.application import SandboxSpec
from goatherd.cli import main
from goatherd.infrastructure.bootstrap import open_runtime
from goatherd.infrastructure.sandbox.memory import MemorySandbox, MemorySandboxConfig


@pytest.fixture(scope="module")
def demo_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--dir", str(base / "session")]) == 0
    return base / "session" / "trace.sqlite"


def test_recover_shows_the_tree_states_outputs_and_checkpoints(demo_trace, capsys):
    capsys.readouterr()
    before = hashlib.sha256(demo_trace.read_bytes()).hexdigest()
    assert main(["recover", str(demo_trace), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    states = {scope["id"]: scope["state"] for scope in report["scopes"]}
    assert states["scope:demo:main"] == "active"
    assert sorted(states.values()).count("discarded") == 2
    assert sorted(states.values()).count("merged") == 1
    outputs = [o for scope in report["scopes"] for o in scope["outputs"]]
    assert sorted(o["state"] for o in outputs) == ["discarded", "selected"]
    assert [cp["state"] for cp in report["checkpoints"]] == ["used"]
    assert report["stats"]["fork_records"] >= 3
    assert hashlib.sha256(demo_trace.read_bytes()).hexdigest() == before


def test_recover_prints_a_readable_tree(demo_trace, capsys):
    capsys.readouterr()
    assert main(["recover", str(demo_trace)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("scopes\n  scope:demo:main  active")
    assert "└── scope:demo:main:attempt-2  merged" in out
    assert "selected" in out


def test_a_root_that_only_checkpointed_recovers_as_a_bare_active_root(
    tmp_path: Path, capsys
):
    path = tmp_path / "trace.sqlite"
    with open_runtime(path) as runtime:
        manager = runtime.new_manager()
        workspace = MemorySandbox(MemorySandboxConfig(files={"a.txt": b"1\n"}))
        workspace.create(SandboxSpec())
        root = manager.create("agent:main", workspace).unwrap()
        checkpoint = manager.create_checkpoint(root.id, b"conversation").unwrap()
    assert main(["recover", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [(s["id"], s["state"], s["parent"]) for s in report["scopes"]] == [
        ("scope:agent:main", "active", None)
    ]
    assert [
        (c["id"], c["state"], c["snapshot_bytes"]) for c in report["checkpoints"]
    ] == [(checkpoint.id, "valid", len(b"conversation"))]
