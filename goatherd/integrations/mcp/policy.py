"""The supervisor's rules on every MCP tool call.

The server presents each call's declaration to the supervisor's synchronous
gate before the call runs, and each call's capture after it. The default
rules (:func:`default_rules`), in the order the gate consults them:

* ``destructive_command_block`` (:func:`destructive_command_rule`): denies a
  ``run`` whose shell command removes trees or wipes state: ``rm`` with a
  recursive option, ``find`` with ``-delete`` or ``-exec rm``, ``shred``,
  ``wipefs``, ``mkfs``, ``dd of=``, ``git clean -f``, ``git reset --hard``,
  ``git push`` with ``--force``/``--mirror``/``--delete``, and ``chmod``/
  ``chown``/``chgrp`` with ``-R``. It reads the command as a shell would
  split it (quotes, ``;``/``&&``/``|``, subshells, ``$(...)``, backticks,
  ``sudo``/``env``/``xargs`` wrappers, ``sh -c`` and ``eval`` strings).
  It is a policy, not a boundary: a command can hide what it does (a script,
  a variable, ``python -c``). The boundary is Landlock (a command writes
  nothing outside its worktree) and the checkpoints (whatever it did in the
  worktree can be rolled back).
* ``stuck_detection`` (built in): guidance after the same call five times
  running.
* ``error_rate_guard`` (built in): guidance when half of the last ten calls
  failed (judged on captures).
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Iterator, Sequence
from typing import Final

from goatherd.domain import (
    DECLARATION,
    Intervention,
    InterventionType,
    SupervisedEvent,
    SupervisionRule,
    high_error_rate_rule,
    is_bash_call,
    scope_id_for_owner,
    stuck_detection_rule,
)

__all__ = [
    "DESTRUCTIVE_COMMAND_RULE",
    "ERROR_RATE_THRESHOLD",
    "ERROR_RATE_WINDOW",
    "STUCK_REPEATS",
    "default_rules",
    "destructive_command_rule",
    "destructive_reason",
]

DESTRUCTIVE_COMMAND_RULE: Final = "destructive_command_block"
STUCK_REPEATS: Final = 5
ERROR_RATE_THRESHOLD: Final = 0.5
ERROR_RATE_WINDOW: Final = 10

_SEPARATORS: Final = frozenset({";", ";;", "&", "&&", "|", "||", "|&", "(", ")", "!"})
_REDIRECT: Final = re.compile(r"^\d*[<>]+&?$")
_KEYWORDS: Final = frozenset(
    {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "{", "}"}
)
_WRAPPERS: Final = frozenset(
    {
        "sudo",
        "doas",
        "env",
        "nice",
        "ionice",
        "nohup",
        "time",
        "command",
        "builtin",
        "exec",
        "xargs",
        "timeout",
        "stdbuf",
        "setsid",
        "busybox",
    }
)
_VALUED_OPTIONS: Final = {
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-U", "-r", "-t"}),
    "doas": frozenset({"-u", "-C"}),
    "env": frozenset({"-u", "-C", "-S"}),
    "nice": frozenset({"-n"}),
    "ionice": frozenset({"-c", "-n", "-p", "-P", "-u"}),
    "timeout": frozenset({"-s", "-k"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "xargs": frozenset({"-n", "-I", "-i", "-d", "-L", "-l", "-P", "-s", "-E", "-a"}),
}
_SHELLS: Final = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "fish"})
_ASSIGNMENT: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_WIPERS: Final = frozenset({"shred", "wipefs"})
_RECURSIVE_OWNERSHIP: Final = frozenset({"chmod", "chown", "chgrp"})
_MAX_DEPTH: Final = 8


def destructive_reason(command: str) -> str | None:
    """Return what makes ``command`` destructive (e.g. ``"rm -r"``), else ``None``."""
    return _reason(command, 0)


def _reason(command: str, depth: int) -> str | None:
    if depth > _MAX_DEPTH:
        return "a command nested too deeply to read"
    for words in _simple_commands(command):
        found = _judge(words, depth)
        if found is not None:
            return found
    return None


def _tokens(command: str) -> list[str]:
    # Newlines end a command, and backticks start and end a substitution:
    # read both as separators.
    text = command.replace("`", " ; ").replace("\n", " ; ")
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:  # an unclosed quote: read the words as they stand
        return text.replace('"', " ").replace("'", " ").split()


def _simple_commands(command: str) -> Iterator[list[str]]:
    words: list[str] = []
    skip_next = False
    for token in _tokens(command):
        if skip_next:
            skip_next = False
            continue
        if token in _SEPARATORS:
            yield words
            words = []
        elif _REDIRECT.match(token):
            skip_next = True  # the redirection's target is not a word
        elif token != "$":  # noqa: S105 - a shell word, not a password
            words.append(token)
    yield words


def _judge(words: list[str], depth: int) -> str | None:
    for word in words:
        if "$(" in word:  # a substitution inside a quoted word
            found = _reason(word.split("$(", 1)[1].rstrip(")"), depth + 1)
            if found is not None:
                return found
    rest = _strip_prefix(words)
    if not rest:
        return None
    name = os.path.basename(rest[0])
    args = rest[1:]
    if name in _SHELLS:
        return _shell_string(args, depth)
    if name == "eval":
        return _reason(" ".join(args), depth + 1)
    judge = _JUDGES.get(name)
    if judge is not None:
        return judge(args, depth)
    if name.startswith("mkfs") or name == "mke2fs":
        return name
    if name in _WIPERS:
        return name
    return None


def _strip_prefix(words: list[str]) -> list[str]:
    """Drop assignments, keywords and wrappers (with their options)."""
    index = 0
    while index < len(words):
        word = words[index]
        base = os.path.basename(word)
        if _ASSIGNMENT.match(word) or word in _KEYWORDS:
            index += 1
        elif base in _WRAPPERS:
            index += 1
            valued = _VALUED_OPTIONS.get(base, frozenset())
            while index < len(words) and _wrapper_option(words[index]):
                index += 2 if words[index] in valued else 1
        else:
            break
    return words[index:]


def _wrapper_option(word: str) -> bool:
    return (
        word.startswith("-")
        or bool(_ASSIGNMENT.match(word))
        or bool(re.fullmatch(r"[\d.]+[smhd]?", word))
    )


def _shell_string(args: list[str], depth: int) -> str | None:
    for index, arg in enumerate(args[:-1]):
        if arg == "-c" or (arg[:1] == "-" and "c" in arg[1:] and "-" not in arg[1:]):
            return _reason(args[index + 1], depth + 1)
    return None


def _options(args: Sequence[str]) -> Iterator[str]:
    for arg in args:
        if arg == "--":
            return
        if arg.startswith("-") and len(arg) > 1:
            yield arg


def _has_short(args: Sequence[str], letters: str, longs: Sequence[str]) -> bool:
    for option in _options(args):
        if option.startswith("--"):
            if option.split("=", 1)[0] in longs:
                return True
        elif any(letter in option[1:] for letter in letters):
            return True
    return False


def _rm(args: list[str], depth: int) -> str | None:
    if _has_short(args, "rR", ("--recursive",)):
        return "rm -r"
    if "--no-preserve-root" in args:
        return "rm --no-preserve-root"
    return None


def _find(args: list[str], depth: int) -> str | None:
    if "-delete" in args:
        return "find -delete"
    for index, arg in enumerate(args):
        if arg in ("-exec", "-execdir", "-ok", "-okdir"):
            inner = args[index + 1 :]
            end = next((i for i, a in enumerate(inner) if a in (";", "+")), len(inner))
            found = _judge(inner[:end], depth + 1)
            if found is not None:
                return f"find {arg} {found}"
    return None


def _dd(args: list[str], depth: int) -> str | None:
    return "dd of=" if any(arg.startswith("of=") for arg in args) else None


def _recursive_ownership(name: str) -> Callable[[list[str], int], str | None]:
    def judge(args: list[str], depth: int) -> str | None:
        if _has_short(args, "R", ("--recursive",)):
            return f"{name} -R"
        return None

    return judge


_GIT_GLOBALS_WITH_VALUE: Final = frozenset(
    {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path"}
)


def _git(args: list[str], depth: int) -> str | None:
    index = 0
    while index < len(args) and args[index].startswith("-"):
        index += 2 if args[index] in _GIT_GLOBALS_WITH_VALUE else 1
    if index >= len(args):
        return None
    verb, rest = args[index], args[index + 1 :]
    if verb == "clean" and _has_short(rest, "f", ("--force",)):
        return "git clean -f"
    if verb == "reset" and "--hard" in rest:
        return "git reset --hard"
    if verb == "push" and (
        _has_short(rest, "f", ("--force", "--mirror", "--delete", "--prune"))
        or any(arg.startswith("--force-with-lease") for arg in rest)
        or any(arg.startswith("+") or arg.startswith(":") for arg in rest)
    ):
        return "git push --force"
    return None


_JUDGES: Final[dict[str, Callable[[list[str], int], str | None]]] = {
    "rm": _rm,
    "find": _find,
    "dd": _dd,
    "git": _git,
    **{name: _recursive_ownership(name) for name in _RECURSIVE_OWNERSHIP},
}


def destructive_command_rule() -> SupervisionRule:
    """Deny a declared shell call whose command :func:`destructive_reason` flags.

    It matches declarations that are shell calls (kind label ``bash``, as the
    server records ``run``) and reads their ``cmd``.
    """

    def match(event: SupervisedEvent) -> bool:
        return (
            event.mode == DECLARATION
            and is_bash_call(event)
            and isinstance(event.payload.get("cmd"), str)
        )

    def action(event: SupervisedEvent) -> Intervention | None:
        reason = destructive_reason(str(event.payload["cmd"]))
        if reason is None:
            return None
        return Intervention(
            InterventionType.DENY,
            scope_id_for_owner(event.trace_owner_id),
            f"Blocked destructive command ({reason}). Supervisor denied.",
        )

    return SupervisionRule(DESTRUCTIVE_COMMAND_RULE, match, action)


def default_rules() -> tuple[SupervisionRule, ...]:
    """Return the server's rules: the command block, then the built-in guides."""
    return (
        destructive_command_rule(),
        stuck_detection_rule(STUCK_REPEATS),
        high_error_rate_rule(ERROR_RATE_THRESHOLD, ERROR_RATE_WINDOW),
    )
