"""The parser builds the subcommand a command line runs, and reads as before.

``build_parser(argv)`` registers only the group of subcommands that holds the
command ``argv`` names (building every subcommand's parser was most of the
parser's start-up); every other command line gets the whole parser. These
tests hold the two to the same behaviour: the same help, the same parsed
values, the same errors.
"""

from __future__ import annotations

import argparse

import pytest

from goatherd.cli import build_parser, main


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


ALL = sorted(_commands(build_parser()))
NESTED = [
    ["cut", "publish"],
    ["cut", "resolve"],
    ["projections", "list"],
    ["projections", "catch-up"],
    ["projections", "rebuild"],
]


def _help(argv: list[str], parser: argparse.ArgumentParser) -> None:
    with pytest.raises(SystemExit) as done:
        parser.parse_args(argv)
    assert done.value.code == 0


def test_every_command_has_a_group_and_its_group_is_built_alone() -> None:
    assert {"scopes", "diff", "settle", "stats", "show", "mcp"} <= set(ALL)
    for name in ALL:
        built = _commands(build_parser(["--db", "t.sqlite", "--json", name]))
        assert name in built, name
        assert len(built) < len(ALL), f"{name}: every subcommand was built"


@pytest.mark.parametrize(
    "argv",
    [[name, "--help"] for name in ALL] + [[*n, "--help"] for n in NESTED],
    ids=lambda argv: " ".join(argv[:-1]),
)
def test_a_commands_help_is_the_same_from_its_group_alone(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    _help(argv, build_parser())
    whole = capsys.readouterr().out
    _help(argv, build_parser(argv))
    alone = capsys.readouterr().out
    assert alone == whole
    assert f"usage: goatherd {' '.join(argv[:-1])}" in alone


@pytest.mark.parametrize(
    "argv",
    [
        ["--db", "t.sqlite", "scopes"],
        ["--db=t.sqlite", "--json", "scopes", "--debug"],
        ["diff", "scope:a", "--color", "never", "--db", "t.sqlite"],
        ["--debug", "settle", "out:x", "select", "--resume", "3"],
        ["show", "sha256:ab", "t.sqlite"],
        ["log", "--tail", "2", "--owner", "agent:a"],
        ["cut", "publish", "c1", "agent:a", "sha256:ab"],
        ["projections", "rebuild", "runtime", "--module", "m:f"],
        ["mcp", "--repo", ".", "--network", "deny"],
        ["import", "-", "--db", "new.sqlite"],
        ["--db", "scopes", "stats"],  # a trace named "scopes"
    ],
)
def test_a_command_line_parses_to_the_same_values(argv: list[str]) -> None:
    assert build_parser(argv).parse_args(argv) == build_parser().parse_args(argv)


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--help"],
        ["--version"],
        ["no-such-command"],
        ["--db"],
        ["--js", "stats"],  # an abbreviated option: argparse's to read
        ["stats", "--no-such-option"],
        ["diff"],
    ],
    ids=lambda argv: " ".join(argv) or "nothing",
)
def test_other_command_lines_read_as_with_the_whole_parser(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    def run(parser: argparse.ArgumentParser) -> tuple[object, str, str]:
        try:
            parsed: object = parser.parse_args(argv)
        except SystemExit as exit_:
            parsed = exit_.code
        out = capsys.readouterr()
        return parsed, out.out, out.err

    assert run(build_parser(argv)) == run(build_parser())


def test_main_lists_every_command_in_its_help(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([]) == 0
    listed = capsys.readouterr().out
    for name in ALL:
        assert f"    {name} " in listed or f"    {name}\n" in listed, name
