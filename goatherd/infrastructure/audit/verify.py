"""Verify a stored trace from its raw rows: ``goatherd verify``.

Every byte a reader shows or trusts is recomputed or cross-checked from what
is stored, without trusting any index (docs/reliability.md lists each table
and column and the check that covers it):

* **well-formed**: every cell has its column's type, text is UTF-8, JSON
  columns parse and are in the canonical storage form;
* **identity**: every record id and witness id from its content, the witness
  chains, the kind label of every witness entry;
* **schemas**: every record of a schema the default schema libraries know
  decodes to its typed event (the runtime would refuse one that does not);
* **causality**: the ordered parents (``caused_by_json`` against the edge
  rows), every parent stored, and no record before its parents in the log;
* **ordinals** and **log**: gap-free per-path ordinals that follow the log
  order, the owner ordinal table, gap-free global positions with their commit
  receipts (a gap only where a hole step records positions a dead PostgreSQL
  writer abandoned, and no hole over an entry: ADR 0076), the next commit
  sequence;
* **placement**: every record on a path, each record and witness credited to
  the intent that first placed it;
* **intents**: each receipt recomputed from its entries, batch digests and
  commit times well-formed;
* **contexts**: each id recomputed from its content and intent, each placement
  matching the witness of its record;
* **frontiers**, **materializations** and **blobs**: the frontier index
  against its records, the ledger's receipts, and each checkpoint blob against
  the ``checkpoint.created`` record that vouches for it;
* **side writes**: each materialization ledger row and legacy checkpoint row
  against the last side step of the chain that wrote its key (ADR 0064): a
  row that digests otherwise, a row no step wrote, a row a step deleted, a
  row a step wrote that is gone;
* **blob store**: every stored byte string against its address, every holder
  against the record that names its blob, every address a live record names
  present;
* **chain**: every commit digest and head link recomputed from the rows and
  compared with the stored chain (``SqlAlchemyTraceStore.verify_chain``, ADR
  0038): an edit of anything a commit or a side step wrote, a removed
  commit, a head that does not match the rows, or a digest or link cleared
  after the first stored one (a commit stores its digest, and on SQLite its
  link, when it commits);
* **objects**: every trigger, rule and view in the trace's database, and
  every index on a goatherd table that goatherd does not create
  (``objects.py``).

The checks only read. Problems come in a deterministic order: well-formedness
first, then each check in the order above.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from goatherd.domain.errors import GoatherdError
from goatherd.infrastructure.audit.checks import Verifier
from goatherd.infrastructure.audit.objects import check_objects
from goatherd.infrastructure.audit.rows import load_rows
from goatherd.infrastructure.store.chain import TraceHead, parse_head
from goatherd.infrastructure.store.store import SqlAlchemyTraceStore

__all__ = ["IntegrityProblem", "IntegrityReport", "verify_trace"]

Progress = Callable[[str, int, int], None]
"""``progress(phase, done, total)``, called as the checks advance."""


@dataclass(frozen=True, slots=True)
class IntegrityProblem:
    """One broken promise: which check, which record (if any), what is wrong."""

    check: str
    detail: str
    record_id: str | None = None

    def __str__(self) -> str:
        where = f"record {self.record_id}: " if self.record_id else ""
        return f"{self.check}: {where}{self.detail}"


@dataclass(frozen=True, slots=True)
class IntegrityReport:
    """What ``verify_trace`` checked and found.

    Attributes:
        problems: what is wrong, at most ``max_problems`` of them.
        problem_count: how many problems were found in all.
        head: the trace's head recomputed from its rows
            (``<commits>:sha256:<hex>``), ``None`` if it could not be.
        expected_head: ``None`` when no head was expected; else whether
            the trace still extends the head noted earlier.
    """

    records: int
    path_entries: int
    log_positions: int
    frontiers: int
    intents: int
    contexts: int = 0
    checkpoint_blobs: int = 0
    materializations: int = 0
    content_blobs: int = 0
    problems: tuple[IntegrityProblem, ...] = field(default=())
    problem_count: int = 0
    head: str | None = None
    expected_head: bool | None = None

    @property
    def ok(self) -> bool:
        """Whether every check passed."""
        return not self.problems


class _Problems:
    def __init__(self, limit: int | None) -> None:
        self.items: list[IntegrityProblem] = []
        self.limit = limit
        self.count = 0

    def add(self, check: str, detail: str, record_id: str | None = None) -> None:
        self.count += 1
        if self.limit is None or len(self.items) < self.limit:
            self.items.append(IntegrityProblem(check, detail, record_id))


@dataclass(frozen=True, slots=True)
class _ChainOutcome:
    head: str | None = None
    expected: bool | None = None


def _check_chain(
    store: SqlAlchemyTraceStore, problems: _Problems, expect: TraceHead | None
) -> _ChainOutcome:
    try:
        chain = store.verify_chain(expect)
    except GoatherdError as exc:
        problems.add("chain", f"the chain cannot be recomputed: {exc}")
        return _ChainOutcome(expected=False if expect is not None else None)
    except Exception as exc:  # named, like the Verifier's checks
        problems.add(
            "chain",
            f"the check stopped on {type(exc).__name__}: {exc} (a bug in "
            "verify: the trace is not vouched for)",
        )
        return _ChainOutcome(expected=False if expect is not None else None)
    for problem in chain.problems:
        problems.add("chain", str(problem))
    if expect is not None and not chain.expected:
        problems.add(
            "chain",
            f"the trace does not extend the head noted earlier ({expect}): a "
            "commit it covered was rewritten or removed since (the trace now "
            f"has {chain.head})",
        )
    return _ChainOutcome(str(chain.head), chain.expected)


def verify_trace(
    store: SqlAlchemyTraceStore,
    *,
    progress: Progress | None = None,
    max_problems: int | None = 100,
    expect_head: str | TraceHead | None = None,
) -> IntegrityReport:
    """Recompute and cross-check everything stored in ``store``; never writes.

    Args:
        store: the trace.
        progress: called as the phases advance.
        max_problems: how many problems to keep (``None``: every one); all are
            counted in ``problem_count``.
        expect_head: a head noted earlier, outside the trace (a
            :class:`TraceHead` or its printed form ``<commits>:sha256:<hex>``;
            without the count it matches at any length). The report then
            fails unless the trace still extends it: the one check that
            catches a rewrite consistent with every row, or a truncation
            that also relinked the chain.

    Returns:
        The report; ``report.problems[0]`` names the first bad row.

    Raises:
        ValueError: ``expect_head`` is not a head (one line naming why).
    """
    expect = parse_head(expect_head) if isinstance(expect_head, str) else expect_head
    problems = _Problems(max_problems)
    tick = progress or (lambda phase, done, total: None)
    with store.engine.connect() as conn:
        rows = load_rows(conn, problems.add)
        conn.rollback()
    tick("rows", 1, 1)
    Verifier(rows, problems.add, tick).run()
    chain = _check_chain(store, problems, expect)
    with store.engine.connect() as conn:
        check_objects(conn, problems.add)
        conn.rollback()
    tick("objects", 1, 1)
    return IntegrityReport(
        records=len(rows.records),
        path_entries=len(rows.entries),
        log_positions=sum(1 for e in rows.entries if e.position is not None),
        frontiers=len(rows.frontiers),
        intents=len(rows.intents),
        contexts=len(rows.contexts),
        checkpoint_blobs=len(rows.blobs),
        materializations=len(rows.ledger),
        content_blobs=len(rows.contents),
        problems=tuple(problems.items),
        problem_count=problems.count,
        head=chain.head,
        expected_head=chain.expected,
    )
