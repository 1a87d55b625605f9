"""Checking an exec request before anything runs: types, NUL bytes, names.

Every field of an ``ExecRequest`` reaches ``execve`` or the launcher's pipe;
a wrong type or an embedded NUL is refused here with a one-line error naming
the field, instead of failing somewhere below with a driver message.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from goatherd.application.errors import InvalidExecRequestError
from goatherd.application.ports import ExecRequest

__all__ = ["checked_output_limit", "checked_request"]


def _text(value: object, what: str, *, empty: bool = True) -> str:
    if not isinstance(value, str):
        raise InvalidExecRequestError(
            f"exec request: {what} must be a string, got {type(value).__name__}"
        )
    if "\0" in value:
        raise InvalidExecRequestError(f"exec request: {what} contains a NUL byte")
    if not empty and not value:
        raise InvalidExecRequestError(f"exec request: {what} is empty")
    return value


def _checked_env(env: object) -> dict[str, str]:
    if not isinstance(env, Mapping):
        raise InvalidExecRequestError(
            f"exec request: env must be a mapping, got {type(env).__name__}"
        )
    checked = {}
    for key, value in env.items():
        name = _text(key, "env name", empty=False)
        if "=" in name:
            raise InvalidExecRequestError(
                f"exec request: env name {name!r} contains '='"
            )
        checked[name] = _text(value, f"env {name}")
    return checked


def _checked_timeout(timeout: object, default: float) -> float:
    if timeout is None:
        return default
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise InvalidExecRequestError(
            "exec request: timeout must be a positive number of seconds, "
            f"got {timeout!r}"
        )
    return float(timeout)


def checked_request(
    request: ExecRequest, default_timeout: float
) -> tuple[list[str], dict[str, str], float]:
    """Return ``request``'s argv, environment and timeout, checked.

    Raises:
        InvalidExecRequestError: naming the first field with the wrong type
            or bytes (a NUL, an empty command, ``=`` in an env name, a
            timeout that is not a positive finite number).
    """
    command = _text(request.command, "command", empty=False)
    args: object = request.args
    if isinstance(args, str | bytes) or not isinstance(args, Sequence):
        raise InvalidExecRequestError(
            "exec request: args must be a sequence of strings, "
            f"got {type(args).__name__}"
        )
    argv = [command, *(_text(a, f"args[{i}]") for i, a in enumerate(args))]
    if not isinstance(request.stdin, bytes):
        raise InvalidExecRequestError(
            f"exec request: stdin must be bytes, got {type(request.stdin).__name__}"
        )
    timeout = _checked_timeout(request.timeout, default_timeout)
    return argv, _checked_env(request.env), timeout


def checked_output_limit(limit: object) -> int | None:
    """Return a request's ``output_limit``, checked (``None``: unbounded).

    Raises:
        InvalidExecRequestError: the limit is not a whole number of at least 2
            (one byte of each end).
    """
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 2:
        raise InvalidExecRequestError(
            f"exec request: output_limit must be a whole number >= 2, got {limit!r}"
        )
    return limit
