"""What makes a shell command destructive: the reader behind the command block.

``destructive_reason`` reads a command with the shell grammar (``shell``),
looks through wrappers (``sudo``, ``env``, ``xargs``...), ``sh -c`` and
``eval`` strings, and judges each program it reaches: ``rm``, ``find``,
``dd``, ``chmod``/``chown``/``chgrp``, ``mkfs`` and the wipers, and git
(``clean``, ``reset --hard``, forced ``push``, aliases). Imports ``shell``
and ``command_options``; the rule itself is in ``policy``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from goatherd.integrations.mcp.command_options import _getopt
from goatherd.integrations.mcp.shell import ShellSyntaxError, Word, parse_commands

__all__ = [
    "_RM_LONGS",
    "_judge",
    "destructive_reason",
]

_MAX_DEPTH: Final = 8
_TOO_DEEP: Final = "a command nested too deeply to read"
_ASSIGNMENT: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\+?=")
_KEYWORDS: Final = frozenset(
    {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "{", "}"}
    | {"!", "coproc"}
)
_SHELLS: Final = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish"})
_SHELL_VALUED: Final = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})
_WIPERS: Final = frozenset({"shred", "wipefs", "mke2fs"})


@dataclass(frozen=True, slots=True)
class _Wrapper:
    """A program that runs the rest of its arguments as a command."""

    valued: str = ""
    """Short options that take a value."""
    longs: frozenset[str] = frozenset()
    """Long options that take a value (``--name value``)."""
    operands: int = 0
    """Operands before the command (``timeout``'s duration)."""


_WRAPPERS: Final = {
    "sudo": _Wrapper(
        "ugCDhpUrtT",
        frozenset({"user", "group", "chdir", "host", "prompt", "other-user"})
        | frozenset({"role", "type", "close-from", "command-timeout"}),
    ),
    "doas": _Wrapper("uC"),
    "env": _Wrapper("uCS", frozenset({"unset", "chdir", "split-string"})),
    "nice": _Wrapper("n", frozenset({"adjustment"})),
    "ionice": _Wrapper("cnpPu", frozenset({"class", "classdata", "pid", "pgid"})),
    "nohup": _Wrapper(),
    "setsid": _Wrapper(),
    "time": _Wrapper("fo", frozenset({"format", "output"})),
    "command": _Wrapper(),
    "builtin": _Wrapper(),
    "exec": _Wrapper("a"),
    "busybox": _Wrapper(),
    "timeout": _Wrapper("sk", frozenset({"signal", "kill-after"}), 1),
    "stdbuf": _Wrapper("ioe", frozenset({"input", "output", "error"})),
    "xargs": _Wrapper(
        "adEILnPs",
        frozenset({"arg-file", "delimiter", "eof", "replace", "max-lines"})
        | frozenset({"max-args", "max-procs", "max-chars", "process-slot-var"}),
    ),
    "chroot": _Wrapper("", frozenset({"userspec", "groups"}), 1),
    "taskset": _Wrapper("", frozenset(), 1),
}


def destructive_reason(command: str) -> str | None:
    """Return what makes ``command`` destructive (e.g. ``"rm -r"``), else ``None``.

    A command the reader cannot split (an unclosed quote...) is named as
    unreadable, unless what can be made of its words is destructive.
    """
    return _reason(command, 0)


def _reason(command: str, depth: int) -> str | None:
    if depth > _MAX_DEPTH:
        return _TOO_DEEP
    try:
        commands = parse_commands(command)
    except ShellSyntaxError as error:
        return _lenient(command, depth) or f"a command the rule cannot read: {error}"
    for simple in commands:
        found = _judge(list(simple.words), depth)
        if found is not None:
            return found
    return None


def _lenient(command: str, depth: int) -> str | None:
    """Judge an unreadable command's words as they stand, quotes dropped."""
    text = re.sub(r"[;&|()\n`]", ";", re.sub(r"[\"'\\]", " ", command))
    for chunk in text.split(";"):
        found = _judge([Word(w, False, w) for w in chunk.split()], depth)
        if found is not None and not found.startswith("a command the rule cannot"):
            return found
    return None


def _judge(words: list[Word], depth: int) -> str | None:
    """Judge one simple command (wrappers, shells and ``eval`` looked through)."""
    if depth > _MAX_DEPTH:
        return _TOO_DEEP
    index = 0
    while index < len(words):
        word = words[index]
        text = word.literal
        if _ASSIGNMENT.match(word.prefix) or text in _KEYWORDS:
            index += 1
            continue
        if text == "function":
            index += 2
            continue
        if text is None:
            return "a command whose name is computed at run time"
        name = os.path.basename(text)
        wrapper = _WRAPPERS.get(name)
        if wrapper is None:
            return _program(name, words[index + 1 :], depth)
        index, found = _past_wrapper(name, wrapper, words, index + 1, depth)
        if found is not None:
            return found
    return None


def _past_wrapper(
    name: str, wrapper: _Wrapper, words: list[Word], index: int, depth: int
) -> tuple[int, str | None]:
    """Skip a wrapper's options; return where its command starts."""
    while index < len(words):
        text = words[index].literal
        if text is None or not text.startswith("-") or text == "-":
            break
        index += 1
        if text == "--":
            break
        value: str | None = None
        if text.startswith("--"):
            option, equals, attached = text[2:].partition("=")
            if option in wrapper.longs:
                value = attached if equals else _text_at(words, index)
                index += 0 if equals else 1
            if name == "env" and option == "split-string" and value is not None:
                return index, _reason(value, depth + 1)
            continue
        for position, letter in enumerate(text[1:], start=2):
            if letter in wrapper.valued:
                value = text[position:] or _text_at(words, index)
                index += 0 if text[position:] else 1
                if name == "env" and letter == "S" and value is not None:
                    return index, _reason(value, depth + 1)
                break
    while index < len(words) and _ASSIGNMENT.match(words[index].prefix):
        index += 1
    return index + wrapper.operands, None


def _text_at(words: list[Word], index: int) -> str | None:
    return words[index].literal if index < len(words) else None


def _program(name: str, args: list[Word], depth: int) -> str | None:
    if name in _SHELLS:
        return _shell_string(args, depth)
    if name == "eval":
        if any(arg.computed for arg in args):
            return "an eval string computed at run time"
        return _reason(" ".join(arg.text for arg in args), depth + 1)
    judge = _JUDGES.get(name)
    if judge is not None:
        return judge(args, depth)
    if name.startswith("mkfs") or name in _WIPERS:
        return name
    return None


def _shell_string(args: list[Word], depth: int) -> str | None:
    """Judge ``sh -c STRING`` (the first operand after the options)."""
    index = 0
    reads_string = False
    while index < len(args):
        text = args[index].literal
        if text is None:
            break
        if text == "--":
            index += 1
            break
        if text in _SHELL_VALUED:
            index += 2
        elif text.startswith("--"):
            index += 1
        elif text[:1] in ("-", "+") and len(text) > 1:
            reads_string = reads_string or "c" in text[1:]
            index += 2 if ("o" in text[1:] or "O" in text[1:]) else 1
        else:
            break
    if not reads_string or index >= len(args):
        return None
    if args[index].computed:
        return "a shell string computed at run time"
    return _reason(args[index].text, depth + 1)


_RM_LONGS: Final = dict.fromkeys(
    [
        "force",
        "interactive",
        "one-file-system",
        "no-preserve-root",
        "preserve-root",
        "recursive",
        "dir",
        "verbose",
        "help",
        "version",
    ],
    False,
)
_MODE_LONGS: Final = {
    **dict.fromkeys(
        [
            "changes",
            "no-preserve-root",
            "preserve-root",
            "quiet",
            "silent",
            "recursive",
            "verbose",
            "help",
            "version",
            "dereference",
            "no-dereference",
        ],
        False,
    ),
    "reference": True,
    "from": True,
}


def _rm(args: list[Word], depth: int) -> str | None:
    parsed = _getopt(args, _RM_LONGS)
    if parsed.shorts & {"r", "R"} or "recursive" in parsed.longs:
        return "rm -r"
    if "no-preserve-root" in parsed.longs:
        return "rm --no-preserve-root"
    if parsed.computed:
        return "rm with an option computed at run time (put -- before such operands)"
    return None


def _recursive_ownership(name: str) -> Callable[[list[Word], int], str | None]:
    modes = "rwxXstugoa,+=01234567" if name == "chmod" else ""

    def judge(args: list[Word], depth: int) -> str | None:
        parsed = _getopt(args, _MODE_LONGS, modes=modes)
        if "R" in parsed.shorts or "recursive" in parsed.longs:
            return f"{name} -R"
        return None

    return judge


def _find(args: list[Word], depth: int) -> str | None:
    texts = [arg.literal for arg in args]
    if "-delete" in texts:
        return "find -delete"
    for index, text in enumerate(texts):
        if text in ("-exec", "-execdir", "-ok", "-okdir"):
            inner = args[index + 1 :]
            end = next(
                (i for i, a in enumerate(inner) if a.literal in (";", "+")), len(inner)
            )
            found = _judge(list(inner[:end]), depth + 1)
            if found is not None:
                return f"find {text} {found}"
    return None


def _dd(args: list[Word], depth: int) -> str | None:
    return "dd of=" if any(arg.prefix.startswith("of=") for arg in args) else None


_GIT_VALUED: Final = frozenset(
    {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--config-env"}
    | {"--super-prefix", "--list-cmds"}
)
_CLEAN_LONGS: Final = {
    **dict.fromkeys(["dry-run", "quiet", "interactive", "force"], False),
    "exclude": True,
}
_RESET_LONGS: Final = {
    **dict.fromkeys(
        [
            "hard",
            "soft",
            "mixed",
            "merge",
            "keep",
            "quiet",
            "no-quiet",
            "patch",
            "intent-to-add",
            "pathspec-file-nul",
            "recurse-submodules",
            "refresh",
            "no-recurse-submodules",
            "no-refresh",
            "help",
        ],
        False,
    ),
    "pathspec-from-file": True,
}
_PUSH_LONGS: Final = {
    **dict.fromkeys(
        [
            "all",
            "branches",
            "mirror",
            "delete",
            "tags",
            "dry-run",
            "porcelain",
            "force",
            "force-with-lease",
            "force-if-includes",
            "thin",
            "no-thin",
            "set-upstream",
            "progress",
            "prune",
            "no-verify",
            "verify",
            "atomic",
            "follow-tags",
            "signed",
            "ipv4",
            "ipv6",
            "quiet",
            "verbose",
            "help",
        ],
        False,
    ),
    **dict.fromkeys(
        ["recurse-submodules", "receive-pack", "exec", "repo", "push-option"], True
    ),
}
_PUSH_FORCING: Final = frozenset(
    {"force", "force-with-lease", "force-if-includes", "mirror", "delete", "prune"}
)


def _git(args: list[Word], depth: int) -> str | None:
    index = 0
    aliases: dict[str, str] = {}
    while index < len(args) and (args[index].literal or "-").startswith("-"):
        text = args[index].literal
        if text is None:
            return "git with an option computed at run time"
        index += 1
        if text in _GIT_VALUED:
            value = args[index] if index < len(args) else None
            index += 1
            if text == "-c" and value is not None:
                if value.computed:
                    return "git -c with a setting computed at run time"
                key, _, setting = value.text.partition("=")
                if key.lower().startswith("alias."):
                    aliases[key[len("alias.") :].lower()] = setting
    if index >= len(args):
        return None
    verb = args[index].literal
    if verb is None:
        return "git with a command computed at run time"
    rest = args[index + 1 :]
    alias = aliases.get(verb.lower())
    if alias is not None:
        return _git_alias(alias, rest, depth)
    judge = _GIT_VERBS.get(verb)
    return judge(rest) if judge is not None else None


def _git_alias(alias: str, rest: list[Word], depth: int) -> str | None:
    if depth >= _MAX_DEPTH:
        return _TOO_DEEP
    if alias.startswith("!"):
        return _reason(alias[1:], depth + 1)
    try:
        commands = parse_commands(alias)
    except ShellSyntaxError as error:
        return f"a git alias the rule cannot read: {error}"
    words = [word for simple in commands[:1] for word in simple.words]
    return _git([*words, *rest], depth + 1)


def _git_clean(args: list[Word]) -> str | None:
    parsed = _getopt(args, _CLEAN_LONGS, valued="e")
    if "n" in parsed.shorts or "dry-run" in parsed.longs:
        return None
    return "git clean -f"


def _git_reset(args: list[Word]) -> str | None:
    parsed = _getopt(args, _RESET_LONGS)
    if "hard" in parsed.longs:
        return "git reset --hard"
    if parsed.computed:
        return "git reset with an option computed at run time"
    return None


def _git_push(args: list[Word]) -> str | None:
    parsed = _getopt(args, _PUSH_LONGS, valued="o")
    if parsed.shorts & {"f", "d"} or parsed.longs & _PUSH_FORCING:
        return "git push --force"
    if any(arg.prefix[:1] in ("+", ":") for arg in parsed.operands):
        return "git push --force"
    if parsed.computed:
        return "git push with an option computed at run time"
    return None


_GIT_VERBS: Final[dict[str, Callable[[list[Word]], str | None]]] = {
    "clean": _git_clean,
    "reset": _git_reset,
    "push": _git_push,
}
_JUDGES: Final[dict[str, Callable[[list[Word], int], str | None]]] = {
    "rm": _rm,
    "find": _find,
    "dd": _dd,
    "git": _git,
    **{name: _recursive_ownership(name) for name in ("chmod", "chown", "chgrp")},
}
