"""Render a demo run: the scope tree, each attempt's outcome, counts, the trace.

Everything shown comes from the trace (via :class:`~.session.DemoRun`), so a
fresh run, a resumed run and an "already complete" rerun print the same
story. :func:`summary_json` is the ``--json`` form of the same facts.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Final

from goatherd.demo.resume import CUT_OFF_REASON
from goatherd.demo.session import DemoRun
from goatherd.demo.state import ROOT_OWNER, AttemptView

__all__ = ["attempt_outcome", "render_summary", "summary_json", "traceui_command"]

_MAIN_PREFIXES: Final = ("goatherd.", "demo.")


def traceui_command(run: DemoRun) -> str:
    """The command that opens the run's trace in the trace UI."""
    return f"goatherd traceui --db {shlex.quote(str(run.layout.trace))}"


def attempt_outcome(attempt: AttemptView) -> tuple[str, list[str]]:
    """Return an attempt's outcome label and the lines explaining it."""
    run = attempt.run or {}
    status = attempt.status
    reason = str(run.get("reason") or "")
    if status == "denied":
        blocked = [f"the gate blocked `{cmd}`" for cmd in attempt.blocked]
        return "DENIED", [*blocked, f"merge denied: {reason}"]
    if status == "sealed" and run.get("output_action") == "discarded":
        return "DISCARDED", [_with_tests(reason or "not chosen", attempt)]
    if status in ("selected", "applied"):
        details = [_with_tests("chosen", attempt)]
        if attempt.restores:
            details.append(f"restored {attempt.restores} checkpoint(s) on the way")
        return status.upper(), details
    if status == "failed" and reason == CUT_OFF_REASON:
        return "CUT OFF", [reason]
    if status:
        return status.upper(), [reason] if reason else []
    return "UNFINISHED", ["no run record yet"]


def _with_tests(text: str, attempt: AttemptView) -> str:
    if attempt.tests_passed is None:
        return text
    verdict = "tests pass" if attempt.tests_passed else "tests fail"
    summary = f" ({attempt.test_summary})" if attempt.test_summary else ""
    return f"{text}: {verdict}{summary}"


def render_summary(run: DemoRun) -> str:
    """Return the readable summary of ``run``."""
    lines: list[str] = [_headline(run), "", "scope tree"]
    lines.append(f"  scope:{ROOT_OWNER}  active  (in place on {run.layout.project})")
    attempts = run.state.attempts
    width = max((len(a.scope_id) for a in attempts), default=0)
    for position, attempt in enumerate(attempts):
        branch = "└──" if position == len(attempts) - 1 else "├──"
        label, _ = attempt_outcome(attempt)
        lines.append(
            f"  {branch} {attempt.scope_id:<{width}}  {attempt.state.value:<9}"
            f"  {attempt.agent or '?':<8}  {label}"
        )
    lines += ["", "attempts"]
    for attempt in attempts:
        label, details = attempt_outcome(attempt)
        name = attempt.owner.removeprefix(ROOT_OWNER + ":")
        lines.append(f"  {name} ({attempt.agent or '?'}): {label}")
        lines.extend(f"      {line}" for line in details)
    lines += ["", *_winner_lines(run), "", *_record_lines(run.stats.schemas)]
    lines.append(
        f"  {run.stats.records} records in total ({run.stats.witnesses} witnesses"
        f" included), {run.stats.log_positions} log entries"
    )
    lines += [
        "",
        f"trace: {run.layout.trace}",
        f"open it: {traceui_command(run)}",
    ]
    return "\n".join(lines)


def _headline(run: DemoRun) -> str:
    if run.already_complete:
        how = "already complete (recorded in the trace; --fresh starts over)"
    elif run.resumed:
        how = "resumed from the trace and completed"
    else:
        how = "completed"
    rounds = len(run.state.rounds)
    extra = f" in {rounds} rounds" if rounds > 1 else ""
    return f"goatherd demo: best-of-n session {how}{extra}"


def _winner_lines(run: DemoRun) -> list[str]:
    winner = run.state.winner
    if winner is None:
        return ["winner: none"]
    run_record = winner.run or {}
    changes = run_record.get("changes")
    listed = changes if isinstance(changes, list) else []
    paths = [
        f"{c.get('path')} ({c.get('kind')})" for c in listed if isinstance(c, Mapping)
    ]
    output = winner.winning_output
    action = output.action.value if output and output.action else "?"
    return [
        f"winner: {winner.agent} ({winner.scope_id}), settled {action}",
        f"  changed: {', '.join(paths) or 'nothing'}",
        f"  the project now differs from its commit in: "
        f"{', '.join(run.project_changes) or 'nothing'}",
    ]


def _record_lines(schemas: Mapping[str, int]) -> list[str]:
    """List the runtime's schemas, then the rest as one line: they sum up."""
    main = sorted(
        (name, count)
        for name, count in schemas.items()
        if name.startswith(_MAIN_PREFIXES)
    )
    others = sum(schemas.values()) - sum(count for _, count in main)
    rows = [*main, ("other schemas (witnesses, agent records)", others)]
    width = max(len(name) for name, _ in rows)
    return ["records by schema", *(f"  {n:<{width}}  {c:>4}" for n, c in rows)]


def summary_json(run: DemoRun) -> dict[str, object]:
    """Return the summary as a JSON object (for ``--json``)."""
    winner = run.state.winner
    return {
        "directory": str(run.layout.root),
        "project": str(run.layout.project),
        "trace": str(run.layout.trace),
        "traceui_command": traceui_command(run),
        "resumed": run.resumed,
        "already_complete": run.already_complete,
        "rounds": len(run.state.rounds),
        "winner": None if winner is None else winner.scope_id,
        "project_changes": list(run.project_changes),
        "attempts": [_attempt_json(a) for a in run.state.attempts],
        "records": run.stats.records,
        "schemas": dict(sorted(run.stats.schemas.items())),
    }


def _attempt_json(attempt: AttemptView) -> dict[str, object]:
    label, details = attempt_outcome(attempt)
    return {
        "scope": attempt.scope_id,
        "agent": attempt.agent,
        "round": attempt.round,
        "state": attempt.state.value,
        "outcome": label.lower(),
        "reason": "; ".join(details),
        "tests_passed": attempt.tests_passed,
        "denials": list(attempt.denials),
        "checkpoints_restored": attempt.restores,
    }
