"""The opt-in seccomp filter refusing metadata changes (``deny_metadata=True``).

Landlock has no right for chmod, chown, utimes or extended attributes; the
filter refuses them everywhere (seccomp cannot see paths). A C program built
in the test issues every covered system call directly - native 64-bit, x32
and 32-bit ``int 0x80`` on x86_64 - against a file outside the roots: with the
filter each one fails with EPERM and the file's metadata is unchanged;
without it none fails with EPERM (so the refusal is the filter's). The
aarch64 program, which cannot run here, is checked by evaluating it.
"""

from __future__ import annotations

import os
import platform
import struct
import subprocess
from pathlib import Path

import pytest

from goatherd.application import ExecRequest
from goatherd.infrastructure.sandbox import LandlockBackend, landlock_abi
from goatherd.infrastructure.sandbox.launch.seccomp import (
    SeccompError,
    metadata_filter,
    seccomp_filter,
)
from tests.infrastructure.sandbox.native import compile_c, needs_gcc

EPERM = 1
SOURCE = Path(__file__).with_name("metadata_calls.c")
COVERED = [
    *("chmod", "fchmod", "fchmodat", "fchmodat2"),
    *("chown", "fchown", "lchown", "fchownat"),
    *("utime", "utimes", "futimesat", "utimensat"),
    *("setxattr", "lsetxattr", "fsetxattr"),
    *("removexattr", "lremovexattr", "fremovexattr"),
    *("setxattrat", "removexattrat", "file_setattr"),
    *("ioctl_setflags", "ioctl_setflags32", "ioctl_fssetxattr"),
]


def x86_only(ia32: bool) -> list[str]:
    return ["x32_chmod", "i386_chmod"] if ia32 else ["x32_chmod"]


on_x86_64 = pytest.mark.skipif(
    platform.machine() != "x86_64", reason="the C program's syscall numbers are x86_64"
)


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    build = tmp_path_factory.mktemp("metadata")
    return compile_c(build, "metadata_calls", SOURCE.read_text(), "-no-pie")


@pytest.fixture(scope="module")
def ia32(program: Path, tmp_path_factory: pytest.TempPathFactory) -> bool:
    """Whether this kernel runs 32-bit calls (``int 0x80``) of 64-bit programs.

    The probe really makes every metadata call on its argument (chmod 0600,
    chown, utimes...), so it gets a scratch file: run on a shared file such
    as /dev/null as root, it would change that file for the whole machine.
    """
    scratch = tmp_path_factory.mktemp("probe") / "target"
    scratch.write_bytes(b"")
    probe = subprocess.run(
        [str(program), str(scratch), "i386"], capture_output=True, check=False
    )
    return probe.returncode == 0 and b"i386_getpid ok" in probe.stdout


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    inside, outside = tmp_path / "inside", tmp_path / "outside"
    inside.mkdir()
    outside.mkdir()
    target = outside / "keep.txt"
    target.write_bytes(b"precious\n")
    os.chmod(target, 0o644)
    os.utime(target, (1_000_000_000, 1_000_000_000))
    return inside, outside


def _errnos(
    backend: LandlockBackend, program: Path, inside: Path, target: Path, ia32: bool
) -> dict[str, str]:
    result = backend.run(
        ExecRequest(str(program), (str(target), "i386" if ia32 else "")),
        writable_roots=[str(inside)],
        cwd=str(inside),
    )
    assert result.exit_code == 0, result.stderr
    return dict(line.split() for line in result.stdout.decode().splitlines())


def _metadata(path: Path) -> tuple[int, int, int, int]:
    stat = path.stat()
    return stat.st_mode, stat.st_uid, stat.st_gid, stat.st_mtime_ns


@pytest.mark.integration
@pytest.mark.skipif(landlock_abi() < 1, reason="this kernel has no Landlock")
@needs_gcc
@on_x86_64
class TestOnThisKernel:
    def test_every_metadata_call_is_refused_with_eperm_and_changes_nothing(
        self, program: Path, roots: tuple[Path, Path], ia32: bool
    ) -> None:
        inside, outside = roots
        target = outside / "keep.txt"
        before = _metadata(target)
        backend = LandlockBackend(deny_metadata=True)
        errnos = _errnos(backend, program, inside, target, ia32)
        covered = COVERED + x86_only(ia32)
        assert {n: errnos[n] for n in covered} == {n: str(EPERM) for n in covered}
        assert _metadata(target) == before
        # Calls outside the list still work, in 64-bit and in 32-bit mode.
        assert errnos["ioctl_getflags"] != str(EPERM)
        if ia32:
            assert errnos["i386_getpid"] == "ok"

    def test_without_the_filter_no_call_fails_with_eperm(
        self, program: Path, roots: tuple[Path, Path], ia32: bool
    ) -> None:
        inside, outside = roots
        target = outside / "keep.txt"
        errnos = _errnos(LandlockBackend(), program, inside, target, ia32)
        covered = COVERED + x86_only(ia32)
        assert [n for n in covered if errnos[n] == str(EPERM)] == []
        assert target.stat().st_mode & 0o777 == 0o600  # chmod is not confined

    def test_the_filter_also_applies_inside_the_roots(
        self, roots: tuple[Path, Path]
    ) -> None:
        inside, _ = roots
        (inside / "script.sh").write_text("echo hi\n")
        result = LandlockBackend(deny_metadata=True).run(
            ExecRequest("sh", ("-c", "chmod +x script.sh; echo $?; cat script.sh")),
            writable_roots=[str(inside)],
            cwd=str(inside),
        )
        assert result.stdout.splitlines()[0] != b"0"
        assert b"Operation not permitted" in result.stderr
        assert result.stdout.splitlines()[1] == b"echo hi"
        assert (inside / "script.sh").stat().st_mode & 0o111 == 0


# ---------------------------------------------------------------- the programs

AUDIT_ARCH = {"x86_64": 0xC000003E, "i386": 0x40000003, "aarch64": 0xC00000B7}
ALLOW, DENY = 0x7FFF0000, 0x00050000 | EPERM


def evaluate(program: list[tuple[int, int, int, int]], data: bytes) -> int:
    """Run a classic BPF seccomp program on one ``seccomp_data``."""
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = program[pc]
        if code == 0x20:  # ld [k]
            (acc,) = struct.unpack_from("<I", data, k)
            pc += 1
        elif code in (0x15, 0x35, 0x45):  # jeq / jge / jset
            taken = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += 1 + (jt if taken else jf)
        elif code == 0x54:  # and #k
            acc &= k
            pc += 1
        elif code == 0x06:  # ret
            return k
        else:
            raise AssertionError(f"unexpected opcode {code:#x}")


def data(arch: str, nr: int, *args: int) -> bytes:
    padded = (*args, 0, 0, 0, 0, 0, 0)[:6]
    return struct.pack("<iIQ6Q", nr, AUDIT_ARCH[arch], 0, *padded)


PARTS = [
    {"metadata": m, "network": n, "io_uring": i}
    for m in (False, True)
    for n in (False, True)
    for i in (False, True)
]


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
@pytest.mark.parametrize("parts", PARTS, ids=str)
def test_every_jump_of_the_program_lands_inside_it(
    machine: str, parts: dict[str, bool]
) -> None:
    program = seccomp_filter(machine, **parts)
    for pc, (code, jt, jf, _) in enumerate(program):
        if code in (0x15, 0x35, 0x45):
            assert pc + 1 + max(jt, jf) < len(program)
    assert program[-1][0] == 0x06


@pytest.mark.parametrize(
    ("arch", "nr", "arg1", "verdict"),
    [
        ("aarch64", 52, 0, DENY),  # fchmod
        ("aarch64", 53, 0, DENY),  # fchmodat
        ("aarch64", 54, 0, DENY),  # fchownat
        ("aarch64", 88, 0, DENY),  # utimensat
        ("aarch64", 5, 0, DENY),  # setxattr
        ("aarch64", 452, 0, DENY),  # fchmodat2
        ("aarch64", 172, 0, ALLOW),  # getpid
        ("aarch64", 56, 0, ALLOW),  # openat
        ("aarch64", 29, 0x40086602, DENY),  # ioctl FS_IOC_SETFLAGS
        ("aarch64", 29, 0x80086601, ALLOW),  # ioctl FS_IOC_GETFLAGS
        ("i386", 15, 0, DENY),  # a 32-bit ARM or i386 call on aarch64: refused
    ],
)
def test_the_aarch64_program_refuses_exactly_the_metadata_calls(
    arch: str, nr: int, arg1: int, verdict: int
) -> None:
    assert evaluate(metadata_filter("aarch64"), data(arch, nr, 0, arg1)) == verdict


def test_a_machine_without_tables_is_refused_by_name() -> None:
    with pytest.raises(SeccompError, match="riscv64"):
        metadata_filter("riscv64")


EACCES_RET = 0x00050000 | 13
AF_INET, AF_INET6, AF_UNIX, AF_NETLINK, AF_PACKET, AF_VSOCK = 2, 10, 1, 16, 17, 40
STREAM, DGRAM, RAW, SEQPACKET, NONBLOCK = 1, 2, 3, 5, 0o4000
FASTOPEN, DONTWAIT = 0x20000000, 0x40
# Per architecture: socket, sendto, sendmsg, sendmmsg, io_uring_setup.
NETWORK_NRS = {
    "x86_64": (41, 44, 46, 307, 425),
    "i386": (359, 369, 370, 345, 425),
    "aarch64": (198, 206, 211, 269, 425),
}
CASES = [
    # (socket args | None for the send calls, send flags, verdict)
    ((AF_INET, STREAM, 0), EACCES_RET),
    ((AF_INET6, STREAM | NONBLOCK, 6), EACCES_RET),
    ((AF_INET, STREAM, 262), EACCES_RET),  # MPTCP
    ((AF_INET6, STREAM, 262), EACCES_RET),
    ((AF_INET, SEQPACKET, 0), EACCES_RET),  # SCTP
    ((AF_INET, STREAM, 132), EACCES_RET),
    ((AF_INET, RAW, 6), EACCES_RET),
    ((AF_PACKET, RAW, 0), EACCES_RET),
    ((AF_VSOCK, STREAM, 0), EACCES_RET),
    ((AF_INET, DGRAM, 0), ALLOW),
    ((AF_INET6, DGRAM | NONBLOCK, 17), ALLOW),
    ((AF_INET, DGRAM, 1), ALLOW),  # ping socket
    ((AF_INET, DGRAM, 262), EACCES_RET),
    ((AF_UNIX, STREAM, 0), ALLOW),
    ((AF_NETLINK, RAW, 0), ALLOW),
]


@pytest.mark.parametrize(
    "machine_arch", [("x86_64", "x86_64"), ("x86_64", "i386"), ("aarch64", "aarch64")]
)
@pytest.mark.parametrize(("args", "verdict"), CASES)
def test_the_network_part_makes_only_unix_netlink_and_datagram_sockets(
    machine_arch: tuple[str, str], args: tuple[int, int, int], verdict: int
) -> None:
    machine, arch = machine_arch
    program = seccomp_filter(machine, metadata=False, network=True, io_uring=True)
    nr = NETWORK_NRS[arch][0]
    assert evaluate(program, data(arch, nr, *args)) == verdict
    # Without the network part every socket is left to Landlock.
    off = seccomp_filter(machine, metadata=True, network=False, io_uring=True)
    assert evaluate(off, data(arch, nr, *args)) == ALLOW


@pytest.mark.parametrize("arch", ["x86_64", "i386", "aarch64"])
def test_msg_fastopen_is_refused_on_every_send_call(arch: str) -> None:
    machine = "aarch64" if arch == "aarch64" else "x86_64"
    program = seccomp_filter(machine, metadata=False, network=True, io_uring=True)
    _, sendto, sendmsg, sendmmsg, _ = NETWORK_NRS[arch]
    for nr, at in ((sendto, 3), (sendmsg, 2), (sendmmsg, 3)):
        args = [7, 0, 0, 0, 0, 0]
        args[at] = FASTOPEN | DONTWAIT
        assert evaluate(program, data(arch, nr, *args)) == EACCES_RET
        args[at] = DONTWAIT
        assert evaluate(program, data(arch, nr, *args)) == ALLOW


def test_the_32_bit_socketcall_is_refused_under_a_network_denial() -> None:
    program = seccomp_filter("x86_64", metadata=False, network=True, io_uring=True)
    assert evaluate(program, data("i386", 102, 1)) == EACCES_RET
    off = seccomp_filter("x86_64", metadata=True, network=False, io_uring=True)
    assert evaluate(off, data("i386", 102, 1)) == ALLOW


@pytest.mark.parametrize("arch", ["x86_64", "i386", "aarch64"])
@pytest.mark.parametrize("nr", [425, 426, 427])
def test_io_uring_is_refused_only_when_asked(arch: str, nr: int) -> None:
    machine = "aarch64" if arch == "aarch64" else "x86_64"
    on = seccomp_filter(machine, metadata=True, network=False, io_uring=True)
    assert evaluate(on, data(arch, nr)) == DENY
    off = seccomp_filter(machine, metadata=True, network=False, io_uring=False)
    assert evaluate(off, data(arch, nr)) == ALLOW
