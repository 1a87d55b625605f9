"""Start-up: the parser's light defaults, the collector while importing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from goatherd.cli import defaults
from goatherd.demo import default_demo_dir
from goatherd.infrastructure.portability.trace_import import (
    DEFAULT_MAX_LINE_BYTES,
)
from goatherd.infrastructure.traceui import DEFAULT_ADDR
from tests.cli.conftest import build_trace

ROOT = Path(__file__).resolve().parents[2]


def test_the_parser_defaults_mirror_the_infrastructure() -> None:
    assert defaults.DEFAULT_ADDR == DEFAULT_ADDR
    assert defaults.default_demo_dir() == default_demo_dir()
    assert defaults.DEFAULT_MAX_LINE_BYTES == DEFAULT_MAX_LINE_BYTES


def test_the_process_command_line_collects_nothing_while_importing_a_command(
    tmp_path: Path,
) -> None:
    """``goatherd CMD`` imports the command with the collector off, then freezes.

    The imports' objects live as long as the process; the command then runs
    with the collector on, and the imports out of its sight. A command run by
    a program (``main([...])``) leaves the collector alone.
    """
    path = tmp_path / "trace.sqlite"
    build_trace(path)
    code = (
        "import gc, sys\n"
        "import goatherd.cli.inspect_cmds as commands\n"
        "seen = []\n"
        "real = commands.cmd_stats\n"
        "def spy(args):\n"
        "    seen.append((gc.isenabled(), gc.get_freeze_count() > 0))\n"
        "    return real(args)\n"
        "commands.cmd_stats = spy\n"
        "from goatherd.cli import main\n"
        f"assert main(['--db', {str(path)!r}, 'stats']) == 0\n"
        "assert seen == [(True, False)], seen\n"
        f"sys.argv = ['goatherd', '--db', {str(path)!r}, 'stats']\n"
        "assert main() == 0\n"
        "assert seen[1] == (True, True), seen\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("ok")
