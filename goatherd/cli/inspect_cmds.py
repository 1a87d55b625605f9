"""``goatherd log``, ``show``, ``stats`` and ``verify``: read a trace, never write."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from goatherd.cli.common import open_read_only
from goatherd.cli.exits import CommandError
from goatherd.cli.output import ProgressBar, emit_json, short_id
from goatherd.cli.text import clean, clean_lines, json_safe, one_line

if TYPE_CHECKING:
    from goatherd.domain.log import LogEntry
    from goatherd.domain.records import Record
    from goatherd.infrastructure.audit.inspection import TraceStats
    from goatherd.infrastructure.audit.verify import IntegrityReport
    from goatherd.infrastructure.store import SqlAlchemyTraceStore

__all__ = ["cmd_log", "cmd_show", "cmd_stats", "cmd_verify"]

_PAGE = 1000


def _in_subtree(owner: str, prefix: str | None) -> bool:
    return prefix is None or owner == prefix or owner.startswith(prefix + ":")


def _summary(payload: object, width: int = 60) -> str:
    text = json.dumps(
        payload, ensure_ascii=False, sort_keys=True, separators=(",", ":")
    )
    return text if len(text) <= width else text[: width - 3] + "..."


def _log_json(position: int, intent: str, record: Record) -> dict[str, object]:
    return {
        "position": position,
        "append_intent_id": intent,
        "record_id": record.record_id,
        "owner": record.trace_owner_id,
        "ordinal": record.owner_ordinal,
        "mode": record.envelope.mode,
        "schema_ref": record.envelope.schema_ref,
        "kind_label": record.fact_kind,
        "caused_by": list(record.envelope.caused_by_record_ids),
        "payload": dict(record.payload),
        "redacted_by": record.redacted_by,
    }


def _log_line(position: int, record: Record) -> str:
    place = f"{record.trace_owner_id}#{record.owner_ordinal}"
    return clean(
        f"{position:>6}  {place}  {record.envelope.mode[:4]}  {record.fact_kind}"
        f"  {short_id(record.record_id)}  {_payload_summary(record)}"
    )


def _payload_summary(record: Record) -> str:
    if record.redacted_by is not None:
        return f"[payload erased by redaction {short_id(record.redacted_by)}]"
    return _summary(record.payload)


def _entries(
    store: SqlAlchemyTraceStore, args: argparse.Namespace, after: int
) -> Iterator[LogEntry]:
    """Yield the matching log entries after ``after`` that are committed now."""
    schemas = None if args.schema is None else [args.schema]
    while True:
        entries = store.read_log(after, _PAGE, schema_refs=schemas)
        if not entries:
            return
        after = entries[-1].position
        for entry in entries:
            if _in_subtree(entry.record.trace_owner_id, args.owner):
                yield entry


def _selected(store: SqlAlchemyTraceStore, args: argparse.Namespace) -> list[LogEntry]:
    start = -1 if args.since is None else args.since - 1
    if args.tail is not None:
        return list(deque(_entries(store, args, start), maxlen=args.tail))
    rows: list[LogEntry] = []
    for entry in _entries(store, args, start):
        rows.append(entry)
        if args.limit is not None and len(rows) >= args.limit:
            break
    return rows


def _emit(entry: LogEntry, as_json: bool) -> None:
    if as_json:
        line = _log_json(entry.position, entry.append_intent_id, entry.record)
        text = json.dumps(line, sort_keys=True, ensure_ascii=False)
        print(json_safe(text), flush=True)
    else:
        print(_log_line(entry.position, entry.record), flush=True)


def _follow(store: SqlAlchemyTraceStore, args: argparse.Namespace, after: int) -> None:
    """Print new entries as other processes commit them, until interrupted.

    Positions equal commit order, so resuming after the last position read
    never skips a commit.
    """
    schemas = None if args.schema is None else [args.schema]
    while True:
        entries = store.read_log(after, _PAGE, schema_refs=schemas)
        for entry in entries:
            if _in_subtree(entry.record.trace_owner_id, args.owner):
                _emit(entry, args.json)
        if entries:
            after = entries[-1].position
        if len(entries) < _PAGE:
            time.sleep(args.interval)


def cmd_log(args: argparse.Namespace) -> int:
    """Print the log: one line per path entry (a record once per owner path).

    ``--follow`` streams JSON lines with ``--json`` (one object per entry);
    without it, ``--json`` prints one JSON array.
    """
    with open_read_only(args.db, live=args.follow) as store:
        if args.owner is not None:
            from goatherd.cli.ids import log_owner

            args.owner = log_owner(store, args.owner)
        head = store.max_position()
        rows = _selected(store, args)
        if args.follow:
            for entry in rows:
                _emit(entry, args.json)
            after = head if args.since is None else max(head, args.since - 1)
            _follow(store, args, after)
            return 0
    if args.json:
        emit_json([_log_json(e.position, e.append_intent_id, e.record) for e in rows])
    else:
        for entry in rows:
            print(_log_line(entry.position, entry.record))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """Print one record in full, or where a goatherd git commit came from."""
    from goatherd.cli.ids import UnknownIdError, resolve_record
    from goatherd.infrastructure.audit.inspection import record_details

    if getattr(args, "repo", None) is not None:
        return _show_commit(args, Path(args.repo))
    with open_read_only(args.db) as store:
        try:
            record_id = resolve_record(store, args.record_id)
        except UnknownIdError as unknown:
            if _commit_here(args.record_id) is None:
                raise
            record_id = ""
            error = unknown
        if record_id:
            details = record_details(store, record_id)
    if not record_id:
        try:
            return _show_commit(args, Path.cwd())
        except CommandError as failed:
            raise CommandError(f"{error}; {failed}") from failed
    if args.json:
        emit_json(details.to_json())
        return 0
    lines = [
        f"record     {details.record_id}",
        f"schema     {details.schema_ref} ({details.mode})",
        f"witness    {' -> '.join(details.witness_chain) or '(root sentinel)'}",
    ]
    lines += [f"parent     {parent}" for parent in details.caused_by]
    lines += [f"child      {child}" for child in details.children]
    for place in details.placements:
        position = "-" if place.position is None else str(place.position)
        lines.append(
            f"path       {place.path_ref}#{place.ordinal}  kind {place.kind_label}"
            f"  intent {place.append_intent_id}  position {position}"
        )
    if details.redacted_by is not None:
        lines.append(f"payload    erased by redaction {details.redacted_by}")
        print("\n".join(clean_lines(lines)))
        return 0
    lines.append("payload")
    payload = json.dumps(details.payload, ensure_ascii=False, sort_keys=True, indent=2)
    lines += payload.splitlines()
    print("\n".join(clean_lines(lines)))
    return 0


def _commit_here(revision: str) -> str | None:
    """The commit ``revision`` names in the current directory's repository."""
    from goatherd.application.errors import SandboxError
    from goatherd.infrastructure.sandbox.gitcommit import read_trailers
    from goatherd.infrastructure.sandbox.gitrunner import GitRunner

    try:
        return read_trailers(GitRunner(Path.cwd()), revision).sha
    except SandboxError:
        return None


def _show_commit(args: argparse.Namespace, repo: Path) -> int:
    """Print the output and settlement a ``settle --commit`` commit names."""
    from goatherd.application.errors import SandboxError
    from goatherd.cli.common import recovered
    from goatherd.infrastructure.sandbox.gitcommit import read_trailers
    from goatherd.infrastructure.sandbox.gitrunner import GitRunner

    try:
        found = read_trailers(GitRunner(repo), args.record_id)
    except SandboxError as error:
        raise CommandError(f"show: {error}") from error
    output_id = found.get("Goatherd-Output")
    if not output_id:
        raise CommandError(
            f"commit {found.sha} has no Goatherd-Output trailer: it was not made"
            " by 'goatherd settle ... --commit'"
        )
    with recovered(args) as (_runtime, manager, _store):
        output = manager.output(output_id)
        if output is None:
            raise CommandError(
                f"commit {found.sha} names output {output_id}, which the trace"
                f" {args.db} does not hold; name its trace with --db"
            )
        summary = {
            "commit": found.sha,
            "subject": found.subject,
            "output": output_id,
            "scope": output.scope_id,
            "state": output.state.value,
            "settlement": found.get("Goatherd-Trace-Head"),
            "recorded_commit": output.commit(),
            "trailers": [{"key": k, "value": v} for k, v in found.trailers],
        }
    if args.json:
        emit_json(summary)
        return 0
    recorded = summary["recorded_commit"]
    if recorded == found.sha:
        note = "the trace records this commit"
    elif recorded:
        note = f"the trace records commit {recorded}, not this one"
    else:
        note = "the trace records no commit for this output"
    lines = [
        f"commit     {found.sha}  {found.subject}",
        f"output     {output_id}  ({summary['state']})",
        f"scope      {summary['scope']}",
        f"settlement {summary['settlement'] or '(no Goatherd-Trace-Head trailer)'}",
        f"recorded   {note}",
    ]
    print("\n".join(clean_lines(lines)))
    return 0


def stats_lines(stats: TraceStats) -> list[str]:
    """Describe the counts with the words every command uses.

    A *record* is one content-addressed record (witnesses included); a *path
    entry* is one placement of a record on an owner path (a record on three
    paths has three); a *log entry* is a path entry with a log position,
    which is every path entry but the witnesses'. ``log`` prints one line per
    log entry.
    """
    lines = [
        f"records            {stats.records}  ({stats.witnesses} of them witnesses)",
        f"path entries       {stats.path_entries}",
        f"log entries        {stats.log_positions}  (path entries with a position)",
        f"owner paths        {stats.owners}",
        f"contexts           {stats.contexts}",
        f"append intents     {stats.intents}",
        f"cuts               {stats.frontiers}",
        f"checkpoint blobs   {stats.checkpoint_blobs}",
        f"materializations   {stats.materializations}",
        f"head               {stats.head}  (note it: verify --expect-head HEAD)",
        "records per schema",
    ]
    lines += [f"  {count:>8}  {schema}" for schema, count in stats.schemas.items()]
    return lines


def cmd_stats(args: argparse.Namespace) -> int:
    """Print what the trace holds."""
    from goatherd.infrastructure.audit.inspection import trace_stats

    with open_read_only(args.db) as store:
        stats = trace_stats(store)
    if args.json:
        emit_json(stats.to_json())
        return 0
    for line in stats_lines(stats):
        print(clean(line))
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """Recompute and cross-check everything; exit 1 naming the first bad row."""
    from goatherd.infrastructure.audit.verify import verify_trace

    bar = ProgressBar()
    with open_read_only(args.db) as store:
        report = verify_trace(
            store,
            progress=bar,
            max_problems=None if args.all else 1,
            expect_head=args.expect_head,
        )
    bar.finish()
    if args.json:
        emit_json(_verify_json(report))
        return 0 if report.ok else 1
    if report.ok:
        print(
            f"ok: {report.records} records, {report.path_entries} path entries, "
            f"{report.log_positions} log positions, {report.intents} intents, "
            f"{report.contexts} contexts, {report.frontiers} frontiers, "
            f"{report.checkpoint_blobs} checkpoint blobs verified; head {report.head}"
            + (" (extends the expected head)" if report.expected_head else "")
        )
        return 0
    first = report.problems[0]
    print(f"verify failed: {one_line(str(first))}", file=sys.stderr)
    for problem in report.problems[1:]:
        print(f"  also: {one_line(str(problem))}", file=sys.stderr)
    hidden = report.problem_count - len(report.problems)
    if hidden:
        print(f"  and {hidden} more problems (--all lists them)", file=sys.stderr)
    return 1


def _verify_json(report: IntegrityReport) -> dict[str, object]:
    return {
        "ok": report.ok,
        "records": report.records,
        "path_entries": report.path_entries,
        "log_positions": report.log_positions,
        "frontiers": report.frontiers,
        "intents": report.intents,
        "contexts": report.contexts,
        "checkpoint_blobs": report.checkpoint_blobs,
        "materializations": report.materializations,
        "head": report.head,
        "expected_head": report.expected_head,
        "problem_count": report.problem_count,
        "problems": [
            {"check": p.check, "record_id": p.record_id, "detail": p.detail}
            for p in report.problems
        ],
    }
