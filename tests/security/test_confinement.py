"""Confined commands cannot write outside their roots or reach a denied network.

Real Landlock on this kernel (skipped with the reason where the kernel has
none). Every escape route a command could try is attempted from inside the
confinement - a symlink pointing out, ``..`` components, renames in both
directions, hard links, a directory swapped for a symlink, TCP connect and
bind - and the outside tree must be byte-identical afterwards. Two limits
are pinned too (a hard link created BEFORE confinement, and metadata changes
such as chmod and utimes), so the docs cannot drift from the behaviour.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from goatherd.application import ExecRequest, NetworkMode
from goatherd.infrastructure.sandbox import LandlockBackend, landlock_abi
from tests.security.files import directory_bytes

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(landlock_abi() < 1, reason="this kernel has no Landlock"),
]
needs_network_abi = pytest.mark.skipif(
    landlock_abi() < 4, reason="TCP rules need Landlock ABI 4"
)


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    (outside / "keep.txt").write_bytes(b"precious\n")
    (outside / "sub").mkdir()
    (inside / "mine.txt").write_bytes(b"mine\n")
    return inside, outside


def confined(inside: Path, script: str, *, network: NetworkMode = NetworkMode.ALLOW):
    backend = LandlockBackend(network=network)
    return backend.run(
        ExecRequest("sh", ("-c", script)), writable_roots=[str(inside)], cwd=str(inside)
    )


def outside_tree(outside: Path) -> dict[str, dict[str, str]]:
    return {
        str(d.relative_to(outside)): directory_bytes(d)
        for d in [outside, *sorted(p for p in outside.rglob("*") if p.is_dir())]
    }


ESCAPES = {
    "symlink out": "ln -s {out} esc && echo x > esc/new.txt; echo y > esc/keep.txt",
    "dotdot": "echo x > ../outside/new.txt; echo y > ./../outside/keep.txt",
    "dotdot deep": "mkdir -p a/b && cd a/b && echo x > ../../../outside/new.txt",
    "rename out": "mv mine.txt {out}/moved.txt",
    "rename in": "mv {out}/keep.txt stolen.txt",
    "rename dir in": "mv {out}/sub stolen-dir",
    "hard link in": "ln {out}/keep.txt hl.txt && echo y >> hl.txt",
    "hard link out": "ln mine.txt {out}/hl.txt",
    "truncate": ": > {out}/keep.txt",
    "remove": "rm -f {out}/keep.txt; rmdir {out}/sub",
    "mkfifo": "mkfifo {out}/fifo",
    "swap dir for link": "mkdir d && mv d d2 && ln -s {out} d && echo x > d/new.txt",
    "python open": (
        f"{sys.executable} -c \"open('{{out}}/new.txt','w').write('x')\"; "
        f"{sys.executable} -c \"import os; os.rename('mine.txt', '{{out}}/r.txt')\""
    ),
}


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_a_confined_command_cannot_change_anything_outside_its_root(
    roots: tuple[Path, Path], name: str
) -> None:
    inside, outside = roots
    before = outside_tree(outside)
    confined(inside, ESCAPES[name].format(out=outside) + "; exit 0")
    assert outside_tree(outside) == before
    # What stayed inside is still there (a refused rename moved nothing).
    if name.startswith("rename out"):
        assert (inside / "mine.txt").read_bytes() == b"mine\n"


def test_writing_inside_the_root_still_works(roots: tuple[Path, Path]) -> None:
    inside, _ = roots
    result = confined(
        inside, "echo ok > made.txt && mv made.txt moved.txt && cat moved.txt"
    )
    assert result.stdout == b"ok\n"


def test_a_hard_link_made_before_confinement_is_the_documented_limit(
    roots: tuple[Path, Path],
) -> None:
    # docs/containment.md: "a file under a root that is a hard link to an
    # outside inode is writable through the root". Pin it so the doc stays true.
    inside, outside = roots
    os.link(outside / "keep.txt", inside / "pre-linked.txt")
    confined(inside, "echo appended >> pre-linked.txt")
    assert (outside / "keep.txt").read_bytes() == b"precious\nappended\n"


def test_metadata_changes_outside_the_root_are_not_confined(
    roots: tuple[Path, Path],
) -> None:
    # Landlock handles no right for chmod, chown or utimes: a confined command
    # can change the mode and times (never the bytes) of an outside file.
    # Pinned so docs/reliability.md and docs/containment.md stay true.
    inside, outside = roots
    confined(
        inside, f"chmod 600 {outside}/keep.txt; touch -d 2001-01-01 {outside}/keep.txt"
    )
    stat = (outside / "keep.txt").stat()
    assert (stat.st_mode & 0o777, int(stat.st_mtime)) == (0o600, 978307200)
    assert (outside / "keep.txt").read_bytes() == b"precious\n"


@pytest.fixture
def listener() -> Iterator[int]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    try:
        yield server.getsockname()[1]
    finally:
        server.close()


def _python(code: str) -> str:
    return f'{sys.executable} -c "{code}"'


@needs_network_abi
def test_a_denied_command_can_neither_connect_nor_listen_on_tcp(
    roots: tuple[Path, Path], listener: int
) -> None:
    inside, _ = roots
    connect = (
        "import socket\n"
        "try: s=socket.socket(); s.settimeout(5); "
        f"s.connect(('127.0.0.1',{listener})); print('connected')\n"
        "except OSError as e: print('refused',e.errno)\n"
        "try: b=socket.socket(); b.bind(('127.0.0.1',0)); b.listen(1); "
        "print('listening')\n"
        "except OSError as e: print('bind refused',e.errno)\n"
    )
    (inside / "net.py").write_text(connect)
    result = LandlockBackend(network=NetworkMode.DENY).run(
        ExecRequest(sys.executable, ("net.py",)),
        writable_roots=[str(inside)],
        cwd=str(inside),
    )
    lines = result.stdout.decode().splitlines()
    assert lines[0].startswith("refused")
    assert lines[1].startswith("bind refused")
    # The same program with the network allowed connects: the denial is real.
    allowed = LandlockBackend().run(
        ExecRequest(sys.executable, ("net.py",)),
        writable_roots=[str(inside)],
        cwd=str(inside),
    )
    assert allowed.stdout.decode().splitlines()[0] == "connected"
