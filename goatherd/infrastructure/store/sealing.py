"""Link, read and verify the commit chain on the database (``chain.py`` defines it).

:func:`seal` (inside a write transaction) numbers any intent that has no
commit number yet (an imported or pre-chain trace: in the order of its first
log position, then commit time), computes the commit digests that are
missing from the rows, and links every commit that has no head digest yet,
continuing from the last stored link. On PostgreSQL only commits below the
safe high-water mark are linked (a slower writer may still commit a smaller
number). :func:`verify_chain` recomputes every digest and link from the rows
alone (never trusting a stored digest) and compares: this is what makes a
noted head worth noting.

The chain has two kinds of step (ADR 0064): append commits
(``append_intents``) and side steps (``side_writes``, one per write to a side
table). Both are walked in ``commit_seq`` order. :func:`write_side_step`
records a side step in the caller's write transaction. A trace written before
schema v3 (``side=False``: no ``side_writes`` table, read as it is) is read
as its upgrade will chain it: one step per side row after the last commit.
"""

from __future__ import annotations

import itertools
from collections.abc import Generator, Iterator, Sequence
from typing import Any, Final

from goatherd.domain.errors import TraceStoreError
from goatherd.infrastructure.store import postgres as pg
from goatherd.infrastructure.store.chain import (
    GENESIS,
    HOLE_TABLE,
    ChainProblem,
    ChainReport,
    CommitContent,
    SideContent,
    TraceHead,
    commit_digest,
    contents_from_rows,
    hole_key,
    link,
    meta_value,
    parse_hole_key,
    parse_meta,
    side_digest,
    step_digest,
)
from goatherd.infrastructure.store.driver import Driver
from goatherd.infrastructure.store.schema import META_HEAD
from goatherd.infrastructure.store.side import unchained_steps

__all__ = [
    "chain_unchained_side_rows",
    "linked_head",
    "read_head",
    "seal",
    "verify_chain",
    "write_side_step",
]

_BATCH: Final = 2000


def read_head(sql: Driver) -> tuple[int, str | None]:
    """Return ``meta.head`` as ``(commits, digest or None)``."""
    rows = sql.rows(_META_HEAD_SQL, (META_HEAD,))
    return parse_meta(rows[0][0] if rows else None)


def seal(sql: Driver) -> TraceHead:
    """Link every linkable commit; return the stored head (write transaction).

    On PostgreSQL, sealers serialize on an advisory transaction lock, and the
    linking stops at the first commit a writer might still be finishing.
    """
    if sql.postgres:
        sql.rows(_SEAL_LOCK_SQL)
    _number_unsequenced(sql)
    _digest_missing(sql)
    commits, head = read_head(sql)
    if head is None:
        commits, previous, after = 0, GENESIS, -1
    else:
        previous, after = head, commits - 1
    links: list[tuple[str, str]] = []
    side_links: list[tuple[str, int]] = []
    safe_position, safe = _safe_marks(sql)
    steps: list[Sequence[Any]] = [
        row for row in sql.rows(_UNLINKED_SQL, (after, after)) if int(row[0]) <= safe
    ]  # above safe, a writer below may still be finishing (PostgreSQL)
    if sql.postgres:
        steps = _record_holes(sql, steps, after, safe, safe_position)
    for seq, intent_id, digest, table in steps:
        if int(seq) != commits:  # a gap no hole step records: verify names it
            break
        previous = link(previous, digest)
        if table is None:
            links.append((previous, intent_id))
        else:
            side_links.append((previous, int(seq)))
        commits = int(seq) + 1
    if links:
        sql.run_many(_SET_HEAD_SQL, links)
    if side_links:
        sql.run_many(_SET_SIDE_HEAD_SQL, side_links)
    if links or side_links or head is None:
        sql.run_many(_UPSERT_META_SQL, [(META_HEAD, meta_value(commits, previous))])
    return TraceHead(commits, previous)


def _record_holes(
    sql: Driver,
    steps: list[Sequence[Any]],
    after: int,
    safe: int,
    safe_position: int,
) -> list[Sequence[Any]]:
    """Record a hole step at each number in ``(after, safe]`` no step holds.

    Only numbers below the last step there: a number nothing has committed
    after yet stays as it is (its positions may still be recorded later).

    Every allocation at or below the safe marks has ended (ADR 0036), so a
    number no committed row holds there was drawn by a transaction that died
    before its ``COMMIT`` and can never be used (ADR 0076). Allocations draw
    positions and commit numbers in one order, so the positions such a
    writer abandoned are the gap between the positions of the steps around
    it; the first hole step of a run of holes records that gap (the others
    record none). A gap that no hole step can own (rows removed from the
    log) is left for ``verify`` to name.

    Returns:
        ``steps`` with the new hole steps in commit order.
    """
    held = {int(row[0]) for row in steps}
    # Only numbers some committed step follows: a death with nothing after it
    # changes nothing the trace shows (not even its head) until one commits.
    missing = [
        seq for seq in range(after + 1, max(held, default=-1)) if seq not in held
    ]
    if not missing:
        return steps
    safe = max(held)
    spans = {
        int(seq): (low, high)
        for seq, low, high in sql.rows(_SPANS_SQL, (after, safe))
        if low is not None
    }
    if spans:
        ((below,),) = sql.rows(_BELOW_SQL, (min(low for low, _ in spans.values()),))
    else:  # positions below the safe mark may be a later commit's (ADR 0076)
        ((below,),) = sql.rows(_LINKED_TOP_SQL, (after,))
    previous = max(int(below), _last_recorded_position(sql))
    top = max((high for _, high in spans.values()), default=previous)
    ((above,),) = sql.rows(_ABOVE_SQL, (max(top, previous),))
    ceiling = min(safe_position, (pg.INT64_MAX if above is None else int(above)) - 1)
    keys: dict[int, tuple[int, int] | None] = dict.fromkeys(missing)
    pending: list[int] = []
    holes = set(missing)
    for seq in range(after + 1, safe + 1):
        if seq in holes:
            pending.append(seq)
            continue
        span = spans.get(seq)
        if span is None:
            continue
        if pending and span[0] > previous + 1:
            keys[pending[0]] = (previous + 1, span[0] - 1)
        pending, previous = [], max(previous, span[1])
    if pending and ceiling > previous:
        keys[pending[0]] = (previous + 1, ceiling)
    rows = []
    for seq in missing:
        content = SideContent(seq, HOLE_TABLE, hole_key(keys[seq]), None)
        rows.append(
            (seq, HOLE_TABLE, content.row_key, None, side_digest(content), None)
        )
    sql.run_many(_INSERT_SIDE_SQL, rows)
    added = [(row[0], None, row[4], HOLE_TABLE) for row in rows]
    return sorted([*steps, *added], key=lambda row: int(row[0]))


def _last_recorded_position(sql: Driver) -> int:
    """The last position a hole step records, ``-1`` for none."""
    for (key,) in sql.rows(_LAST_HOLE_SQL, (HOLE_TABLE,)):
        span = parse_hole_key(str(key))
        if span is not None:
            return span[1]
    return -1


def write_side_step(sql: Driver, table: str, key: str, row_digest: str | None) -> int:
    """Chain one write to a side table; return its commit number (ADR 0064).

    Runs in the caller's write transaction, after the side write itself (so
    that nothing after it can fail on a broken rule). SQLite: the next number
    and the link follow ``meta.head``, as an append's do. PostgreSQL: the
    number comes from the append commits' allocator (and holds readers and
    sealers below it until this transaction ends); :func:`seal` links it.
    """
    if sql.postgres:
        ((numbers,),) = sql.rows(pg.ALLOCATE_SQL, (0, 1))
        seq = int(numbers[2])
        pg.reached("side-allocated")
        digest = side_digest(SideContent(seq, table, key, row_digest))
        sql.run(_INSERT_SIDE_SQL, (seq, table, key, row_digest, digest, None))
        return seq
    commits, head = read_head(sql)
    if head is None:
        sealed = seal(sql)
        commits, head = sealed.commits, sealed.digest
    digest = side_digest(SideContent(commits, table, key, row_digest))
    after = link(head, digest)
    sql.run(_INSERT_SIDE_SQL, (commits, table, key, row_digest, digest, after))
    sql.run(_UPSERT_META_SQL, (META_HEAD, meta_value(commits + 1, after)))
    return commits


def chain_unchained_side_rows(sql: Driver) -> int:
    """Add one step per side row after the last commit (the upgrade to v3, once).

    The steps are left unlinked (:func:`seal` links them); on PostgreSQL the
    commit sequence restarts after them. Returns how many were added.

    Raises:
        TraceStoreError: a side row too malformed to digest.
    """
    ((highest,),) = sql.rows(_HIGHEST_SEQ_SQL)
    steps = unchained_steps(sql, int(highest) + 1)
    rows = []
    for step in steps:
        if isinstance(step, ChainProblem):
            raise TraceStoreError(f"cannot chain the side tables: {step}")
        rows.append(
            (
                step.commit_seq,
                step.table_name,
                step.row_key,
                step.row_digest,
                side_digest(step),
                None,
            )
        )
    sql.run_many(_INSERT_SIDE_SQL, rows)
    if sql.postgres:
        sql.run(pg.sequence_restart(pg.COMMITS_SEQUENCE, int(highest) + 1 + len(rows)))
    return len(rows)


def linked_head(sql: Driver, *, side: bool = True) -> TraceHead | None:
    """Return the head with any unlinked tail linked in memory (read-only).

    ``None``: a commit has no number or digest yet (a trace never sealed):
    only a full recomputation (:func:`verify_chain`) gives its head.
    ``side=False``: a trace before schema v3, whose side rows are linked
    after its last commit, as its upgrade will.
    """
    commits, head = read_head(sql)
    if head is None:
        return None
    previous, safe = head, _safe_commit(sql)
    query, params = (
        (_UNLINKED_SQL, (commits - 1, commits - 1))
        if side
        else (_UNLINKED_V2_SQL, (commits - 1,))
    )
    complete = True
    for seq, _, digest, _ in sql.rows(query, params):
        if seq > safe or int(seq) != commits:  # unfinished, or a hole not recorded
            complete = False
            break
        if digest is None:
            return None
        previous = link(previous, digest)
        commits = int(seq) + 1
    if not side:
        if not complete:
            return None
        for step in unchained_steps(sql, commits):
            if isinstance(step, ChainProblem):
                return None
            previous = link(previous, side_digest(step))
            commits = step.commit_seq + 1
    # Rows an import wrote are numbered when sealed (indexed on PostgreSQL;
    # on SQLite an import seals in its own transaction).
    if sql.postgres and sql.rows(_UNSEQUENCED_ONE_SQL):
        return None
    return TraceHead(commits, previous)


def _number_unsequenced(sql: Driver) -> None:
    rows = sql.rows(_UNSEQUENCED_SQL)
    if not rows:
        return
    ((highest,),) = sql.rows(_HIGHEST_SEQ_SQL)
    first = int(highest) + 1
    sql.run_many(_SET_SEQ_SQL, [(first + n, row[0]) for n, row in enumerate(rows)])
    if sql.postgres:
        sql.run(pg.sequence_restart(pg.COMMITS_SEQUENCE, first + len(rows)))


def _digest_missing(sql: Driver) -> None:
    missing = sql.rows(_MISSING_DIGEST_SQL)
    if not missing:
        return
    wanted = {int(row[0]) for row in missing}
    updates: list[tuple[str, str]] = []
    for intent, content in _contents(sql, min(wanted)):
        if int(intent[0]) not in wanted or isinstance(content, SideContent):
            continue
        if isinstance(content, ChainProblem):
            raise TraceStoreError(f"cannot link the commit chain: {content}")
        updates.append((commit_digest(content), intent[1]))
    sql.run_many(_SET_DIGEST_SQL, updates)


def verify_chain(
    sql: Driver,
    expect: TraceHead | None = None,
    *,
    legacy: bool = False,
    side: bool = True,
) -> ChainReport:
    """Recompute every commit digest and link from the rows; compare with the stored.

    Read-only. Each commit's stored digest is compared with the one its rows
    give, and each stored link with the link from the stored link before it,
    so one edit is named once, at the commit it touched; ``meta.head`` must
    be the last stored link. ``expect``: a head noted earlier; the report
    says whether this trace still has it after the same number of commits
    (nothing it covered was rewritten or truncated). A head noted without its
    count matches at any length. ``legacy``: a schema v1 trace, numbered as
    its upgrade will. ``side=False``: a trace before schema v3 (no
    ``side_writes`` table), its side rows chained after its last commit in
    memory, as its upgrade will.
    """
    side = side and not legacy
    walk = _Walk(expect, strict=side, postgres=sql.postgres)
    safe = pg.INT64_MAX if legacy else _safe_commit(sql)
    complete = True
    for intent, content in _contents(sql, 0, legacy, side):
        if int(intent[0]) > safe:
            complete = False
            break
        walk.step(intent, content)
    if not side and complete:
        for step in unchained_steps(sql, walk.seen + 1):
            key, table = (
                (step.row_key, step.table_name)
                if isinstance(step, SideContent)
                else (None, None)
            )
            seq = step.commit_seq
            walk.step((seq, key, None, None, None, None, None, table), step)
    head = TraceHead(walk.commits, walk.previous)
    stored = None if legacy else walk.check_meta(sql)
    return ChainReport(head, stored, tuple(walk.problems), walk.expected, walk.unsealed)


class _Walk:
    """The chain recomputed from the rows, and the stored chain beside it."""

    def __init__(
        self, expect: TraceHead | None, *, strict: bool = False, postgres: bool = False
    ) -> None:
        # strict: a schema v3 trace, whose every commit and side step stores
        # its digest when it commits, and (SQLite) its link too: a missing
        # one after the first stored is a cleared cell, not a commit waiting
        # for its seal. On PostgreSQL :func:`seal` links later, so only a
        # missing digest is a finding there.
        self.strict, self.postgres = strict, postgres
        self.digested = False
        self.problems: list[ChainProblem] = []
        self.previous, self.commits, self.seen = GENESIS, 0, -1
        self.chained, self.linked, self.unsealed = GENESIS, 0, 0
        self.expect = expect
        self.expected = None if expect is None else _matches(expect, 0, GENESIS)
        self.who: tuple[str | None, str | None] = (None, None)

    def step(
        self,
        intent: Sequence[Any],
        content: CommitContent | SideContent | ChainProblem,
    ) -> None:
        seq = int(intent[0])
        self.who = (
            (None, f"{intent[7]} {intent[1]!r}")
            if len(intent) > 7 and intent[7] is not None
            else (intent[1], None)
        )
        intent_id = self.who[0]
        stored_digest, stored_head = intent[4], intent[5]
        if seq != self.seen + 1:
            self.report(
                seq,
                intent_id,
                f"commit {self.seen + 1} is missing"
                + (
                    " (no hole step records it: a PostgreSQL writer that died "
                    "before its COMMIT leaves such a gap until a writer seals)"
                    if self.postgres and self.seen + 1 >= self.linked
                    else ""
                ),
            )
        self.seen = seq
        digest: str | None = None
        self._check_stored(seq, intent_id, stored_digest, stored_head)
        if isinstance(content, ChainProblem):
            self.problems.append(content)
        else:
            digest = step_digest(content)
            self.previous = link(self.previous, digest)
            self.commits = seq + 1
            if stored_digest is not None and stored_digest != digest:
                self.report(
                    seq,
                    intent_id,
                    "what the commit wrote changed since it committed "
                    "(its commit digest differs)",
                )
        if stored_head is None:
            self.unsealed += 1
        else:
            self._follow(seq, intent_id, stored_digest or digest, stored_head)
        if self.expect is not None and not self.expected:
            self.expected = _matches(self.expect, self.commits, self.previous)

    def _check_stored(
        self,
        seq: int,
        intent_id: str | None,
        stored_digest: str | None,
        stored_head: str | None,
    ) -> None:
        if not self.strict:
            return
        if stored_digest is None and self.digested:
            self.report(
                seq,
                intent_id,
                "its commit digest is missing, though every commit after the "
                "first digested one stores its digest when it commits (the cell "
                "was cleared)",
            )
        self.digested = self.digested or stored_digest is not None
        if stored_head is None and self.linked and not self.postgres:
            self.report(
                seq,
                intent_id,
                "its head digest is missing, though on SQLite every commit after "
                "the first linked one is linked when it commits (the cell was "
                "cleared)",
            )

    def _follow(
        self, seq: int, intent_id: str | None, digest: str | None, stored_head: str
    ) -> None:
        if self.unsealed:
            self.report(seq, intent_id, "linked after a commit that is not linked")
        elif digest is not None and stored_head != link(self.chained, digest):
            self.report(
                seq,
                intent_id,
                "its head digest does not follow from the commit before "
                "(the chain was rewritten or a commit removed)",
            )
        self.chained, self.linked = stored_head, seq + 1

    def report(self, seq: int | None, intent_id: str | None, detail: str) -> None:
        side = self.who[1] if seq is not None else None
        self.problems.append(ChainProblem(seq, intent_id, detail, side))

    def check_meta(self, sql: Driver) -> TraceHead | None:
        """Compare ``meta.head`` with the last stored link; return it."""
        rows = sql.rows(_META_HEAD_SQL, (META_HEAD,))
        value = rows[0][0] if rows else None
        try:
            commits, digest = parse_meta(value)
        except ValueError:
            self.report(None, None, f"meta head {value!r} is not <commits> <digest>")
            return None
        last = TraceHead(self.linked, self.chained)
        if digest is None:
            if self.linked:
                self.report(
                    None, None, f"meta has no head, the rows are linked to {last}"
                )
            return None
        stored = TraceHead(commits, digest)
        if stored != last:
            self.report(
                None, None, f"meta head is {stored}, the stored links end at {last}"
            )
        return stored


def _matches(expect: TraceHead, commits: int, digest: str) -> bool:
    return digest == expect.digest and expect.commits in (commits, -1)


def _contents(
    sql: Driver, from_seq: int, legacy: bool = False, side: bool = True
) -> Iterator[tuple[Sequence[Any], CommitContent | SideContent | ChainProblem]]:
    streams = [
        _stream(sql, query, (from_seq,) * query.count("?"))
        for query in _streams_sql(sql.postgres, legacy, side)
    ]
    try:
        yield from contents_from_rows(*streams)
    finally:
        for stream in streams:
            stream.close()


def _stream(sql: Driver, query: str, params: Sequence[object]) -> Generator[Any]:
    raw = sql.raw
    if sql.postgres:
        cursor = raw.cursor(name=f"goatherd_chain_{next(_NAMES)}")
        cursor.itersize = _BATCH
        cursor.execute(query.replace("?", "%s"), tuple(params))
    else:
        cursor = raw.cursor()
        cursor.execute(query, tuple(params))
    try:
        while rows := cursor.fetchmany(_BATCH):
            yield from rows
    finally:
        cursor.close()


_NAMES = itertools.count()

_META_HEAD_SQL = "SELECT value FROM meta WHERE key = ?"
_SEAL_LOCK_SQL = f"SELECT pg_advisory_xact_lock(1617391937 # {pg.TRACE_SALT})"
_UPSERT_META_SQL = (
    "INSERT INTO meta (key, value) VALUES (?, ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
_UNSEQUENCED_SQL = (
    "SELECT i.append_intent_id FROM append_intents i LEFT JOIN path_entries e "
    "ON e.append_intent_id = i.append_intent_id WHERE i.commit_seq IS NULL "
    "GROUP BY i.append_intent_id, i.committed_at "
    "ORDER BY MIN(e.position) IS NULL, MIN(e.position), i.committed_at, "
    "i.append_intent_id"
)
_SET_SEQ_SQL = "UPDATE append_intents SET commit_seq = ? WHERE append_intent_id = ?"
_MISSING_DIGEST_SQL = (
    "SELECT commit_seq FROM append_intents WHERE commit_digest IS NULL "
    "AND commit_seq IS NOT NULL"
)
_SET_DIGEST_SQL = (
    "UPDATE append_intents SET commit_digest = ? WHERE append_intent_id = ?"
)
_SET_HEAD_SQL = "UPDATE append_intents SET head_digest = ? WHERE append_intent_id = ?"
_SET_SIDE_HEAD_SQL = "UPDATE side_writes SET head_digest = ? WHERE commit_seq = ?"
_INSERT_SIDE_SQL = (
    "INSERT INTO side_writes (commit_seq, table_name, row_key, row_digest, "
    "commit_digest, head_digest) VALUES (?, ?, ?, ?, ?, ?)"
)


def _safe_commit(sql: Driver) -> int:
    """The highest commit number every writer below has finished (ADR 0036)."""
    return _safe_marks(sql)[1]


def _safe_marks(sql: Driver) -> tuple[int, int]:
    """The safe position and commit number (ADR 0036); unbounded on SQLite."""
    if not sql.postgres:
        return pg.INT64_MAX, pg.INT64_MAX
    ((safe,),) = sql.rows(pg.SAFE_SQL)
    return int(safe[0]), int(safe[1])


# Positions of the append commits in a range of commit numbers.
_SPANS_SQL = (
    "SELECT i.commit_seq, MIN(e.position), MAX(e.position) FROM append_intents i "
    "JOIN path_entries e ON e.append_intent_id = i.append_intent_id "
    "WHERE i.commit_seq > ? AND i.commit_seq <= ? AND e.position IS NOT NULL "
    "GROUP BY i.commit_seq"
)
_BELOW_SQL = "SELECT COALESCE(MAX(position), -1) FROM path_entries WHERE position < ?"
_LINKED_TOP_SQL = (
    "SELECT COALESCE(MAX(e.position), -1) FROM path_entries e JOIN append_intents i "
    "ON i.append_intent_id = e.append_intent_id WHERE i.commit_seq <= ?"
)
_ABOVE_SQL = "SELECT MIN(position) FROM path_entries WHERE position > ?"
_LAST_HOLE_SQL = (
    "SELECT row_key FROM side_writes WHERE table_name = ? AND row_key <> '-' "
    "ORDER BY commit_seq DESC LIMIT 1"
)


_UNLINKED_V2_SQL = (
    "SELECT commit_seq, append_intent_id, commit_digest, NULL FROM append_intents "
    "WHERE commit_seq > ? AND head_digest IS NULL ORDER BY commit_seq"
)
_UNLINKED_SQL = (
    "SELECT commit_seq, append_intent_id, commit_digest, NULL AS side "
    "FROM append_intents WHERE commit_seq > ? AND head_digest IS NULL "
    "UNION ALL SELECT commit_seq, NULL, commit_digest, table_name FROM side_writes "
    "WHERE commit_seq > ? AND head_digest IS NULL ORDER BY 1"
)
_UNSEQUENCED_ONE_SQL = "SELECT 1 FROM append_intents WHERE commit_seq IS NULL LIMIT 1"
_HIGHEST_SEQ_SQL = (
    "SELECT COALESCE(MAX(s), -1) FROM (SELECT MAX(commit_seq) AS s "
    "FROM append_intents UNION ALL SELECT MAX(commit_seq) FROM side_writes) m"
)


# Every stream numbers the intents through one CTE: the stored commit_seq,
# or, for a schema v1 trace read as it is, the order the upgrade will give.
_NUMBERED_V2 = "SELECT append_intent_id, commit_seq FROM append_intents"
_NUMBERED_V1_SQLITE = (
    "SELECT append_intent_id, row_number() OVER (ORDER BY rowid) - 1 AS commit_seq "
    "FROM append_intents"
)
_NUMBERED_V1_PG = (
    "SELECT i.append_intent_id, row_number() OVER (ORDER BY min(e.position) "
    "NULLS LAST, i.committed_at, i.append_intent_id) - 1 AS commit_seq "
    "FROM append_intents i LEFT JOIN path_entries e "
    "ON e.append_intent_id = i.append_intent_id GROUP BY i.append_intent_id"
)
_INTENTS_SQL = (
    "WITH n AS ({numbered}) "
    "SELECT n.commit_seq, i.append_intent_id, i.batch_digest, i.receipt_json, "
    "{chain}, i.committed_at FROM append_intents i JOIN n "
    "ON n.append_intent_id = i.append_intent_id "
    "WHERE n.commit_seq >= ? ORDER BY n.commit_seq"
)
_CONTEXTS_SQL = (
    "WITH n AS ({numbered}) "
    "SELECT n.commit_seq, c.context_id, c.active_binding_refs_json, "
    "c.capability_witness_refs_json, c.semantic_environment_refs_json, "
    "c.visibility_policy_refs_json, c.substrate_ref, c.containment "
    "FROM contexts c JOIN n ON n.append_intent_id = c.append_intent_id "
    "WHERE n.commit_seq >= ? ORDER BY n.commit_seq"
)
_ENTRIES_SQL = (
    "WITH n AS ({numbered}) "
    "SELECT n.commit_seq, e.path_ref, e.path_ordinal, e.record_id, "
    "e.retained_context_ref, e.kind_label, e.commit_receipt, e.position, "
    "r.record_id, r.digest, r.schema_ref, r.mode, r.witness_ref, r.caused_by_json "
    "FROM path_entries e JOIN n ON n.append_intent_id = e.append_intent_id "
    "LEFT JOIN records r ON r.record_id = e.record_id "
    "WHERE n.commit_seq >= ? ORDER BY n.commit_seq"
)
_FRONTIERS_SQL = (
    "WITH n AS ({numbered}) "
    "SELECT n.commit_seq, f.frontier_id, f.target_trace_owner_id, f.through_fact_id, "
    "f.through_owner_ordinal, f.publisher_trace_owner_id, f.created_by_fact_id "
    "FROM frontiers f JOIN n ON n.append_intent_id = f.append_intent_id "
    "WHERE n.commit_seq >= ? ORDER BY n.commit_seq"
)


_STEPS_SQL = (
    "SELECT commit_seq, append_intent_id, batch_digest, receipt_json, "
    "commit_digest, head_digest, committed_at, NULL AS side FROM append_intents "
    "WHERE commit_seq >= ? UNION ALL "
    "SELECT commit_seq, row_key, row_digest, NULL, commit_digest, head_digest, "
    "NULL, table_name FROM side_writes WHERE commit_seq >= ? ORDER BY 1"
)


def _streams_sql(postgres: bool, legacy: bool, side: bool) -> tuple[str, ...]:
    if not legacy:
        numbered, chain = _NUMBERED_V2, "i.commit_digest, i.head_digest"
    else:
        numbered = _NUMBERED_V1_PG if postgres else _NUMBERED_V1_SQLITE
        chain = "NULL, NULL"
    intents = _STEPS_SQL if side else _INTENTS_SQL
    return tuple(
        query.replace("{numbered}", numbered).replace("{chain}", chain)
        for query in (intents, _CONTEXTS_SQL, _ENTRIES_SQL, _FRONTIERS_SQL)
    )
