"""Every subcommand of ``goatherd``, one builder per group of commands.

``parser.build_parser`` adds the group of the command a line names (or all
of them, for help and errors); each builder adds its subcommands with
their options and names each handler as ``"module:function"``, imported
only when the command runs. The defaults a help text shows come from
``goatherd.cli.defaults``, imported inside the builder that needs them.
"""

from __future__ import annotations

import argparse

from goatherd.cli.arguments import (
    Subparsers,
    _command,
    _global_options,
    _module_option,
    _seconds,
    _trace_head,
    _workspace_option,
    non_negative,
    positive,
)

# Nothing public: ``parser`` imports the group builders by name.
__all__: list[str] = []


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
