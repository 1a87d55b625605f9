"""A reader of POSIX/bash command lines, for judging what a command would run.

It does not run or expand anything. It turns a command line into the simple
commands it holds, each a list of :class:`Word`, the way the shell would
split it. The grammar it understands, and nothing more:

* words, with quote removal: ``'...'``, ``"..."``, ``$'...'`` (ANSI-C
  escapes decoded: ``$'rm'`` is ``rm``), ``$"..."`` and backslash escapes;
  a backslash-newline joins lines;
* separators ``;`` ``&`` ``&&`` ``||`` ``|`` ``|&`` ``;;`` ``;&`` ``;;&``,
  newlines, ``(`` and ``)``; reserved words and ``{``/``}`` are words that
  the judge skips;
* redirections (``<`` ``>`` ``>>`` ``>|`` ``<>`` ``<&`` ``>&`` ``&>``
  ``&>>`` ``<<<``, with a file descriptor number before them): their target
  is not a word of the command;
* here-documents (``<<`` and ``<<-``): the body is data, but an unquoted
  delimiter's body is read for substitutions, which run;
* expansions: ``$name``, ``${...}``, ``$(...)``, backticks, ``$((...))``,
  ``<(...)`` and ``>(...)``, brace expansion and globs. A word holding one is
  *computed* (its value is known only when it runs); every command inside a
  substitution is returned as a command of its own (it runs too).

What it cannot read (an unclosed quote or substitution, an unmatched
parenthesis) raises :class:`ShellSyntaxError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

__all__ = ["ShellSyntaxError", "SimpleCommand", "Word", "parse_commands"]

_META: Final = frozenset(" \t\n;&|()<>")
_ANSI: Final = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}
_REDIRECT: Final = re.compile(r"(\d*)(&>>|&>|<<<|<<-|<<|<>|<&|>&|>>|>\||<|>)")
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PATTERN: Final = re.compile(r"[*?]|\[.*\]|\{[^{}]*(,|\.\.)[^{}]*\}")
"""A glob or a brace expansion: the word's value depends on what it expands to."""
_MAX_DEPTH: Final = 16


class ShellSyntaxError(ValueError):
    """A command line this reader cannot split (the message says why)."""


@dataclass(frozen=True, slots=True)
class Word:
    """One word of a simple command.

    Attributes:
        text: the word after quote removal; expansions are left as written.
        computed: the word holds an expansion, so its value is known only when
            it runs (``text`` is then not what the program receives).
        prefix: the literal text before the first expansion (all of ``text``
            when the word is not computed).
    """

    text: str
    computed: bool = False
    prefix: str = ""

    @property
    def literal(self) -> str | None:
        """The word's value, or ``None`` when it is computed."""
        return None if self.computed else self.text


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """The words of one simple command, in order (redirections left out)."""

    words: tuple[Word, ...]


@dataclass(slots=True)
class _WordBuilder:
    text: list[str] = field(default_factory=list)
    prefix: list[str] = field(default_factory=list)
    computed: bool = False
    started: bool = False
    unquoted: list[str] = field(default_factory=list)

    def add(self, chars: str, *, quoted: bool) -> None:
        self.started = True
        self.text.append(chars)
        if not self.computed:
            self.prefix.append(chars)
        self.unquoted.append("" if quoted else chars)

    def expansion(self, written: str) -> None:
        self.started = True
        self.text.append(written)
        self.computed = True
        self.unquoted.append("")

    def word(self) -> Word:
        bare = "".join(self.unquoted)
        pattern = _PATTERN.search(bare)
        if pattern is not None:
            self.computed = True
            prefix = "".join(self.prefix)[: pattern.start()]
        else:
            prefix = "".join(self.prefix)
        return Word("".join(self.text), self.computed, prefix)


class _Reader:
    def __init__(self, source: str, depth: int) -> None:
        self.src = source
        self.pos = 0
        self.depth = depth
        self.commands: list[SimpleCommand] = []
        self.heredocs: list[tuple[str, bool, bool]] = []
        self.cases = 0

    # ------------------------------------------------------------ helpers

    def peek(self, offset: int = 0) -> str:
        index = self.pos + offset
        return self.src[index] if index < len(self.src) else ""

    def nested(self, source: str) -> None:
        """Read ``source`` (a substitution's body): its commands run too."""
        if self.depth >= _MAX_DEPTH:
            raise ShellSyntaxError("substitutions nested too deeply")
        self.commands.extend(parse_commands(source, self.depth + 1))

    # ------------------------------------------------------------ commands

    def read_list(self, *, closing: str = "") -> None:
        """Read commands up to the end (or an unmatched ``closing``)."""
        words: list[Word] = []
        parens = 0
        while True:
            char = self.peek()
            if not char:
                if closing:
                    raise ShellSyntaxError(f"no closing {closing!r}")
                break
            if char in " \t":
                self.pos += 1
            elif char == "\\" and self.peek(1) == "\n":
                self.pos += 2
            elif char == "#":
                while self.peek() not in ("", "\n"):
                    self.pos += 1
            elif char == "\n":
                self.pos += 1
                self.end(words)
                words = []
                self.read_heredocs()
            elif char == ")" and parens == 0 and self.case_pattern(words):
                self.pos += 1
                self.end(words)
                words = []
            elif char == ")" and closing and parens == 0:
                self.pos += 1
                break
            elif char in "<>" and self.peek(1) == "(":
                words.append(self.read_word())
            elif char in "&<>" or (char.isdigit() and self.redirection_here()):
                if not self.redirection():
                    self.pos += 1  # "&" alone, or "&&"
                    if self.peek() == "&":
                        self.pos += 1
                    self.end(words)
                    words = []
            elif char in ";|()":
                if char == "(":
                    parens += 1
                elif char == ")":
                    if parens == 0:
                        raise ShellSyntaxError("an unmatched ')'")
                    parens -= 1
                self.pos += 1
                while self.peek() in (";", "&", "|"):
                    self.pos += 1
                self.end(words)
                words = []
            else:
                words.append(self.read_word())
        self.end(words)
        if parens:
            raise ShellSyntaxError("an unclosed '('")

    def case_pattern(self, words: list[Word]) -> bool:
        """Whether a ``)`` here ends a ``case`` pattern (not a subshell)."""
        if words and words[0].text == "case":
            self.cases += 1
            return True
        return self.cases > 0

    def end(self, words: list[Word]) -> None:
        if words:
            if words[0].text == "esac" and self.cases:
                self.cases -= 1
            self.commands.append(SimpleCommand(tuple(words)))

    def redirection_here(self) -> bool:
        match = _REDIRECT.match(self.src, self.pos)
        return match is not None and bool(match.group(2))

    def redirection(self) -> bool:
        """Read a redirection and its target; False when there is none here."""
        match = _REDIRECT.match(self.src, self.pos)
        if match is None:
            return False
        self.pos = match.end()
        operator = match.group(2)
        while self.peek() in (" ", "\t"):
            self.pos += 1
        if operator in ("<&", ">&") and self.peek() == "-":
            self.pos += 1
            return True
        if not self.peek() or self.peek() in _META - {"<", ">"}:
            raise ShellSyntaxError(f"a redirection {operator!r} with no target")
        start = self.pos
        target = self.read_word()
        if operator in ("<<", "<<-"):
            quoted = any(q in self.src[start : self.pos] for q in "'\"\\")
            self.heredocs.append((target.text, quoted, operator == "<<-"))
        return True

    def read_heredocs(self) -> None:
        pending, self.heredocs = self.heredocs, []
        for delimiter, quoted, strip in pending:
            lines: list[str] = []
            while self.pos < len(self.src):
                end = self.src.find("\n", self.pos)
                end = len(self.src) if end < 0 else end
                line = self.src[self.pos : end]
                self.pos = min(end + 1, len(self.src))
                if (line.lstrip("\t") if strip else line) == delimiter:
                    break
                lines.append(line)
            if not quoted:
                self.expansions_in("\n".join(lines))

    def expansions_in(self, text: str) -> None:
        """Read the substitutions in ``text`` (a here-document, ``${...}``)."""
        reader = _Reader(text, self.depth)
        sink = _WordBuilder()
        while reader.pos < len(text):
            char = reader.peek()
            if char == "\\":
                reader.pos += 2
            elif char == "`":
                reader.backtick(sink)
            elif char == "$":
                reader.dollar(sink, quoted=True)
            else:
                reader.pos += 1
        self.commands.extend(reader.commands)

    # ------------------------------------------------------------ words

    def read_word(self) -> Word:
        word = _WordBuilder()
        if self.peek() in "<>" and self.peek(1) == "(":
            self.pos += 2
            start = self.pos
            self.substitution(")")
            word.expansion(self.src[start - 2 : self.pos])
        while True:
            char = self.peek()
            if not char or char in _META:
                break
            if char == "'":
                end = self.src.find("'", self.pos + 1)
                if end < 0:
                    raise ShellSyntaxError("an unclosed ' quote")
                word.add(self.src[self.pos + 1 : end], quoted=True)
                self.pos = end + 1
            elif char == '"':
                self.pos += 1
                self.read_double(word)
            elif char == "\\":
                following = self.peek(1)
                self.pos += 2
                if following != "\n":
                    word.add(following or "\\", quoted=True)
            elif char == "`":
                self.backtick(word)
            elif char == "$":
                self.dollar(word, quoted=False)
            else:
                word.add(char, quoted=False)
                self.pos += 1
        if not word.started:
            raise ShellSyntaxError(f"an unexpected {self.peek()!r}")
        return word.word()

    def read_double(self, word: _WordBuilder) -> None:
        """Read a double-quoted string's body, after its opening quote."""
        word.started = True
        while True:
            char = self.peek()
            if not char:
                raise ShellSyntaxError('an unclosed " quote')
            if char == '"':
                self.pos += 1
                return
            if char == "\\":
                following = self.peek(1)
                self.pos += 2
                if following in ("$", "`", '"', "\\"):
                    word.add(following, quoted=True)
                elif following != "\n":
                    word.add("\\" + following, quoted=True)
            elif char == "`":
                self.backtick(word)
            elif char == "$" and self.peek(1) not in ("'", '"'):
                self.dollar(word, quoted=True)
            else:
                word.add(char, quoted=True)
                self.pos += 1

    def backtick(self, word: _WordBuilder) -> None:
        start = self.pos
        self.pos += 1
        body: list[str] = []
        while True:
            char = self.peek()
            if not char:
                raise ShellSyntaxError("an unclosed backtick")
            if char == "\\" and self.peek(1) in ("`", "\\", "$"):
                body.append(self.peek(1))
                self.pos += 2
            elif char == "`":
                self.pos += 1
                break
            else:
                body.append(char)
                self.pos += 1
        self.nested("".join(body))
        word.expansion(self.src[start : self.pos])

    def dollar(self, word: _WordBuilder, *, quoted: bool) -> None:
        start = self.pos
        following = self.peek(1)
        if following == "'" and not quoted:
            self.pos += 2
            word.add(self.ansi_c(), quoted=True)
        elif following == '"' and not quoted:
            self.pos += 2
            self.read_double(word)
        elif following == "(" and self.peek(2) == "(":
            self.pos += 3
            inner = self.pos
            self.balanced("(", ")")
            if self.peek() != ")":
                raise ShellSyntaxError("an unclosed $((")
            self.pos += 1
            self.expansions_in(self.src[inner : self.pos - 2])
            word.expansion(self.src[start : self.pos])
        elif following == "(":
            self.pos += 2
            self.substitution(")")
            word.expansion(self.src[start : self.pos])
        elif following == "{":
            self.pos += 2
            inner = self.pos
            self.balanced("{", "}")
            self.expansions_in(self.src[inner : self.pos - 1])
            word.expansion(self.src[start : self.pos])
        else:
            match = _NAME.match(self.src, self.pos + 1)
            if match is not None:
                self.pos = match.end()
                word.expansion(self.src[start : self.pos])
            elif following and (following in "@*#?-$!" or following.isdigit()):
                self.pos += 2
                word.expansion(self.src[start : self.pos])
            else:
                self.pos += 1
                word.add("$", quoted=quoted)

    def substitution(self, closing: str) -> None:
        """Read a ``$(...)`` or ``<(...)`` body (after its opening) as commands."""
        if self.depth >= _MAX_DEPTH:
            raise ShellSyntaxError("substitutions nested too deeply")
        inner = _Reader(self.src, self.depth + 1)
        inner.pos = self.pos
        inner.read_list(closing=closing)
        self.pos = inner.pos
        self.commands.extend(inner.commands)

    def balanced(self, opening: str, closing: str) -> None:
        """Skip to just past the ``closing`` that balances (quotes respected)."""
        level = 1
        while level:
            char = self.peek()
            if not char:
                raise ShellSyntaxError(f"no closing {closing!r}")
            if char == "\\":
                self.pos += 2
                continue
            if char == "'":
                end = self.src.find("'", self.pos + 1)
                if end < 0:
                    raise ShellSyntaxError("an unclosed ' quote")
                self.pos = end + 1
                continue
            if char == '"':
                self.pos += 1
                self.read_double(_WordBuilder())
                continue
            if char == opening:
                level += 1
            elif char == closing:
                level -= 1
            self.pos += 1

    def ansi_c(self) -> str:
        """Decode a ``$'...'`` body (after the opening quote) as bash does."""
        out: list[str] = []
        while True:
            char = self.peek()
            if not char:
                raise ShellSyntaxError("an unclosed $' quote")
            self.pos += 1
            if char == "'":
                return "".join(out)
            if char != "\\":
                out.append(char)
                continue
            code = self.peek()
            if not code:
                raise ShellSyntaxError("an unclosed $' quote")
            self.pos += 1
            if code in _ANSI:
                out.append(_ANSI[code])
            elif code in ("x", "u", "U"):
                width = {"x": 2, "u": 4, "U": 8}[code]
                digits = self.run_of("0123456789abcdefABCDEF", width)
                out.append(
                    chr(min(int(digits, 16), 0x10FFFF)) if digits else "\\" + code
                )
            elif code in "01234567":
                self.pos -= 1
                digits = self.run_of("01234567", 3)
                out.append(chr(int(digits, 8) & 0xFF))
            elif code == "c" and self.peek():
                out.append(chr(ord(self.peek()) & 0x1F))
                self.pos += 1
            else:
                out.append("\\" + code)

    def run_of(self, allowed: str, most: int) -> str:
        start = self.pos
        while self.pos - start < most and self.peek() and self.peek() in allowed:
            self.pos += 1
        return self.src[start : self.pos]


def parse_commands(source: str, depth: int = 0) -> list[SimpleCommand]:
    """Return every simple command ``source`` would run, substitutions included.

    Raises:
        ShellSyntaxError: ``source`` is not a command line this reader can split.
    """
    reader = _Reader(source, depth)
    reader.read_list()
    if reader.heredocs:
        reader.read_heredocs()
    return reader.commands
