"""Safe text for a terminal: escaped control characters, redacted passwords.

Everything a trace holds (owner ids, schema refs, kind labels, payloads) is
written by agents, so it may carry ESC, CR, BEL, bidirectional overrides or
invisible characters that would move the cursor, erase lines, set the window
title or make one owner id look like another. Every human-readable line the
CLI prints goes through :func:`clean`; every URL it shows goes through
:func:`redact_url`. Both run in time linear in their input, and
:func:`one_line` bounds the length of what it returns, so a hostile value
quoted in an error can neither hang a command nor flood a terminal. Stdlib
only: ``main`` uses it to print errors without loading anything heavy.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import unquote

__all__ = [
    "ONE_LINE_LIMIT",
    "UNSAFE_RANGES",
    "clean",
    "clean_lines",
    "json_safe",
    "one_line",
    "redact_url",
]

# Every character a terminal shows as nothing, or that changes how the text
# around it is shown: C0 and C1 controls and DEL (Cc), every format character
# (Cf: the bidirectional marks, embeddings, overrides and isolates, the Arabic
# letter mark, zero-width spaces and joiners, the word joiner and invisible
# operators, the byte order mark, interlinear annotation and the tag
# characters), the line and paragraph separators (Zl, Zp) and the Hangul
# fillers, which are letters that render blank. A superset of what Unicode 15
# puts in those categories; tests/cli/test_safe_output.py checks it against
# the running Python's own tables.
UNSAFE_RANGES: Final = (
    (0x0000, 0x001F),
    (0x007F, 0x009F),
    (0x00AD, 0x00AD),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x115F, 0x1160),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x2028, 0x202E),
    (0x2060, 0x206F),
    (0x3164, 0x3164),
    (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE007F),
)
_UNSAFE: Final = re.compile(
    "[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in UNSAFE_RANGES) + "]"
)
_NOISE: Final = ("(Background on this error at:", "[SQL:", "[parameters:")
# A key, then ``=``: a whole run of key characters (none before it) of at
# most 33 characters (``sslpassword`` with every byte percent-encoded).
# Matching starts only where such a run starts, reads at most 33 characters
# of it, and a value is read once, so redaction is linear in the text.
_KEY: Final = re.compile(
    r"(?<![A-Za-z0-9_%])((?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2}){1,33}+)[ \t]*=[ \t]*"
)
# A quoted keyword value (backslash escapes; unterminated: to the end), or a
# bare value up to whitespace or the next query parameter.
_VALUE: Final = re.compile(
    r"""'(?:[^'\\]|\\.)*'?|"(?:[^"\\]|\\.)*"?|[^\s&#;,)]*""", re.S
)
ONE_LINE_LIMIT: Final = 2000
"""At most this many characters of a message are shown by :func:`one_line`."""


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def clean(text: str) -> str:
    """Return ``text`` with every control or invisible character escaped."""
    return _UNSAFE.sub(_escape, text)


def clean_lines(lines: list[str]) -> list[str]:
    """Return each line cleaned (newlines between lines are the caller's)."""
    return [clean(line) for line in lines]


def redact_url(text: str) -> str:
    """Replace each password in ``text`` with ``***``.

    Masked: the password of a URL's user information (``scheme://user:PW@``,
    running to the last ``@`` before the next URL, so a raw ``@``, ``/``,
    space or newline in it is masked too), and the value of every key that
    ends in ``password`` (``password=``, ``sslpassword=``, ``PGPASSWORD=``,
    percent-encoded keys such as ``pass%77ord=``, quoted keyword values such
    as ``password='a b'``). It masks generously: text between a URL's colon
    and a later ``@`` is hidden even when a reader would call it a port.
    """
    return _redact_keys(_redact_userinfo(text))


def _redact_userinfo(text: str) -> str:
    out: list[str] = []
    done = 0
    start = text.find("://")
    while start != -1:
        authority = start + 3
        following = text.find("://", authority)
        limit = len(text) if following == -1 else following
        colon = _userinfo_colon(text, authority, limit)
        at = text.rfind("@", colon + 1, limit) if colon != -1 else -1
        if at != -1:
            out.append(text[done : colon + 1])
            out.append("***")
            done = at
        start = following
    out.append(text[done:])
    return "".join(out)


def _userinfo_colon(text: str, begin: int, limit: int) -> int:
    """Return the index of the colon ending a URL's user name, or -1."""
    for index in range(begin, limit):
        char = text[index]
        if char == ":":
            return index
        if char in "/@?#" or char.isspace():
            return -1
    return -1


def _redact_keys(text: str) -> str:
    out: list[str] = []
    done = 0
    match = _KEY.search(text)
    while match is not None:
        if unquote(match.group(1), errors="replace").lower().endswith("password"):
            value = _VALUE.match(text, match.end())
            end = value.end() if value is not None else match.end()
            out.append(text[done : match.end()])
            out.append("***")
            done = end
            match = _KEY.search(text, end)
        else:
            match = _KEY.search(text, match.end())
    out.append(text[done:])
    return "".join(out)


def json_safe(text: str) -> str:
    """Escape the unsafe characters of JSON text as JSON escapes (same JSON).

    The encoder escapes C0 controls already; this also escapes DEL, C1
    controls, the bidirectional marks and the invisible characters, which it
    leaves raw when ``ensure_ascii`` is off. A raw newline can only be the
    indentation's.
    """
    return _UNSAFE.sub(_json_escape, text)


def _json_escape(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\n":
        return char
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def one_line(message: str) -> str:
    """Fold a multi-line error message into one safe, bounded line.

    Redacts passwords first (a password may span lines), drops the driver's
    SQL echo and documentation links, joins the remaining lines with ``; ``,
    escapes control and invisible characters and keeps at most
    :data:`ONE_LINE_LIMIT` characters, saying how many were left out.
    """
    parts = [
        line.strip()
        for line in redact_url(message).splitlines()
        if line.strip() and not line.strip().startswith(_NOISE)
    ]
    text = clean("; ".join(parts))
    if len(text) <= ONE_LINE_LIMIT:
        return text
    cut = ONE_LINE_LIMIT - 40
    return f"{text[:cut]}... ({len(text) - cut} more characters)"
