"""An opt-in seccomp filter refusing metadata changes (stdlib only).

Landlock has no right for ``chmod``, ``chown``, ``utimes`` or extended
attributes, so a confined command can change those on any file it can reach.
seccomp cannot see paths (a filter reads only the system call number and
raw argument values), so the only sound refusal is everywhere: with the
filter installed every mode, owner, time, extended-attribute and inode-flag
change fails with ``EPERM``, inside the writable roots too. The launcher
installs it only when the host asks (ADR 0032).

The filter checks the architecture of every call: 64-bit calls are matched
by the native numbers (x32 calls on x86_64 are refused outright), 32-bit
calls on x86_64 (``int 0x80``) by the i386 numbers, and any other
architecture is refused entirely.
"""

from __future__ import annotations

import ctypes
import os

__all__ = ["SeccompError", "deny_metadata_changes", "metadata_filter"]

_LD_W_ABS = 0x20
_JEQ = 0x15
_JGE = 0x35
_RET = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_EPERM = 0x00050000 | 1
_NR = 0
_ARCH = 4
_ARG1_LOW = 24  # seccomp_data.args[1], low word (little-endian hosts)
_X32_BIT = 0x40000000
_SET_MODE_FILTER = 1
_PR_SET_NO_NEW_PRIVS = 38
# FS_IOC_SETFLAGS, FS_IOC32_SETFLAGS (chattr) and FS_IOC_FSSETXATTR.
_SET_ATTR_IOCTLS = (0x40086602, 0x40046602, 0x401C5820)
# Added after the per-architecture tables were split; the same on every one.
_NEW_CALLS = (452, 463, 466, 469)  # fchmodat2, setxattrat, removexattrat,
# file_setattr


class _Table:
    """One architecture's audit number, call numbers and ioctl number."""

    __slots__ = ("arch", "calls", "ioctl", "x32")

    def __init__(
        self, arch: int, calls: tuple[int, ...], ioctl: int, *, x32: bool = False
    ) -> None:
        self.arch, self.calls, self.ioctl, self.x32 = arch, calls, ioctl, x32


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
)
_MACHINES = {
    "x86_64": ((_X86_64, _I386), 317),
    "aarch64": ((_AARCH64,), 277),
    "arm64": ((_AARCH64,), 277),
}


class SeccompError(OSError):
    """Raised when the filter cannot be built or installed."""


_Insn = tuple[int, int, int, int]


def _block(table: _Table) -> list[_Insn]:
    """Instructions for one architecture, ending in ALLOW then DENY."""
    checks: list[tuple[int, int]] = []
    if table.x32:
        checks.append((_JGE, _X32_BIT))
    checks += [(_JEQ, nr) for nr in table.calls]
    size = 1 + len(checks) + 2 + len(_SET_ATTR_IOCTLS) + 2
    deny, allow = size - 1, size - 2
    out: list[_Insn] = [(_LD_W_ABS, 0, 0, _NR)]
    for op, k in checks:
        out.append((op, deny - len(out) - 1, 0, k))
    out.append((_JEQ, 0, allow - len(out) - 1, table.ioctl))
    out.append((_LD_W_ABS, 0, 0, _ARG1_LOW))
    for cmd in _SET_ATTR_IOCTLS:
        out.append((_JEQ, deny - len(out) - 1, 0, cmd))
    out += [(_RET, 0, 0, _RET_ALLOW), (_RET, 0, 0, _RET_EPERM)]
    assert len(out) == size
    return out


def metadata_filter(machine: str) -> list[_Insn]:
    """Return the filter program for ``machine`` as (code, jt, jf, k) tuples.

    Raises:
        SeccompError: for a machine without syscall tables here.
    """
    if machine not in _MACHINES:
        raise SeccompError(0, f"no seccomp syscall table for {machine}")
    program: list[_Insn] = [(_LD_W_ABS, 0, 0, _ARCH)]
    for table in _MACHINES[machine][0]:
        block = _block(table)
        program.append((_JEQ, 0, len(block), table.arch))
        program += block
    program.append((_RET, 0, 0, _RET_EPERM))  # an unknown architecture
    return program


class _SockFilter(ctypes.Structure):
    _fields_ = (
        ("code", ctypes.c_uint16),
        ("jt", ctypes.c_uint8),
        ("jf", ctypes.c_uint8),
        ("k", ctypes.c_uint32),
    )


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter)))


def deny_metadata_changes() -> None:
    """Install the filter on this process (inherited by everything it starts).

    Raises:
        SeccompError: when the kernel refuses the filter.
    """
    machine = os.uname().machine
    program = metadata_filter(machine)
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
