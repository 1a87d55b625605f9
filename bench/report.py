"""The verdicts of a ``python -m bench`` run: one PASS/MISS line per target.

A scenario states a target's outcome by printing a line that holds the word
``PASS`` or ``MISS`` (``verdict`` below prints one in the usual shape:
``PASS: <what> <figure> < <target>``). ``python -m bench`` reads every line a
scenario prints on ``sys.stdout`` through :class:`VerdictTap` and, at the end
of the run, prints them again as one table, scenario by scenario, so a long
run's outcome is one screen. A scenario needs no other change to appear in
the table; one that prints no such line appears as ``(no verdict)``.

Lines written by child processes straight to the inherited file descriptor
do not pass through ``sys.stdout`` and are not collected: print the verdict
from the scenario's own process.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Final, TextIO

__all__ = ["Verdicts", "VerdictTap", "verdict"]

_WORD: Final = re.compile(r"\b(PASS|MISS)\b")


def verdict(ok: bool, text: str) -> str:
    """Print (and return) ``PASS: text`` or ``MISS: text``."""
    line = f"{'PASS' if ok else 'MISS'}: {text}"
    print(line, flush=True)
    return line


@dataclass
class Verdicts:
    """The verdict lines of a run, per scenario, in the order they came."""

    lines: dict[str, list[str]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def start(self, scenario: str) -> None:
        """Open ``scenario``'s entry (a scenario with no verdict still shows)."""
        self.lines.setdefault(scenario, [])

    def add(self, scenario: str, line: str) -> None:
        """Keep ``line`` if it states a verdict."""
        if _WORD.search(line):
            self.lines.setdefault(scenario, []).append(line.strip())

    def fail(self, scenario: str, error: BaseException) -> None:
        """Note that ``scenario`` raised before it finished."""
        self.errors[scenario] = f"{type(error).__name__}: {error}"

    def table(self) -> list[str]:
        """Return the summary: one line per verdict, and the counts."""
        rows = ["== summary: one line per target", ""]
        width = max((len(name) for name in self.lines), default=8)
        passed = missed = 0
        for scenario, lines in self.lines.items():
            if scenario in self.errors:
                rows.append(f"{scenario:<{width}}  ERROR  {self.errors[scenario]}")
            if not lines and scenario not in self.errors:
                rows.append(f"{scenario:<{width}}  -      (no verdict)")
            for line in lines:
                word = _WORD.search(line)
                assert word is not None
                passed += word.group(1) == "PASS"
                missed += word.group(1) == "MISS"
                rows.append(f"{scenario:<{width}}  {word.group(1)}   {line}")
        rows.append("")
        rows.append(
            f"{passed} PASS, {missed} MISS, {len(self.errors)} scenario(s) failed"
        )
        return rows


class VerdictTap:
    """A text stream that writes through to ``out`` and collects verdict lines."""

    def __init__(self, out: TextIO, verdicts: Verdicts) -> None:
        self._out = out
        self._verdicts = verdicts
        self._scenario = ""
        self._partial = ""

    def scenario(self, name: str) -> None:
        """Attribute what is printed from now on to ``name``."""
        self.end_line()
        self._scenario = name
        self._verdicts.start(name)

    def write(self, text: str) -> int:
        """Write ``text`` through; collect each complete verdict line."""
        self._out.write(text)
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        for line in lines:
            self._verdicts.add(self._scenario, line)
        return len(text)

    def end_line(self) -> None:
        """Count a pending partial line as a line (a scenario ended)."""
        if self._partial:
            self._verdicts.add(self._scenario, self._partial)
            self._partial = ""

    def flush(self) -> None:
        """Flush the stream written through."""
        self._out.flush()

    def isatty(self) -> bool:
        """Whether the stream written through is a terminal."""
        return self._out.isatty()

    def fileno(self) -> int:
        """The file descriptor of the stream written through."""
        return self._out.fileno()

    @property
    def encoding(self) -> str:
        """The encoding of the stream written through."""
        return self._out.encoding

    def __getattr__(self, name: str) -> Any:
        """Anything else (``buffer``, ``errors``...) is the wrapped stream's."""
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._out, name)
