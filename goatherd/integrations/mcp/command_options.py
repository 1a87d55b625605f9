"""Reading a command's options as GNU ``getopt_long`` and git's parse-options do.

``_getopt`` reads options anywhere before ``--``, short ones in clusters and
long ones by unique prefix, into ``_Parsed`` (the options seen, the operands,
and whether a word computed at run time stands where an option may). Used by
the destructive-command reader and the own-removal exception; imports the
shell reader's ``Word`` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from goatherd.integrations.mcp.shell import Word

__all__ = [
    "_getopt",
]


@dataclass(frozen=True, slots=True)
class _Parsed:
    """Options as a GNU ``getopt_long`` (or git's parse-options) reads them."""

    shorts: frozenset[str]
    longs: frozenset[str]
    operands: tuple[Word, ...]
    computed: bool
    """A word computed at run time stands where an option may (it may be one)."""


def _getopt(
    args: Sequence[Word],
    longs: dict[str, bool],
    *,
    valued: str = "",
    modes: str = "",
) -> _Parsed:
    """Read ``args``: options anywhere before ``--``, long ones by unique prefix.

    ``longs`` maps each long option to whether it takes a value. An
    abbreviation resolves like ``getopt_long``: an exact name, else every
    name it begins (more than one: the tool would refuse it as ambiguous;
    all are kept, so the judgement errs towards denying). ``modes`` are
    letters that end a short cluster (``chmod -w``: a mode, not an option).
    """
    shorts: set[str] = set()
    found: set[str] = set()
    operands: list[Word] = []
    computed = False
    index = 0
    while index < len(args):
        word = args[index]
        index += 1
        text = word.literal
        if text is None:
            computed = computed or not word.prefix or word.prefix.startswith("-")
            operands.append(word)
        elif text == "--":
            operands.extend(args[index:])
            break
        elif text.startswith("--"):
            name, equals, _ = text[2:].partition("=")
            named = [n for n in longs if n == name] or [
                n for n in longs if n.startswith(name)
            ]
            found.update(named)
            if len(named) == 1 and longs[named[0]] and not equals:
                index += 1
        elif text.startswith("-") and len(text) > 1:
            for position, letter in enumerate(text[1:], start=2):
                if letter in modes:
                    break
                shorts.add(letter)
                if letter in valued:
                    index += 0 if text[position:] else 1
                    break
        else:
            operands.append(word)
    return _Parsed(frozenset(shorts), frozenset(found), tuple(operands), computed)
