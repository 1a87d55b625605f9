"""``goatherd log``, ``show``, ``stats`` and ``verify``: read a trace, never write."""

from __future__ import annotations

import argparse
import json
import sys

from goatherd.cli.common import (
    Subparsers,
    add_db_argument,
    add_json_flag,
    open_read_only,
)
from goatherd.cli.output import ProgressBar, emit_json, short_id
from goatherd.domain.records import Record
from goatherd.infrastructure.inspection import (
    record_details,
    resolve_record_id,
    trace_stats,
)
from goatherd.infrastructure.integrity import IntegrityReport, verify_trace
from goatherd.infrastructure.store.chain import TraceHead, parse_head

__all__ = ["register"]

_PAGE = 1000


def register(sub: Subparsers[argparse.ArgumentParser]) -> None:
    """Register the inspection subcommands."""
    log = sub.add_parser("log", help="list the trace's records in commit order")
    add_db_argument(log)
    log.add_argument("--owner", help="only this owner path and its ':'-descendants")
    log.add_argument("--schema", help="only records with this schema ref")
    log.add_argument("--limit", type=int, default=0, help="stop after N records")
    add_json_flag(log)
    log.set_defaults(func=cmd_log)

    show = sub.add_parser(
        "show", help="show one record, its paths, parents and children"
    )
    add_db_argument(show)
    show.add_argument(
        "record_id", metavar="RECORD_ID", help="a record id or a unique prefix"
    )
    add_json_flag(show)
    show.set_defaults(func=cmd_show)

    stats = sub.add_parser("stats", help="count what the trace holds")
    add_db_argument(stats)
    add_json_flag(stats)
    stats.set_defaults(func=cmd_stats)

    verify = sub.add_parser(
        "verify", help="recompute and cross-check every stored row of the trace"
    )
    add_db_argument(verify)
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
    add_json_flag(verify)
    verify.set_defaults(func=cmd_verify)


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
    return (
        f"{position:>6}  {place}  {record.envelope.mode[:4]}  {record.fact_kind}"
        f"  {short_id(record.record_id)}  {_payload_summary(record)}"
    )


def _payload_summary(record: Record) -> str:
    if record.redacted_by is not None:
        return f"[payload erased by redaction {short_id(record.redacted_by)}]"
    return _summary(record.payload)


def cmd_log(args: argparse.Namespace) -> int:
    """Print the log, optionally filtered by owner subtree and schema."""
    schemas = None if args.schema is None else [args.schema]
    shown = 0
    rows: list[dict[str, object]] = []
    with open_read_only(args.db) as store:
        after = -1
        while True:
            entries = store.read_log(after, _PAGE, schema_refs=schemas)
            if not entries:
                break
            after = entries[-1].position
            for entry in entries:
                record = entry.record
                if not _in_subtree(record.trace_owner_id, args.owner):
                    continue
                if args.json:
                    rows.append(
                        _log_json(entry.position, entry.append_intent_id, record)
                    )
                else:
                    print(_log_line(entry.position, record))
                shown += 1
                if args.limit and shown >= args.limit:
                    break
            if args.limit and shown >= args.limit:
                break
    if args.json:
        emit_json(rows)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """Print one record in full."""
    with open_read_only(args.db) as store:
        details = record_details(store, resolve_record_id(store, args.record_id))
    if args.json:
        emit_json(details.to_json())
        return 0
    print(f"record     {details.record_id}")
    print(f"schema     {details.schema_ref} ({details.mode})")
    print(f"witness    {' -> '.join(details.witness_chain) or '(root sentinel)'}")
    for parent in details.caused_by:
        print(f"parent     {parent}")
    for child in details.children:
        print(f"child      {child}")
    for place in details.placements:
        position = "-" if place.position is None else str(place.position)
        print(
            f"path       {place.path_ref}#{place.ordinal}  kind {place.kind_label}"
            f"  intent {place.append_intent_id}  position {position}"
        )
    if details.redacted_by is not None:
        print(f"payload    erased by redaction {details.redacted_by}")
        return 0
    print("payload")
    print(json.dumps(details.payload, ensure_ascii=False, sort_keys=True, indent=2))
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """Print what the trace holds."""
    with open_read_only(args.db) as store:
        stats = trace_stats(store)
    if args.json:
        emit_json(stats.to_json())
        return 0
    data = stats.to_json()
    schemas = data.pop("schemas")
    for key, value in data.items():
        print(f"{key:<18} {value}")
    print("schemas")
    for schema, count in schemas.items():
        print(f"  {count:>8}  {schema}")
    return 0


def _trace_head(text: str) -> TraceHead:
    try:
        return parse_head(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def cmd_verify(args: argparse.Namespace) -> int:
    """Recompute and cross-check everything; exit 1 naming the first bad row."""
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
    print(f"verify failed: {first}", file=sys.stderr)
    for problem in report.problems[1:]:
        print(f"  also: {problem}", file=sys.stderr)
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
