"""The destructive-command rule reads a command as a shell would split it."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from goatherd.domain import DECLARATION, InterventionType
from goatherd.integrations.mcp import (
    DESTRUCTIVE_COMMAND_RULE,
    default_rules,
    destructive_command_rule,
    destructive_reason,
)
from goatherd.integrations.mcp.recording import RecordedCall

DESTRUCTIVE = [
    ("rm -rf build", "rm -r"),
    ("rm -fr .", "rm -r"),
    ("rm -R src", "rm -r"),
    ("rm --recursive x", "rm -r"),
    ("rm --no-preserve-root -f /", "rm --no-preserve-root"),
    ("/bin/rm -r -f x", "rm -r"),
    ("cd src && rm -rf tests", "rm -r"),
    ("ls; rm -rf tests", "rm -r"),
    ("true || rm -rf tests", "rm -r"),
    ("echo hi | xargs rm -rf", "rm -r"),
    ("(cd a; rm -r b)", "rm -r"),
    ("if true; then rm -R x; fi", "rm -r"),
    ("echo $(rm -rf x)", "rm -r"),
    ('echo "$(rm -rf x)"', "rm -r"),
    ("echo `rm -rf x`", "rm -r"),
    ('sh -c "rm -rf tests"', "rm -r"),
    ("bash -lc 'rm -rf tests'", "rm -r"),
    ("eval 'rm -rf tests'", "rm -r"),
    ("sudo -u nobody rm -rf /srv", "rm -r"),
    ("FOO=1 env -i BAR=2 nice -n 5 rm -rf x", "rm -r"),
    ("timeout 5 rm -rf x", "rm -r"),
    ("r''m -rf x", "rm -r"),
    ("rm -rf x > /dev/null 2>&1", "rm -r"),
    ("find . -name '*.py' -delete", "find -delete"),
    ("find . -exec rm -f {} ;", None),
    ("find . -exec rm -rf {} +", "find -exec rm -r"),
    ("git clean -fdx", "git clean -f"),
    ("git -C sub clean --force", "git clean -f"),
    ("git reset --hard HEAD~3", "git reset --hard"),
    ("git push --force origin main", "git push --force"),
    ("git push origin +main", "git push --force"),
    ("git push origin :main", "git push --force"),
    ("chmod -R 777 .", "chmod -R"),
    ("chown -R me .", "chown -R"),
    ("shred -u secret", "shred"),
    ("mkfs.ext4 /dev/sda1", "mkfs.ext4"),
    ("dd if=/dev/zero of=big bs=1M count=1", "dd of="),
    ("rm -rf 'unclosed", "rm -r"),
]

HARMLESS = [
    "python3 -m unittest -q",
    "pytest -x tests",
    "rm -f build/app.o",
    "rm notes.txt",
    "echo rm -rf is dangerous",
    "grep -r 'rm -rf' .",
    "ls -la",
    "git status",
    "git diff --stat",
    "git push origin main",
    "git reset --soft HEAD~1",
    "chmod +x run.sh",
    "mv a b",
    "find . -name '*.py'",
    "make -j4",
    "",
]


@pytest.mark.parametrize(("command", "reason"), DESTRUCTIVE)
def test_destructive_commands_are_named(command: str, reason: str | None) -> None:
    assert destructive_reason(command) == reason


@pytest.mark.parametrize("command", HARMLESS)
def test_everyday_commands_pass(command: str) -> None:
    assert destructive_reason(command) is None


_WORDS = st.sampled_from(["ls", "echo hi", "python3 -m unittest", "cat a", "true"])
_JOINS = st.sampled_from([";", "&&", "||", "|", "\n", " & "])


@given(before=_WORDS, join=_JOINS, after=_WORDS)
def test_a_recursive_rm_anywhere_in_a_pipeline_is_found(
    before: str, join: str, after: str
) -> None:
    command = f"{before} {join} rm -rf tests {join} {after}"
    assert destructive_reason(command) == "rm -r"


@given(st.text(max_size=200))
def test_any_text_is_judged_without_raising(command: str) -> None:
    reason = destructive_reason(command)
    assert reason is None or isinstance(reason, str)


def test_deeply_nested_shells_are_refused_rather_than_read() -> None:
    command = "true"
    for _ in range(12):
        command = f"sh -c {shlex.quote(command)}"
    assert destructive_reason(command) == "a command nested too deeply to read"


def _event(payload: dict[str, object], label: str = "bash") -> RecordedCall:
    return RecordedCall(
        "mcp:repo:env-1",
        "run",
        "mcp.tool.run.v1",
        label,
        payload,
        "sha256:x",
        0,
        DECLARATION,
    )


def test_the_rule_denies_a_declared_shell_call_naming_itself() -> None:
    rule = destructive_command_rule()
    event = _event({"cmd": "rm -rf tests"})
    assert rule.name == DESTRUCTIVE_COMMAND_RULE
    assert rule.match(event)
    verdict = rule.action(event)
    assert verdict is not None
    assert verdict.type is InterventionType.DENY
    assert verdict.scope_id == "scope:mcp:repo:env-1"
    assert "rm -r" in str(verdict.payload)


def test_the_rule_ignores_other_calls_and_harmless_commands() -> None:
    rule = destructive_command_rule()
    assert not rule.match(_event({"path": "a"}, "mcp:write_file"))
    assert not rule.match(_event({"cmd": 5}))
    assert rule.action(_event({"cmd": "ls"})) is None


def test_the_default_rules_are_the_block_then_the_built_in_guides() -> None:
    names = [rule.name for rule in default_rules()]
    assert names == [DESTRUCTIVE_COMMAND_RULE, "stuck_detection", "error_rate_guard"]
