"""The destructive-command rule reads a command the way the shell and the tool would.

Every spelling of a denied command (options in any order, long options
abbreviated as GNU ``getopt_long`` and git accept them, any quoting, behind
wrappers, inside ``bash -c`` strings, substitutions and process
substitutions) is denied; commands that only look alike pass. The forms the
rule once missed are also run for real, in a scratch repository, to show that
they do destroy what the rule says.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from goatherd.integrations.mcp import destructive_reason
from tests.mcp.conftest import GIT_ENV

ONCE_MISSED = [
    ("rm --recur t", "rm -r"),
    ("rm --rec -f t", "rm -r"),
    ("git clean -d --forc", "git clean -f"),
    ("git -c clean.requireForce=false clean -dx", "git clean -f"),
    ("chmod --recur 700 t", "chmod -R"),
    ("bash -c 'cat <(rm -rf t)'", "rm -r"),
    ("bash -c \"$'rm' -rf t\"", "rm -r"),
]
MORE_DENIED = [
    ("cat > >(rm -rf t)", "rm -r"),
    ('echo "${x:-$(rm -rf t)}"', "rm -r"),
    ("cat <<EOF\n$(rm -rf t)\nEOF", "rm -r"),
    ("env -S 'rm -rf t'", "rm -r"),
    ("git -c alias.wipe='!rm -rf t' wipe", "rm -r"),
    ("git -c alias.tidy='clean -fdx' tidy", "git clean -f"),
    ("git reset --ha HEAD~1", "git reset --hard"),
    ("git push --mirr origin", "git push --force"),
    ("rm -{r,f} t", "rm with an option computed at run time"),
    ("x=rm; $x -rf t", "a command whose name is computed at run time"),
    ('bash -c "$cmd"', "a shell string computed at run time"),
    ("echo 'unclosed", "a command the rule cannot read"),
    ("find . -exec sh -c 'rm -rf \"$1\"' _ {} \\;", "find -exec rm -r"),
]
LOOK_ALIKES = [
    "rm file",
    "rm -f build/app.o",
    'rm -- "$f"',
    "git clean -n",
    "git clean -dxn",
    "git clean --dry -d",
    "echo rm -rf t",
    "echo 'rm -rf t' > notes.txt",
    "grep -r 'rm -rf' .",
    "chmod -w file",
    "chmod +x run.sh",
    "git push origin HEAD:main",
    "git reset --soft HEAD~1",
    "case $1 in a) ls;; esac",
    "[[ -f x ]] && echo y",
    "cat <<'EOF'\n$(rm -rf t)\nEOF",
    "python3 -c 'print(1)'",
]


@pytest.mark.parametrize(("command", "reason"), ONCE_MISSED + MORE_DENIED)
def test_each_denied_form_is_named(command: str, reason: str) -> None:
    found = destructive_reason(command)
    assert found is not None, command
    assert found.startswith(reason), found


@pytest.mark.parametrize("command", LOOK_ALIKES)
def test_look_alikes_pass(command: str) -> None:
    assert destructive_reason(command) is None


# ---------------------------------------------------------------- spellings


def _prefixes(option: str, shortest: int) -> list[str]:
    """``--recursive`` and its unique abbreviations down to ``shortest`` letters."""
    name = option[2:]
    return [f"--{name[:n]}" for n in range(shortest, len(name) + 1)]


@st.composite
def _quoted(draw: st.DrawFn, word: str) -> str:
    """``word`` as the shell would read it back, in one of several quotings."""
    style = draw(st.sampled_from(["bare", "single", "double", "ansi", "hex", "split"]))
    if style == "single":
        return f"'{word}'"
    if style == "double":
        return f'"{word}"'
    if style == "ansi":
        return f"$'{word}'"
    if style == "hex":
        return "$'" + "".join(f"\\x{ord(c):02x}" for c in word) + "'"
    if style == "split" and len(word) > 1:
        cut = draw(st.integers(1, len(word) - 1))
        return f"{word[:cut]}''{word[cut:]}"
    return word


@st.composite
def _spelled(draw: st.DrawFn, program: list[str], options: list[str]) -> str:
    """``program`` with ``options`` and an operand, shuffled, each word quoted."""
    operands = ["t"]
    words = draw(st.permutations(options + operands))
    quoted = [draw(_quoted(w)) for w in [*program, *words]]
    return " ".join(quoted)


_WRAPPERS = st.lists(
    st.sampled_from(
        [
            "sudo",
            "sudo -u nobody",
            "env",
            "env A=1",
            "/usr/bin/env -i",
            "nice -n 5",
            "timeout 5",
            "timeout -s KILL 5",
            "command",
            "nohup",
            "stdbuf -oL",
            "xargs",
            "xargs -n1",
            "A=1",
        ]
    ),
    max_size=3,
).map(" ".join)


@st.composite
def _in_context(draw: st.DrawFn, command: str) -> str:
    """``command`` where the shell still runs it."""
    wrapped = f"{draw(_WRAPPERS)} {command}".strip()
    context = draw(
        st.sampled_from(
            [
                "{}",
                "ls; {}",
                "true && {}",
                "false || {}",
                "echo hi | {}",
                "({})",
                "echo $({})",
                'echo "$({})"',
                "cat <({})",
                "if true; then {}; fi",
                "for f in a; do {}; done",
                "x=$({})",
                "bash -c {q}",
                "sh -ec {q}",
                "bash -o pipefail -c {q}",
                "eval {q}",
                "sudo sh -c {q}",
                "bash -c {qq}",
            ]
        )
    )
    quoted = shlex.quote(wrapped)
    twice = shlex.quote(f"bash -c {quoted}")
    return context.format(wrapped, q=quoted, qq=twice)


_RECURSIVE_RM = st.one_of(
    st.lists(st.sampled_from(["-r", "-R", "-rf", "-fr", "-Rf", "-rv"]), min_size=1),
    st.sampled_from(_prefixes("--recursive", 1)).map(lambda o: [o]),
).flatmap(
    lambda opts: st.lists(
        st.sampled_from(["-f", "-v", "--force", "-i"]), max_size=2
    ).map(lambda more: opts + more)
)
_FORCED_CLEAN = st.tuples(
    st.one_of(
        st.sampled_from(["-f", "-fd", "-dfx", "-xf", "--force"]),
        st.sampled_from(_prefixes("--force", 1)),
    ),
    st.lists(st.sampled_from(["-d", "-x", "-X", "-q"]), max_size=2),
).map(lambda t: [t[0], *t[1]])


def _denied_spellings() -> st.SearchStrategy[tuple[str, str]]:
    rm = _RECURSIVE_RM.flatmap(lambda o: _spelled(["rm"], o)).map(
        lambda c: (c, "rm -r")
    )
    clean = _FORCED_CLEAN.flatmap(lambda o: _spelled(["git", "clean"], o))
    unforced = st.lists(st.sampled_from(["-d", "-x", "-X"]), min_size=1).flatmap(
        lambda o: _spelled(["git", "-c", "clean.requireForce=false", "clean"], o)
    )
    reset = st.sampled_from(_prefixes("--hard", 2)).flatmap(
        lambda o: _spelled(["git", "reset"], [o, "-q"])
    )
    push = st.sampled_from(["-f", "--force", "--forc", "--mirror", "--delete"]).flatmap(
        lambda o: _spelled(["git", "push"], [o, "origin"])
    )
    chmod = st.sampled_from(["-R", *_prefixes("--recursive", 3)]).flatmap(
        lambda o: _spelled(["chmod"], [o, "700"])
    )
    return st.one_of(
        rm,
        st.one_of(clean, unforced).map(lambda c: (c, "git clean -f")),
        reset.map(lambda c: (c, "git reset --hard")),
        push.map(lambda c: (c, "git push --force")),
        chmod.map(lambda c: (c, "chmod -R")),
    )


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_every_spelling_of_a_denied_command_is_denied(data: st.DataObject) -> None:
    command, reason = data.draw(_denied_spellings())
    spelled = data.draw(_in_context(command))
    found = destructive_reason(spelled)
    assert found is not None, spelled
    assert reason in found, (spelled, found)


_HARMLESS_RM = st.lists(
    st.sampled_from(["-f", "-i", "-v", "--force", "--fo", "--verb", "-fv"]), max_size=3
).flatmap(lambda o: _spelled(["rm"], o))
_DRY_CLEAN = st.lists(st.sampled_from(["-d", "-x", "-f", "-q"]), max_size=2).flatmap(
    lambda o: st.sampled_from(["-n", "--dry-run", "--dry", "-dn"]).flatmap(
        lambda dry: _spelled(["git", "clean"], [dry, *o])
    )
)
_ECHOED = _denied_spellings().map(lambda pair: f"echo {shlex.quote(pair[0])}")


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_look_alike_spellings_pass(data: st.DataObject) -> None:
    command = data.draw(st.one_of(_HARMLESS_RM, _DRY_CLEAN, _ECHOED))
    plain = data.draw(_WRAPPERS.map(lambda w: f"{w} {command}".strip()))
    assert destructive_reason(plain) is None, plain


# ---------------------------------------------------------------- for real


def _scratch(tmp_path: Path) -> Path:
    repo = tmp_path / "scratch"
    (repo / "t" / "deep").mkdir(parents=True)
    (repo / "t" / "deep" / "f").write_text("x\n")
    env = {**os.environ, **GIT_ENV}
    subprocess.run(["git", "init", "-q", str(repo)], check=True, env=env)
    return repo


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash here")
@pytest.mark.parametrize(
    "command", [c for c, _ in ONCE_MISSED if not c.startswith("chmod")]
)
def test_the_once_missed_forms_really_delete(tmp_path: Path, command: str) -> None:
    repo = _scratch(tmp_path)
    env = {
        **os.environ,
        **GIT_ENV,
        "GIT_CONFIG_NOSYSTEM": "1",
        "HOME": str(tmp_path),
    }
    subprocess.run(
        ["bash", "-c", command], cwd=repo, env=env, check=False, capture_output=True
    )
    assert not (repo / "t").exists(), f"{command!r} left t in place"
    assert destructive_reason(command) is not None


def test_chmod_really_takes_the_abbreviation(tmp_path: Path) -> None:
    repo = _scratch(tmp_path)
    subprocess.run(["chmod", "--recur", "700", "t"], cwd=repo, check=True)
    assert (repo / "t" / "deep" / "f").stat().st_mode & 0o777 == 0o700


_SHELL_BITS = st.sampled_from(
    [
        *" \t\n;&|()<>'\"\\$`{}[]*?!#=-rmfc0~,.",
        "$(",
        "<(",
        "<<",
        "$'",
        "${",
        "$((",
        "bash -c ",
        "rm -rf ",
        "git clean ",
        "eval ",
        "env -S ",
        "find . -exec ",
        "\\x",
        "\\0",
    ]
)


@settings(max_examples=500, deadline=None)
@example("$'\\")
@given(st.lists(_SHELL_BITS, max_size=40).map("".join))
def test_any_shell_like_text_is_judged_without_raising(command: str) -> None:
    reason = destructive_reason(command)
    assert reason is None or isinstance(reason, str)
