"""A reader that goes away (``goatherd log DB | head``) ends the command quietly."""

from __future__ import annotations

import os
import sys

import pytest

from goatherd.cli import main


def test_a_closed_pipe_stops_the_command_without_an_error(
    trace_file, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    path, _ = trace_file
    read_end, write_end = os.pipe()
    os.close(read_end)
    closed_pipe = os.fdopen(write_end, "w", buffering=1)
    try:
        monkeypatch.setattr(sys, "stdout", closed_pipe)
        assert main(["log", str(path)]) == 0
    finally:
        monkeypatch.undo()
        closed_pipe.close()  # main pointed it at /dev/null: closing flushes quietly
    assert "error" not in capsys.readouterr().err
