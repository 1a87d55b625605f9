"""The argument parser of ``goatherd``: every command, no heavy import.

Each subcommand names its handler as ``"module:function"`` inside
``goatherd.cli``; :func:`goatherd.cli.main` imports that module only when the
command runs, so ``--help`` and ``--version`` start fast.

Global options (``--db``, ``--json``, ``--debug``) are accepted before or
after the subcommand. The trace is always named by ``--db`` (default: the
``GOATHERD_DB`` environment variable); commands that took it positionally
before still accept a leading positional ``DB``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from goatherd.infrastructure.store.chain import TraceHead

__all__ = [
    "DB_ENV",
    "Subparsers",
    "WORKSPACE_ENV",
    "build_parser",
    "non_negative",
    "positive",
]

DB_ENV: Final = "GOATHERD_DB"
WORKSPACE_ENV: Final = "GOATHERD_WORKSPACE"
VERSION: Final = "0.1.0"
_EPILOG: Final = (
    f"The trace is --db DB (a path or an SQLAlchemy URL; default ${DB_ENV}). "
    "Exit codes: 0 ok, 1 failed, 2 usage error, 3 address in use (traceui), "
    "4 erased bytes may remain (redact), 130 interrupted."
)

Subparsers = argparse._SubParsersAction


def positive(text: str) -> int:
    """Parse an integer of at least 1 (argparse type)."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative(text: str) -> int:
    """Parse an integer of at least 0 (argparse type)."""
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _integer(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value > 2**63 - 1:
        raise argparse.ArgumentTypeError(f"too large: {text}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.01 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"must be 0.01 to 3600 seconds, got {text}")
    return value


def _trace_head(text: str) -> TraceHead:
    """Parse a noted trace head (argparse type; loads the store only when given)."""
    from goatherd.infrastructure.store.chain import parse_head

    try:
        return parse_head(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _global_options(parser: argparse.ArgumentParser, *, top: bool) -> None:
    """Add --db, --json and --debug (sub-parsers leave unset values alone)."""
    default: object = None if top else argparse.SUPPRESS
    parser.add_argument(
        "--db",
        default=default,
        metavar="DB",
        help=f"the trace: a path or an SQLAlchemy URL (default ${DB_ENV})",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="print JSON for scripts",
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="show tracebacks on errors",
    )


def _command(
    sub: Subparsers[argparse.ArgumentParser],
    name: str,
    handler: str,
    help_text: str,
    *,
    trace: str = "read",
    legacy_db: bool = False,
    description: str | None = None,
) -> argparse.ArgumentParser:
    """Add one subcommand; ``trace`` is how it opens the trace (read/write/none)."""
    parser = sub.add_parser(name, help=help_text, description=description or help_text)
    _global_options(parser, top=False)
    if legacy_db:
        parser.add_argument("legacy_db", nargs="?", help=argparse.SUPPRESS)
    parser.set_defaults(handler=handler, trace=trace)
    return parser


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """Return the argument parser: every subcommand, or what ``argv`` runs.

    With ``argv``, a command line that names a known command (after the
    global options) gets a parser with that command's group of subcommands
    only: building every subcommand's parser is most of the parser's start-up
    and one command needs one. Any other command line (``--help``, no
    command, an unknown one, an abbreviated option) gets every subcommand, so
    help, usage and errors read as they always did.
    """
    parser = _top_parser()
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    chosen = _group_of(argv)
    for group in _GROUPS if chosen is None else (chosen,):
        group(sub)
    return parser


def _group_of(
    argv: Sequence[str] | None,
) -> Callable[[Subparsers[argparse.ArgumentParser]], None] | None:
    """Return the group of the command ``argv`` names, if it names one plainly."""
    if argv is None:
        return None
    args = iter(argv)
    for arg in args:
        if arg == "--db":
            if next(args, None) is None:
                return None
        elif arg.startswith("--db=") or arg in ("--json", "--debug"):
            continue
        elif arg.startswith("-"):
            return None
        else:
            return _COMMAND_GROUPS.get(arg)
    return None


def _top_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="goatherd",
        description=(
            "Reversible, auditable AI-agent work: an append-only, content-addressed "
            "trace with scopes, checkpoints and settlement on top."
        ),
        epilog=_EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"goatherd {VERSION}")
    _global_options(parser, top=True)
    return parser


def _demo(sub: Subparsers[argparse.ArgumentParser]) -> None:
    from goatherd.cli.defaults import default_demo_dir

    demo = _command(
        sub,
        "demo",
        "demo_cmd:cmd_demo",
        "run the best-of-n demo (no services, no network, no model)",
        trace="none",
        description=(
            "Create a sample git project and run three scripted attempts at its"
            " failing test as a best-of-n session: one is denied by the"
            " supervisor, one breaks the tests, one passes and is settled onto"
            " the project. Rerun the same command to resume after a crash."
        ),
    )
    demo.add_argument(
        "--dir", default=None, help=f"the demo directory (default {default_demo_dir()})"
    )
    demo.add_argument(
        "--fresh", action="store_true", help="wipe an earlier demo and start over"
    )
    demo.add_argument(
        "--crash-after",
        type=positive,
        default=0,
        metavar="N",
        help="kill this process (SIGKILL) after N appended records; rerun to resume",
    )


def _inspection(sub: Subparsers[argparse.ArgumentParser]) -> None:
    log = _command(
        sub,
        "log",
        "inspect_cmds:cmd_log",
        "list the trace's path entries in commit order",
        legacy_db=True,
    )
    log.add_argument("--owner", help="only this owner path and its ':'-descendants")
    log.add_argument("--schema", help="only records with this schema ref")
    log.add_argument(
        "--limit", type=positive, default=None, metavar="N", help="stop after N"
    )
    log.add_argument(
        "--tail", type=positive, default=None, metavar="N", help="only the last N"
    )
    log.add_argument(
        "--since",
        type=non_negative,
        default=None,
        metavar="POSITION",
        help="only entries at this log position or later",
    )
    log.add_argument(
        "--follow",
        "-f",
        action="store_true",
        help="keep printing new entries as other processes commit them",
    )
    log.add_argument(
        "--interval",
        type=_seconds,
        default=0.5,
        metavar="SECONDS",
        help="how often --follow polls the trace (default 0.5)",
    )

    show = _command(
        sub,
        "show",
        "inspect_cmds:cmd_show",
        "show one record, its paths, parents and children; or the output and"
        " settlement a goatherd git commit came from",
        legacy_db=True,
    )
    show.add_argument(
        "record_id",
        metavar="RECORD_ID|COMMIT",
        help="a record id or prefix, or a git commit (a revision) that"
        " 'goatherd settle ... --commit' made",
    )
    show.add_argument(
        "--repo",
        metavar="PATH",
        default=None,
        help="read COMMIT from this git repository (default: the current"
        " directory's, when RECORD_ID names no record)",
    )

    _command(
        sub,
        "stats",
        "inspect_cmds:cmd_stats",
        "count what the trace holds",
        legacy_db=True,
    )
    verify = _command(
        sub,
        "verify",
        "inspect_cmds:cmd_verify",
        "recompute and cross-check every stored row of the trace",
        legacy_db=True,
    )
    verify.add_argument(
        "--all", action="store_true", help="report every problem, not only the first"
    )
    verify.add_argument(
        "--expect-head",
        metavar="HEAD",
        type=_trace_head,
        help="a head noted earlier (<commits>:sha256:<hex>, from stats, verify or "
        "export): fail unless the trace still extends it",
    )
    _command(
        sub,
        "recover",
        "recover_cmd:cmd_recover",
        "show the scope tree, checkpoints and outputs recovered from a trace",
        legacy_db=True,
    )


def _workspace_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workspace",
        action="append",
        default=[],
        metavar="[SCOPE=]DIR",
        help=(
            "where a root scope's workspace (a git repository) lives, when not"
            f" where its record says (default ${WORKSPACE_ENV}, else the record)"
        ),
    )


def _lifecycle(sub: Subparsers[argparse.ArgumentParser]) -> None:
    _command(
        sub,
        "scopes",
        "lifecycle_cmds:cmd_scopes",
        "the scope tree with states, outputs and checkpoints",
    )
    diff = _command(
        sub,
        "diff",
        "lifecycle_cmds:cmd_diff",
        "a unified diff of a scope or an output against its base",
    )
    diff.add_argument("target", metavar="SCOPE|OUTPUT", help="a scope or output id")
    diff.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour the diff (default: on a terminal, unless NO_COLOR is set)",
    )
    _workspace_option(diff)

    checkout = _command(
        sub,
        "checkout",
        "lifecycle_cmds:cmd_checkout",
        "write a scope's, output's or checkpoint's files into a new directory",
    )
    checkout.add_argument("target", metavar="SCOPE|OUTPUT|CHECKPOINT")
    checkout.add_argument("directory", metavar="DIR", help="a new or empty directory")
    _workspace_option(checkout)

    settle = _command(
        sub,
        "settle",
        "lifecycle_cmds:cmd_settle",
        "consume a sealed output exactly once",
        trace="write",
    )
    settle.add_argument("output", metavar="OUTPUT", help="an output id (out:...)")
    settle.add_argument(
        "action",
        choices=(
            *("select", "apply", "release", "discard"),
            *("selected", "applied", "released", "discarded"),
        ),
        metavar="ACTION",
        help="select, apply, release or discard (the past tense works too)",
    )
    settle.add_argument(
        "--resume",
        type=non_negative,
        metavar="SEQ",
        default=None,
        help="finish (or end) the attempt that claimed the output under SEQ: the"
        " seq a 'settle effect landed' or a refused halt names",
    )
    settle.add_argument(
        "--commit",
        action="store_true",
        help="select/apply: make the landed winner one git commit on the branch"
        " of the parent's repository, with Goatherd-Output and"
        " Goatherd-Trace-Head trailers (only the settled paths are committed)",
    )
    settle.add_argument(
        "-m",
        "--message",
        metavar="MESSAGE",
        default=None,
        help="with --commit: the commit message (default: one naming the output)",
    )
    settle.add_argument(
        "--author",
        metavar="'NAME <EMAIL>'",
        default=None,
        help="with --commit: the commit's author (default: the repository's"
        " user.name and user.email)",
    )
    _workspace_option(settle)

    discard = _command(
        sub,
        "discard",
        "lifecycle_cmds:cmd_discard",
        "discard an active child scope (its records stay; its worktree goes)",
        trace="write",
    )
    discard.add_argument("scope", metavar="SCOPE", help="a scope id (scope:...)")
    _workspace_option(discard)

    restore = _command(
        sub,
        "restore",
        "lifecycle_cmds:cmd_restore",
        "restore a checkpoint onto its scope's workspace (once)",
        trace="write",
    )
    restore.add_argument("checkpoint", metavar="CHECKPOINT", help="a checkpoint id")
    restore.add_argument(
        "--resume",
        type=non_negative,
        metavar="SEQ",
        default=None,
        help="finish the attempt that claimed the checkpoint under SEQ: the seq a"
        " 'restore effect landed' or a refused halt names",
    )
    restore.add_argument(
        "--snapshot-to",
        metavar="FILE",
        help="write the checkpoint's snapshot (e.g. the conversation) to FILE",
    )
    _workspace_option(restore)


def _cuts_and_history(sub: Subparsers[argparse.ArgumentParser]) -> None:
    cut = sub.add_parser("cut", help="publish or resolve a cut (a read address)")
    _global_options(cut, top=False)
    cut_sub = cut.add_subparsers(dest="action", metavar="ACTION", required=True)
    publish = _command(
        cut_sub,
        "publish",
        "trace_cmds:cmd_cut_publish",
        "publish a cut: OWNER through RECORD_ID, named CUT_ID",
        trace="write",
    )
    publish.add_argument("cut_id", metavar="CUT_ID")
    publish.add_argument("owner", metavar="OWNER")
    publish.add_argument("record_id", metavar="RECORD_ID", help="a record id or prefix")
    publish.add_argument("--publisher", help="the owner path publishing the cut")
    resolve = _command(
        cut_sub,
        "resolve",
        "trace_cmds:cmd_cut_resolve",
        "resolve a published cut to the records it addresses",
    )
    resolve.add_argument("frontier_id", metavar="CUT_ID")

    history = _command(
        sub,
        "history",
        "trace_cmds:cmd_history",
        "the effective history of an execution: root, active children, facts",
    )
    history.add_argument(
        "owner", metavar="OWNER|CUT_ID", help="an execution's owner path or a cut id"
    )


def _moving(sub: Subparsers[argparse.ArgumentParser]) -> None:
    export = _command(
        sub,
        "export",
        "move_cmds:cmd_export",
        "write the trace as JSON lines (stdout by default)",
        legacy_db=True,
    )
    export.add_argument("-o", "--output", help="write to this file instead of stdout")
    redact = _command(
        sub,
        "redact",
        "redact_cmd:cmd_redact",
        "erase records' payloads by a recorded redaction, then say what remains",
        trace="write",
        description=(
            "Erase the payloads of RECORD_ID... by a recorded redaction. SQLite: the "
            "WAL is checkpointed and truncated and the file read back. PostgreSQL: "
            "VACUUM (FULL) of the payload tables (it locks them while it runs), "
            "CHECKPOINT and pg_switch_wal() where the role may, then the table "
            "files and pg_wal read back. Exit 0: complete; 4: bytes may remain "
            "(one line each)."
        ),
    )
    redact.add_argument(
        "record_ids",
        nargs="+",
        metavar="RECORD_ID",
        help="a record id or unique prefix",
    )
    redact.add_argument("--reason", required=True, help="why (recorded in the trace)")
    redact.add_argument(
        "--id",
        dest="redaction_id",
        default=None,
        metavar="REDACTION_ID",
        help="the redaction's intent id (default: derived from the ids and reason, "
        "so a rerun replays)",
    )
    redact.add_argument(
        "--wait",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="PostgreSQL: how long to wait for table locks and old snapshots "
        "(default 30)",
    )
    redact.add_argument(
        "--no-compact",
        action="store_true",
        help="PostgreSQL: skip VACUUM (FULL), CHECKPOINT and the read-back",
    )
    imp = _command(
        sub,
        "import",
        "move_cmds:cmd_import",
        "prove a JSON-lines export and load it into a new trace (--db)",
        trace="create",
    )
    imp.add_argument("source", metavar="FILE", help="an export file ('-' for stdin)")
    imp.add_argument("legacy_db", nargs="?", help=argparse.SUPPRESS)
    from goatherd.cli.defaults import DEFAULT_MAX_LINE_BYTES

    imp.add_argument(
        "--max-line-bytes",
        type=positive,
        default=DEFAULT_MAX_LINE_BYTES,
        metavar="N",
        help=f"refuse lines longer than N bytes (default {DEFAULT_MAX_LINE_BYTES})",
    )
    imp.add_argument(
        "--accept-headless",
        action="store_true",
        help="import an export whose end line names no head (made before heads "
        "were written); its commit chain then goes unchecked",
    )


def _module_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--module",
        action="append",
        default=[],
        metavar="PKG.MOD:NAME",
        help="also run your projection (a Projection class, instance or factory)",
    )


def _serving(sub: Subparsers[argparse.ArgumentParser]) -> None:
    from goatherd.cli.defaults import DEFAULT_ADDR

    ui = _command(
        sub, "traceui", "serve_cmds:cmd_traceui", "serve the read-only trace UI"
    )
    ui.add_argument(
        "--addr",
        default=DEFAULT_ADDR,
        help=f"HOST:PORT to bind (default {DEFAULT_ADDR})",
    )
    ui.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST",
        help="also accept this Host header (default: the bound address, localhost)",
    )
    ui.add_argument(
        "--interval",
        type=_seconds,
        default=0.25,
        metavar="SECONDS",
        help="how often to look for commits of other processes (default 0.25)",
    )
    _module_option(ui)

    proj = sub.add_parser(
        "projections", help="list, catch up or rebuild the read models"
    )
    _global_options(proj, top=False)
    proj_sub = proj.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = _command(
        proj_sub,
        "list",
        "serve_cmds:cmd_projections_list",
        "each read model's position and lag",
        trace="write",
    )
    _module_option(listing)
    catch_up = _command(
        proj_sub,
        "catch-up",
        "serve_cmds:cmd_projections_catch_up",
        "fold every new record into the views",
        trace="write",
    )
    _module_option(catch_up)
    rebuild = _command(
        proj_sub,
        "rebuild",
        "serve_cmds:cmd_projections_rebuild",
        "drop one read model and replay the log",
        trace="write",
    )
    rebuild.add_argument("name", metavar="NAME", help="the read model's name")
    _module_option(rebuild)


def _mcp(sub: Subparsers[argparse.ArgumentParser]) -> None:
    mcp = _command(
        sub,
        "mcp",
        "mcp_cmd:cmd_mcp",
        "serve isolated, audited environments of a repository to an MCP agent",
        trace="optional",
        description=(
            "Serve the Model Context Protocol over stdio (or streamable HTTP on"
            " loopback): an agent opens environments (worktrees forked from the"
            " repository), runs confined commands, edits files, checkpoints and"
            " proposes; every call is recorded in the trace and judged by the"
            " supervisor; a human settles the proposals with goatherd settle. The"
            " trace is --db, else $GOATHERD_DB, else goatherd/trace.sqlite in the"
            " repository's git directory. Needs goatherd[mcp]."
        ),
    )
    mcp.add_argument(
        "--repo", default=".", help="the git repository (default: the current one)"
    )
    mcp.add_argument(
        "--worktrees",
        default=None,
        metavar="DIR",
        help="where environments' worktrees go (default under ~/.local/state/goatherd)",
    )
    mcp.add_argument(
        "--http",
        default=None,
        metavar="[HOST:]PORT",
        help="serve streamable HTTP on this loopback address instead of stdio",
    )
    mcp.add_argument(
        "--network",
        choices=("allow", "deny"),
        default="allow",
        help="deny: commands may not open TCP connections (Landlock ABI 4+)",
    )
    mcp.add_argument(
        "--accept-gap",
        action="append",
        default=[],
        metavar="GAP",
        help="accept a Landlock guarantee an old kernel lacks (truncate, signals)",
    )
    mcp.add_argument(
        "--pass-env",
        action="append",
        default=[],
        metavar="NAME",
        help="also give commands this variable of the server's environment"
        " (repeatable; by default they get PATH, LANG, LC_*, TERM and TZ only)",
    )
    mcp.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="a command's timeout when the agent names none (default 120)",
    )
    mcp.add_argument("--crash-after", type=int, default=0, help=argparse.SUPPRESS)


_Group = Callable[["Subparsers[argparse.ArgumentParser]"], None]
_GROUPS: Final[tuple[_Group, ...]] = (
    _demo,
    _inspection,
    _lifecycle,
    _cuts_and_history,
    _moving,
    _serving,
    _mcp,
)
"""The subcommand groups, in ``--help`` order."""
_COMMAND_GROUPS: Final[dict[str, _Group]] = {
    **dict.fromkeys(("demo",), _demo),
    **dict.fromkeys(("log", "show", "stats", "verify", "recover"), _inspection),
    **dict.fromkeys(
        ("scopes", "diff", "checkout", "settle", "discard", "restore"), _lifecycle
    ),
    **dict.fromkeys(("cut", "history"), _cuts_and_history),
    **dict.fromkeys(("export", "redact", "import"), _moving),
    **dict.fromkeys(("traceui", "projections"), _serving),
    **dict.fromkeys(("mcp",), _mcp),
}
"""Each top-level command's group (``tests/cli`` checks it against the parser)."""
