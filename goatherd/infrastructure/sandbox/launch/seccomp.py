"""The launcher's seccomp filter: metadata changes, network routes, io_uring.

Stdlib only. One filter is built from three independent parts and installed
after the Landlock restriction, before the command runs:

* **metadata** (``deny_metadata=True``, ADR 0032). Landlock has no right for
  ``chmod``, ``chown``, ``utimes`` or extended attributes, so a confined
  command can change those on any file it can reach. seccomp cannot see
  paths (a filter reads only the system call number and raw argument
  values), so the only sound refusal is everywhere: every mode, owner, time,
  extended-attribute and inode-flag change fails with ``EPERM``, inside the
  writable roots too.
* **network** (``NetworkMode.DENY``, ADR 0071). Landlock checks TCP ``bind``
  and ``connect`` only; a TCP socket still reaches the network through
  ``sendto(MSG_FASTOPEN)``, through ``listen()`` without ``bind()`` (the
  kernel binds a free port itself) and as an MPTCP or SCTP socket, which
  Landlock does not check. Under a network denial a TCP socket can do
  nothing legitimate, so ``socket()`` makes only UNIX, netlink and
  datagram (UDP, ICMP) sockets; every other family, type or protocol - TCP,
  MPTCP, SCTP, raw and packet sockets, vsock - fails with ``EACCES``, the
  errno Landlock uses. A socket that came from elsewhere is still refused
  ``MSG_FASTOPEN`` on ``sendto``, ``sendmsg`` and ``sendmmsg``.
* **io_uring** (whenever either part is on, unless ``allow_io_uring``).
  io_uring runs its operations (``IORING_OP_SETXATTR``, ``IORING_OP_SOCKET``,
  ``IORING_OP_SEND`` with ``MSG_FASTOPEN``...) without the system calls the
  other parts match, so ``io_uring_setup``, ``io_uring_enter`` and
  ``io_uring_register`` fail with ``EPERM``.

The filter checks the architecture of every call: 64-bit calls are matched
by the native numbers (x32 calls on x86_64 are refused outright), 32-bit
calls on x86_64 (``int 0x80``) by the i386 numbers - ``socketcall``, whose
arguments live in memory a filter cannot read, is refused under a network
denial - and any other architecture is refused entirely.
"""

from __future__ import annotations

import ctypes
import os

__all__ = ["SeccompError", "install_filter", "metadata_filter", "seccomp_filter"]

_LD_W_ABS = 0x20
_AND_K = 0x54
_JEQ = 0x15
_JGE = 0x35
_JSET = 0x45
_RET = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_EPERM = 0x00050000 | 1
_RET_EACCES = 0x00050000 | 13
_NR = 0
_ARCH = 4


def _arg(index: int) -> int:
    """Offset of ``seccomp_data.args[index]``'s low word (little-endian hosts)."""
    return 16 + 8 * index


_X32_BIT = 0x40000000
_SET_MODE_FILTER = 1
_PR_SET_NO_NEW_PRIVS = 38
# FS_IOC_SETFLAGS, FS_IOC32_SETFLAGS (chattr) and FS_IOC_FSSETXATTR.
_SET_ATTR_IOCTLS = (0x40086602, 0x40046602, 0x401C5820)
# Added after the per-architecture tables were split; the same on every one.
_NEW_CALLS = (452, 463, 466, 469)  # fchmodat2, setxattrat, removexattrat,
# file_setattr
_IO_URING = (425, 426, 427)  # io_uring_setup, io_uring_enter, io_uring_register
_MSG_FASTOPEN = 0x20000000
_AF_UNIX, _AF_INET, _AF_INET6, _AF_NETLINK = 1, 2, 10, 16
_SOCK_DGRAM, _SOCK_TYPE_MASK = 2, 0xF
# 0 (the type's default: UDP), ICMP, UDP, ICMPv6, UDP-Lite.
_DATAGRAM_PROTOCOLS = (0, 1, 17, 58, 136)


class _Table:
    """One architecture's audit number and the call numbers the filter needs."""

    __slots__ = ("arch", "calls", "ioctl", "sends", "socket", "socketcall", "x32")

    def __init__(
        self,
        arch: int,
        calls: tuple[int, ...],
        ioctl: int,
        socket: int,
        sends: tuple[tuple[int, int], ...],
        *,
        socketcall: int | None = None,
        x32: bool = False,
    ) -> None:
        self.arch, self.calls, self.ioctl, self.x32 = arch, calls, ioctl, x32
        self.socket, self.sends, self.socketcall = socket, sends, socketcall


_X86_64 = _Table(
    0xC000003E,
    (
        *(90, 91, 268),  # chmod, fchmod, fchmodat
        *(92, 93, 94, 260),  # chown, fchown, lchown, fchownat
        *(132, 235, 261, 280),  # utime, utimes, futimesat, utimensat
        *(188, 189, 190, 197, 198, 199),  # [l,f]setxattr, [l,f]removexattr
        *_NEW_CALLS,
    ),
    16,
    41,  # socket
    ((44, 3), (46, 2), (307, 3)),  # sendto, sendmsg, sendmmsg: (nr, flags arg)
    x32=True,
)
_I386 = _Table(
    0x40000003,
    (
        *(15, 94, 306),  # chmod, fchmod, fchmodat
        *(16, 95, 182, 198, 207, 212, 298),  # [l,f]chown[32], fchownat
        *(30, 271, 299, 320, 412),  # utime, utimes, futimesat, utimensat[_time64]
        *(226, 227, 228, 235, 236, 237),  # [l,f]setxattr, [l,f]removexattr
        *_NEW_CALLS,
    ),
    54,
    359,
    ((369, 3), (370, 2), (345, 3)),
    socketcall=102,
)
_AARCH64 = _Table(
    0xC00000B7,
    (
        *(52, 53),  # fchmod, fchmodat
        *(54, 55),  # fchownat, fchown
        88,  # utimensat
        *(5, 6, 7, 14, 15, 16),  # [l,f]setxattr, [l,f]removexattr
        *_NEW_CALLS,
    ),
    29,
    198,
    ((206, 3), (211, 2), (269, 3)),
)
_MACHINES = {
    "x86_64": ((_X86_64, _I386), 317),
    "aarch64": ((_AARCH64,), 277),
    "arm64": ((_AARCH64,), 277),
}


class SeccompError(OSError):
    """Raised when the filter cannot be built or installed."""


_Insn = tuple[int, int, int, int]


class _Assembler:
    """Classic BPF with named jump targets, resolved to 8-bit offsets."""

    def __init__(self) -> None:
        self.items: list[tuple[int, str | None, str | None, int]] = []
        self.labels: dict[str, int] = {}

    def label(self, name: str) -> None:
        self.labels[name] = len(self.items)

    def op(
        self, code: int, k: int, jt: str | None = None, jf: str | None = None
    ) -> None:
        self.items.append((code, jt, jf, k))

    def program(self) -> list[_Insn]:
        out: list[_Insn] = []
        for pc, (code, jt, jf, k) in enumerate(self.items):
            out.append((code, self._offset(pc, jt), self._offset(pc, jf), k))
        return out

    def _offset(self, pc: int, target: str | None) -> int:
        if target is None:
            return 0
        offset = self.labels[target] - pc - 1
        if not 0 <= offset < 256:
            raise SeccompError(0, f"seccomp jump to {target} out of range")
        return offset


def _block(
    asm: _Assembler,
    table: _Table,
    p: str,
    *,
    metadata: bool,
    network: bool,
    io_uring: bool,
) -> None:
    """One architecture's checks; ``p`` prefixes its labels."""
    asm.op(_LD_W_ABS, _NR)
    if table.x32:
        asm.op(_JGE, _X32_BIT, p + "eperm")
    if metadata:
        for nr in table.calls:
            asm.op(_JEQ, nr, p + "eperm")
        asm.op(_JEQ, table.ioctl, p + "ioctl")
    if io_uring:
        for nr in _IO_URING:
            asm.op(_JEQ, nr, p + "eperm")
    if network:
        if table.socketcall is not None:
            asm.op(_JEQ, table.socketcall, p + "eacces")
        asm.op(_JEQ, table.socket, p + "socket")
        for nr, flags in table.sends:
            asm.op(_JEQ, nr, p + f"flags{flags}")
    asm.op(_RET, _RET_ALLOW)
    if metadata:
        asm.label(p + "ioctl")
        asm.op(_LD_W_ABS, _arg(1))
        for cmd in _SET_ATTR_IOCTLS:
            asm.op(_JEQ, cmd, p + "eperm")
        asm.op(_RET, _RET_ALLOW)
    if network:
        _network_checks(asm, table, p)
    asm.label(p + "allow")
    asm.op(_RET, _RET_ALLOW)
    asm.label(p + "eperm")
    asm.op(_RET, _RET_EPERM)
    asm.label(p + "eacces")
    asm.op(_RET, _RET_EACCES)


def _network_checks(asm: _Assembler, table: _Table, p: str) -> None:
    asm.label(p + "socket")
    asm.op(_LD_W_ABS, _arg(0))  # family
    asm.op(_JEQ, _AF_UNIX, p + "allow")
    asm.op(_JEQ, _AF_NETLINK, p + "allow")
    asm.op(_JEQ, _AF_INET, p + "inet")
    asm.op(_JEQ, _AF_INET6, p + "inet")
    asm.op(_RET, _RET_EACCES)
    asm.label(p + "inet")
    asm.op(_LD_W_ABS, _arg(1))  # type, with SOCK_NONBLOCK / SOCK_CLOEXEC
    asm.op(_AND_K, _SOCK_TYPE_MASK)
    asm.op(_JEQ, _SOCK_DGRAM, None, p + "eacces")
    asm.op(_LD_W_ABS, _arg(2))  # protocol
    for protocol in _DATAGRAM_PROTOCOLS:
        asm.op(_JEQ, protocol, p + "allow")
    asm.op(_RET, _RET_EACCES)
    for flags in sorted({arg for _, arg in table.sends}):
        asm.label(p + f"flags{flags}")
        asm.op(_LD_W_ABS, _arg(flags))
        asm.op(_JSET, _MSG_FASTOPEN, p + "eacces", p + "allow")


def seccomp_filter(
    machine: str, *, metadata: bool, network: bool, io_uring: bool
) -> list[_Insn]:
    """Return the filter program for ``machine`` as (code, jt, jf, k) tuples.

    ``metadata`` refuses metadata changes, ``network`` the routes around a
    Landlock network denial, ``io_uring`` the io_uring system calls.

    Raises:
        SeccompError: for a machine without syscall tables here.
    """
    if machine not in _MACHINES:
        raise SeccompError(0, f"no seccomp syscall table for {machine}")
    asm = _Assembler()
    asm.op(_LD_W_ABS, _ARCH)
    tables = _MACHINES[machine][0]
    for index, table in enumerate(tables):
        asm.op(_JEQ, table.arch, None, f"arch{index + 1}")
        _block(
            asm,
            table,
            f"a{index}.",
            metadata=metadata,
            network=network,
            io_uring=io_uring,
        )
        asm.label(f"arch{index + 1}")
    asm.op(_RET, _RET_EPERM)  # an unknown architecture
    return asm.program()


def metadata_filter(machine: str) -> list[_Insn]:
    """The metadata part alone (``deny_metadata=True`` with io_uring allowed)."""
    return seccomp_filter(machine, metadata=True, network=False, io_uring=False)


class _SockFilter(ctypes.Structure):
    _fields_ = (
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    )


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter)))


def install_filter(*, metadata: bool, network: bool, io_uring: bool) -> None:
    """Install the filter on this process (inherited by everything it starts).

    Raises:
        SeccompError: when the kernel refuses the filter.
    """
    machine = os.uname().machine
    program = seccomp_filter(
        machine, metadata=metadata, network=network, io_uring=io_uring
    )
    instructions = (_SockFilter * len(program))(*(_SockFilter(*i) for i in program))
    fprog = _SockFprog(len(program), instructions)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or (
        libc.syscall(
            ctypes.c_long(_MACHINES[machine][1]),
            ctypes.c_uint(_SET_MODE_FILTER),
            ctypes.c_uint(0),
            ctypes.byref(fprog),
        )
        != 0
    ):
        errno = ctypes.get_errno()
        raise SeccompError(errno, f"seccomp(SET_MODE_FILTER): {os.strerror(errno)}")
