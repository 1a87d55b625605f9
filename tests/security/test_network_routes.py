"""The routes around a Landlock network denial, and io_uring, are closed.

Landlock's network rights check TCP ``bind`` and ``connect`` only. Each test
runs a real confined command against a real listener of the host on
127.0.0.1 (loopback only, every wait bounded) and checks both what the
command saw and that the host accepted nothing:

* ``sendto(MSG_FASTOPEN)`` connects without ``connect()``;
* an ``IPPROTO_MPTCP`` socket is not a TCP socket to Landlock;
* ``listen()`` without ``bind()`` binds a free port itself and accepts;
* io_uring runs ``IORING_OP_SETXATTR`` (and socket operations) without the
  system calls the seccomp filter matches.

The launcher's seccomp filter (ADR 0071) closes all four; the same commands
without the denial work, so each refusal is the filter's.
"""

from __future__ import annotations

import os
import platform
import select
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from goatherd.application import ExecRequest, ExecResult, NetworkMode
from goatherd.infrastructure.sandbox import LandlockBackend, landlock_abi
from tests.infrastructure.sandbox.native import compile_c, needs_gcc

EACCES, EPERM = 13, 1
IO_URING_SOURCE = Path(__file__).with_name("io_uring_setxattr.c")
I386_SOURCE = Path(__file__).with_name("socket_calls_i386.c")

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(landlock_abi() < 4, reason="TCP rules need Landlock ABI 4"),
]


@pytest.fixture
def inside(tmp_path: Path) -> Path:
    root = tmp_path / "inside"
    root.mkdir()
    return root


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.setblocking(False)
    try:
        yield server
    finally:
        server.close()


def accepted(server: socket.socket, wait: float = 0.5) -> bool:
    """Whether a connection reached ``server`` (waits at most ``wait`` s)."""
    ready, _, _ = select.select([server], [], [], wait)
    if not ready:
        return False
    conn, _ = server.accept()
    conn.close()
    return True


def run(backend: LandlockBackend, code: str, inside: Path) -> ExecResult:
    return backend.run(
        ExecRequest(sys.executable, ("-c", code), timeout=30.0),
        writable_roots=[str(inside)],
        cwd=str(inside),
    )


DENY = LandlockBackend(network=NetworkMode.DENY)


def fastopen(port: int) -> str:
    return (
        "import socket\n"
        "try: s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
        "except OSError as e: print('socket', e.errno); raise SystemExit\n"
        "try:\n"
        f"    s.sendto(b'x', socket.MSG_FASTOPEN, ('127.0.0.1', {port}))\n"
        "    print('sent')\n"
        "except OSError as e: print('sendto', e.errno)\n"
    )


def mptcp(port: int) -> str:
    return (
        "import socket\n"
        "try: s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)\n"
        "except OSError as e: print('socket', e.errno); raise SystemExit\n"
        f"try: s.connect(('127.0.0.1', {port})); print('connected')\n"
        "except OSError as e: print('connect', e.errno)\n"
    )


def test_sendto_with_msg_fastopen_is_refused_and_the_host_accepts_nothing(
    inside: Path, listener: socket.socket
) -> None:
    port = listener.getsockname()[1]
    result = run(DENY, fastopen(port), inside)
    assert result.stdout == f"socket {EACCES}\n".encode(), result.stderr
    assert not accepted(listener)
    # Allowed, the same command reaches the listener: the refusal is real.
    allowed = run(LandlockBackend(), fastopen(port), inside)
    assert allowed.stdout == b"sent\n"
    assert accepted(listener, 5.0)


def test_an_mptcp_socket_is_refused_and_the_host_accepts_nothing(
    inside: Path, listener: socket.socket
) -> None:
    port = listener.getsockname()[1]
    result = run(DENY, mptcp(port), inside)
    assert result.stdout == f"socket {EACCES}\n".encode(), result.stderr
    assert not accepted(listener)
    allowed = run(LandlockBackend(), mptcp(port), inside)
    if allowed.stdout.startswith(b"socket"):
        pytest.skip("this kernel has no MPTCP, the allowed run cannot compare")
    assert allowed.stdout == b"connected\n"
    assert accepted(listener, 5.0)


LISTEN = (
    "import socket\n"
    "try: s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"
    "except OSError as e: print('socket', e.errno); raise SystemExit\n"
    "try: s.listen(1)\n"
    "except OSError as e: print('listen', e.errno); raise SystemExit\n"
    "open('port.tmp', 'w').write(str(s.getsockname()[1]))\n"
    "__import__('os').rename('port.tmp', 'port')\n"
    "s.settimeout(10)\n"
    "try: s.accept(); print('accepted')\n"
    "except OSError as e: print('accept', e)\n"
)


def listen_and_dial(backend: LandlockBackend, inside: Path) -> tuple[bytes, bool]:
    """Run ``LISTEN``; dial the port it reports; (its stdout, host connected)."""
    results: list[ExecResult] = []
    worker = threading.Thread(
        target=lambda: results.append(run(backend, LISTEN, inside))
    )
    worker.start()
    connected = False
    deadline = time.monotonic() + 20.0
    while worker.is_alive() and time.monotonic() < deadline:
        if (inside / "port").exists():
            port = int((inside / "port").read_text())
            with socket.socket() as dial:
                dial.settimeout(5.0)
                connected = dial.connect_ex(("127.0.0.1", port)) == 0
            break
        time.sleep(0.02)
    worker.join(30.0)
    assert results, "the confined command did not finish"
    return results[0].stdout, connected


def test_listen_without_bind_is_refused_and_no_host_connection_is_accepted(
    inside: Path,
) -> None:
    stdout, connected = listen_and_dial(DENY, inside)
    assert stdout == f"socket {EACCES}\n".encode()
    assert not connected
    assert not (inside / "port").exists()
    # Allowed, the kernel binds a port itself and the host's dial is accepted.
    stdout, connected = listen_and_dial(LandlockBackend(), inside)
    assert (stdout, connected) == (b"accepted\n", True)


def test_unix_servers_udp_and_netlink_keep_working_under_the_denial(
    inside: Path,
) -> None:
    code = (
        "import socket\n"
        "srv = socket.socket(socket.AF_UNIX); srv.bind('s.sock'); srv.listen(1)\n"
        "cli = socket.socket(socket.AF_UNIX); cli.connect('s.sock')\n"
        "conn, _ = srv.accept(); cli.sendall(b'hi'); print(conn.recv(2).decode())\n"
        "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)\n"
        "u6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)\n"
        "n = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)\n"
        "a, b = socket.socketpair(); a.send(b'x', socket.MSG_DONTWAIT); print('ok')\n"
        "for fam, typ, proto in [(socket.AF_INET, socket.SOCK_RAW, 6),\n"
        "        (socket.AF_INET6, socket.SOCK_STREAM, 0),\n"
        "        (socket.AF_INET, socket.SOCK_SEQPACKET, 0), (17, 3, 0), (40, 1, 0)]:\n"
        "    try: socket.socket(fam, typ, proto); print('made', fam, typ)\n"
        "    except OSError as e: print(e.errno)\n"
    )
    result = run(DENY, code, inside)
    assert result.stdout.decode().split() == ["hi", "ok", *[str(EACCES)] * 5], (
        result.stderr
    )


@needs_gcc
@pytest.mark.skipif(platform.machine() != "x86_64", reason="int 0x80 is x86_64's")
def test_32_bit_socket_calls_are_held_to_the_same_rules(
    inside: Path, tmp_path: Path
) -> None:
    program = compile_c(
        tmp_path, "socket_calls_i386", I386_SOURCE.read_text(), "-no-pie"
    )
    request = ExecRequest(str(program), timeout=30.0)
    allowed = LandlockBackend().run(
        request, writable_roots=[str(inside)], cwd=str(inside)
    )
    free = dict(line.split() for line in allowed.stdout.decode().splitlines())
    if free.get("i386_udp") != "0":
        pytest.skip("this kernel does not run 32-bit system calls")
    denied = DENY.run(request, writable_roots=[str(inside)], cwd=str(inside))
    errnos = dict(line.split() for line in denied.stdout.decode().splitlines())
    assert errnos == {
        "i386_tcp": str(EACCES),
        "i386_mptcp": str(EACCES),
        "i386_udp": "0",
        "i386_socketcall": str(EACCES),
    }
    assert free["i386_tcp"] == free["i386_socketcall"] == "0"


# ---------------------------------------------------------------- io_uring


@pytest.fixture(scope="module")
def io_uring_program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    build = tmp_path_factory.mktemp("io_uring")
    return compile_c(build, "io_uring_setxattr", IO_URING_SOURCE.read_text())


@pytest.fixture
def outside_file(tmp_path: Path) -> Path:
    target = tmp_path / "outside" / "keep.txt"
    target.parent.mkdir()
    target.write_bytes(b"precious\n")
    try:
        os.setxattr(target, "user.probe", b"1")
        os.removexattr(target, "user.probe")
    except OSError:
        pytest.skip("this filesystem has no user extended attributes")
    return target


def io_uring_setxattr(
    backend: LandlockBackend, program: Path, inside: Path, target: Path
) -> str:
    result = backend.run(
        ExecRequest(str(program), (str(target),), timeout=30.0),
        writable_roots=[str(inside)],
        cwd=str(inside),
    )
    assert result.exit_code == 0, result.stderr
    return result.stdout.decode().strip()


def xattrs(path: Path) -> list[str]:
    return os.listxattr(path)


@needs_gcc
@pytest.mark.parametrize(
    "backend",
    [
        LandlockBackend(deny_metadata=True),
        LandlockBackend(network=NetworkMode.DENY),
        LandlockBackend(network=NetworkMode.DENY, deny_metadata=True),
    ],
    ids=["deny_metadata", "network_deny", "both"],
)
def test_io_uring_is_refused_whenever_the_filter_is_installed(
    backend: LandlockBackend, io_uring_program: Path, inside: Path, outside_file: Path
) -> None:
    verdict = io_uring_setxattr(backend, io_uring_program, inside, outside_file)
    assert verdict == f"setup {EPERM}"
    assert xattrs(outside_file) == []


@needs_gcc
def test_allow_io_uring_reopens_setxattr_outside_the_roots(
    io_uring_program: Path, inside: Path, outside_file: Path
) -> None:
    # Why io_uring is refused: with it allowed, IORING_OP_SETXATTR changes a
    # file outside the roots although deny_metadata refuses setxattr(2).
    backend = LandlockBackend(deny_metadata=True, allow_io_uring=True)
    verdict = io_uring_setxattr(backend, io_uring_program, inside, outside_file)
    assert verdict == "setxattr 0"
    assert os.getxattr(outside_file, "user.goatherd") == b"io_uring"


@needs_gcc
def test_without_a_denial_there_is_no_filter_and_io_uring_works(
    io_uring_program: Path, inside: Path, outside_file: Path
) -> None:
    # No filter: metadata is not confined at all (docs/containment.md).
    verdict = io_uring_setxattr(
        LandlockBackend(), io_uring_program, inside, outside_file
    )
    assert verdict == "setxattr 0"
