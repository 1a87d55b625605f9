"""Safe text for a terminal: escaped control characters, redacted passwords.

Everything a trace holds (owner ids, schema refs, kind labels, payloads) is
written by agents, so it may carry ESC, CR, BEL or bidirectional overrides
that would move the cursor, erase lines or set the window title. Every
human-readable line the CLI prints goes through :func:`clean`; every URL it
shows goes through :func:`redact_url`. Stdlib only: ``main`` uses it to print
errors without loading anything heavy.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["clean", "clean_lines", "json_safe", "one_line", "redact_url"]

# C0 and C1 controls, DEL, line/paragraph separators and the bidirectional
# embedding, override and isolate marks (they reorder what a reader sees).
_UNSAFE: Final = re.compile(
    "[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
# The password runs to the LAST "@" before the host (a raw "@" in it included).
_URL_PASSWORD: Final = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*):[^/\s]*@")
_DSN_PASSWORD: Final = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.I)
_NOISE: Final = ("(Background on this error at:", "[SQL:", "[parameters:")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(text: str) -> str:
    """Return ``text`` with every control character shown as an escape."""
    return _UNSAFE.sub(_escape, text)


def clean_lines(lines: list[str]) -> list[str]:
    """Return each line cleaned (newlines between lines are the caller's)."""
    return [clean(line) for line in lines]


def redact_url(text: str) -> str:
    """Replace each password in ``text`` (``scheme://user:PW@``, ``password=PW``)."""
    return _DSN_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1:***@", text))


def json_safe(text: str) -> str:
    """Escape the unsafe characters of JSON text as JSON escapes (same JSON).

    The encoder escapes C0 controls already; this also escapes DEL, C1
    controls and the bidirectional marks, which it leaves raw when
    ``ensure_ascii`` is off. A raw newline can only be the indentation's.
    """
    return _UNSAFE.sub(_json_escape, text)


def _json_escape(match: re.Match[str]) -> str:
    char = match.group()
    return char if char == "\n" else f"\\u{ord(char):04x}"


def one_line(message: str) -> str:
    """Fold a multi-line error message into one safe line.

    Drops the driver's SQL echo and documentation links, joins the remaining
    lines with ``; ``, redacts passwords and escapes control characters.
    """
    parts = [
        line.strip()
        for line in message.splitlines()
        if line.strip() and not line.strip().startswith(_NOISE)
    ]
    return clean(redact_url("; ".join(parts)))
