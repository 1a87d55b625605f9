"""Landlock system calls: the ABI probe and the self-restriction (stdlib only).

``restrict_self`` builds a ruleset handling every write-type right the ABI
knows, allows them beneath the writable roots, sets ``PR_SET_NO_NEW_PRIVS``
and calls ``landlock_restrict_self``: from then on this process and everything
it starts can write only beneath the roots. The launcher calls it in the
forked child just before ``execve``; the host calls ``abi_version`` to probe.
"""

from __future__ import annotations

import ctypes
import os

__all__ = [
    "ACCESS_FS_MAKE_REG",
    "ACCESS_FS_WRITE_FILE",
    "LandlockSyscallError",
    "abi_version",
    "restrict_self",
    "write_rights",
]

_SYSCALLS = {"x86_64": 444, "aarch64": 444, "arm64": 444, "riscv64": 444}
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

ACCESS_FS_EXECUTE = 1 << 0
ACCESS_FS_WRITE_FILE = 1 << 1
ACCESS_FS_READ_FILE = 1 << 2
ACCESS_FS_READ_DIR = 1 << 3
ACCESS_FS_REMOVE_DIR = 1 << 4
ACCESS_FS_REMOVE_FILE = 1 << 5
ACCESS_FS_MAKE_CHAR = 1 << 6
ACCESS_FS_MAKE_DIR = 1 << 7
ACCESS_FS_MAKE_REG = 1 << 8
ACCESS_FS_MAKE_SOCK = 1 << 9
ACCESS_FS_MAKE_FIFO = 1 << 10
ACCESS_FS_MAKE_BLOCK = 1 << 11
ACCESS_FS_MAKE_SYM = 1 << 12
ACCESS_FS_REFER = 1 << 13  # ABI 2
ACCESS_FS_TRUNCATE = 1 << 14  # ABI 3
ACCESS_NET_BIND_TCP = 1 << 0  # ABI 4
ACCESS_NET_CONNECT_TCP = 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

_FILE_RIGHTS = ACCESS_FS_WRITE_FILE | ACCESS_FS_TRUNCATE


class LandlockSyscallError(OSError):
    """A Landlock system call failed (the errno says why)."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _syscall(offset: int, *args: object) -> int:
    base = _SYSCALLS.get(os.uname().machine)
    if base is None:
        raise LandlockSyscallError(
            0, f"no Landlock syscall numbers for {os.uname().machine}"
        )
    result = int(_libc().syscall(ctypes.c_long(base + offset), *args))
    if result < 0:
        errno = ctypes.get_errno()
        raise LandlockSyscallError(errno, os.strerror(errno))
    return result


def abi_version() -> int:
    """Return the kernel's Landlock ABI version, or 0 when it has none."""
    if os.uname().sysname != "Linux":
        return 0
    try:
        return _syscall(
            0, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)
        )
    except LandlockSyscallError:
        return 0


def write_rights(abi: int) -> int:
    """Return every write-type filesystem right the given ABI can handle."""
    rights = (
        ACCESS_FS_WRITE_FILE
        | ACCESS_FS_REMOVE_DIR
        | ACCESS_FS_REMOVE_FILE
        | ACCESS_FS_MAKE_CHAR
        | ACCESS_FS_MAKE_DIR
        | ACCESS_FS_MAKE_REG
        | ACCESS_FS_MAKE_SOCK
        | ACCESS_FS_MAKE_FIFO
        | ACCESS_FS_MAKE_BLOCK
        | ACCESS_FS_MAKE_SYM
    )
    if abi >= 2:
        rights |= ACCESS_FS_REFER
    if abi >= 3:
        rights |= ACCESS_FS_TRUNCATE
    return rights


def _add_path(ruleset: int, path: str, handled: int) -> None:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        allowed = handled if os.path.isdir(path) else handled & _FILE_RIGHTS
        rule = _PathBeneathAttr(allowed, fd)
        _syscall(
            1,
            ctypes.c_int(ruleset),
            ctypes.c_int(_RULE_PATH_BENEATH),
            ctypes.byref(rule),
            ctypes.c_uint32(0),
        )
    finally:
        os.close(fd)


def restrict_self(writable: list[str], deny_network: bool, abi: int) -> None:
    """Confine this process: writes only beneath ``writable``; maybe no TCP.

    Raises:
        LandlockSyscallError: when any step fails (the process may then be
            partially restricted and must not run the command).
    """
    handled = write_rights(abi)
    attr = _RulesetAttr(handled, 0, 0)
    if deny_network:
        attr.handled_access_net = ACCESS_NET_BIND_TCP | ACCESS_NET_CONNECT_TCP
    if abi >= 6:
        attr.scoped = SCOPE_SIGNAL | (SCOPE_ABSTRACT_UNIX_SOCKET if deny_network else 0)
    ruleset = _syscall(
        0, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0)
    )
    try:
        for path in writable:
            _add_path(ruleset, path, handled)
        if _libc().prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            errno = ctypes.get_errno()
            raise LandlockSyscallError(
                errno, f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(errno)}"
            )
        _syscall(2, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
