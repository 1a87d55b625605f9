"""PostgreSQL specifics of schema v2: position allocation and the safe high-water mark.

Writers on PostgreSQL hold no global lock through their commit (ADR 0036).
Each append transaction locks only what it touches (advisory transaction locks
on its owners and its intent), plans, and then calls ``goatherd_allocate``
once. Under a session-level advisory lock held for that one statement, the
function draws the transaction's log positions and commit numbers from two
sequences and takes a shared advisory transaction lock named by its first
position (and its first commit number), which it holds until it ends. The
owner, intent, seal and adapter locks are keyed per trace (``TRACE_SALT``).

A reader first calls ``goatherd_safe``: under the allocation lock (shared),
the smallest position still held in ``pg_locks`` minus one, else the highest
position ever drawn. Only this trace's allocations count: each allocating
transaction also holds a shared lock naming the trace (the OID of its
positions sequence), so traces in other schemas of the same database never
hold a reader back. Every position at or below it has ended: committed (so
visible to the reader's next statement) or rolled back for good. A follower
reading up to it never passes a position that commits later. A transaction
that dies after allocating leaves its positions and commit numbers unused
(ADR 0036); the next seal records them below the safe mark as hole steps of
the chain, so ``verify``, ``export`` and ``import`` accept those gaps and no
other (ADR 0076).

:data:`FAULT_POINTS` names the places between drawing the numbers and
``COMMIT`` where a writer can die; :func:`reached` calls :data:`fault_hook`
there (``None`` outside the fault tests), so a test can kill the process or
terminate its backend at exactly each of them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Final

__all__ = [
    "ALLOCATE_SQL",
    "COMMITS_SEQUENCE",
    "DDL",
    "FAULT_POINTS",
    "INDEXES",
    "INT64_MAX",
    "POSITIONS_SEQUENCE",
    "SAFE_SQL",
    "TRACE_SALT",
    "fault_hook",
    "lock_key",
    "reached",
    "sequence_restart",
]

ALLOCATE_LOCK_KEY: Final = 0x60A7_A110
INT64_MAX: Final = 2**63 - 1
POSITIONS_SEQUENCE: Final = "goatherd_positions"
COMMITS_SEQUENCE: Final = "goatherd_commits"

# Returns ARRAY[txid, first position, first commit number]; -1 for none.
_ALLOCATE_FUNCTION: Final = (
    """
CREATE OR REPLACE FUNCTION goatherd_allocate(positions integer, commits integer)
RETURNS bigint[] LANGUAGE plpgsql AS $fn$
DECLARE
    xid bigint;
    floor bigint;
    first_position bigint := -1;
    first_commit bigint := -1;
BEGIN
    PERFORM pg_advisory_lock({ALLOCATE_LOCK_KEY});
    BEGIN
        xid := pg_current_xact_id()::text::bigint;
        -- Names this trace (its positions sequence, unique in the database)
        -- beside the allocation locks below, so that readers of another
        -- trace in the same database (another schema) ignore them.
        IF positions > 0 OR commits > 0 THEN
            PERFORM pg_advisory_xact_lock_shared(-1,
                ('{POSITIONS_SEQUENCE}'::regclass::oid::bigint)::bit(32)::integer);
        END IF;
        -- Never below what is committed: rows an import wrote took numbers
        -- without the sequences (two index lookups).
        -- Commit numbers first: a backend terminated inside this function
        -- between the two draws abandons a commit number (which a hole step
        -- can record with the positions after it), never positions alone
        -- (ADR 0076).
        IF commits > 0 THEN
            first_commit := nextval('{COMMITS_SEQUENCE}');
            SELECT COALESCE(max(commit_seq) + 1, 0) INTO floor FROM append_intents;
            first_commit := GREATEST(first_commit, floor);
            PERFORM setval('{COMMITS_SEQUENCE}', first_commit + commits - 1);
            PERFORM pg_advisory_xact_lock_shared(
                ((first_commit >> 32) | 1073741824)::integer,
                (first_commit & 4294967295)::bit(32)::integer
            );
        END IF;
        IF positions > 0 THEN
            first_position := nextval('{POSITIONS_SEQUENCE}');
            SELECT COALESCE(max(position) + 1, 0) INTO floor FROM path_entries;
            first_position := GREATEST(first_position, floor);
            PERFORM setval('{POSITIONS_SEQUENCE}', first_position + positions - 1);
            -- Held until this transaction ends: readers see it in pg_locks
            -- and stop below it (goatherd_safe).
            -- Shared: only its presence counts, and another trace of the
            -- database drawing the same number must not wait for it.
            PERFORM pg_advisory_xact_lock_shared(
                (first_position >> 32)::integer,
                (first_position & 4294967295)::bit(32)::integer
            );
        END IF;
    EXCEPTION WHEN OTHERS THEN
        PERFORM pg_advisory_unlock({ALLOCATE_LOCK_KEY});
        RAISE;
    END;
    PERFORM pg_advisory_unlock({ALLOCATE_LOCK_KEY});
    RETURN ARRAY[xid, first_position, first_commit];
END
$fn$""".replace("{ALLOCATE_LOCK_KEY}", str(ALLOCATE_LOCK_KEY))
    .replace("{POSITIONS_SEQUENCE}", POSITIONS_SEQUENCE)
    .replace("{COMMITS_SEQUENCE}", COMMITS_SEQUENCE)
)

# Returns ARRAY[safe position, safe commit number]: every allocation at or
# below them has ended (committed, or rolled back for good). Taken between
# allocations (the allocation lock, shared), from the allocations still held
# (pg_locks) and the highest ever drawn (the sequences, or committed rows an
# import wrote: append commits and side steps, ADR 0064).
_SAFE_FUNCTION: Final = (
    """
CREATE OR REPLACE FUNCTION goatherd_safe()
RETURNS bigint[] LANGUAGE plpgsql AS $fn$
DECLARE
    held_position bigint;
    held_commit bigint;
    top_position bigint;
    top_commit bigint;
    here oid := (SELECT oid FROM pg_database WHERE datname = current_database());
    trace oid := '{POSITIONS_SEQUENCE}'::regclass::oid;
BEGIN
    PERFORM pg_advisory_lock_shared({ALLOCATE_LOCK_KEY});
    BEGIN
        SELECT min(CASE WHEN classid < 1073741824 THEN k END),
               min(CASE WHEN classid >= 1073741824
                        THEN k - (1073741824::bigint << 32) END)
          INTO held_position, held_commit
          FROM (SELECT classid, (classid::bigint << 32) | objid::bigint AS k
                  FROM pg_locks
                 WHERE locktype = 'advisory' AND objsubid = 2 AND granted
                   AND classid < 2147483648
                   AND database = here
                   AND virtualtransaction IN (
                       SELECT virtualtransaction FROM pg_locks
                        WHERE locktype = 'advisory' AND objsubid = 2
                          AND classid = 4294967295 AND objid = trace
                          AND granted AND database = here)) held;
        SELECT CASE WHEN is_called THEN last_value ELSE -1 END
          INTO top_position FROM {POSITIONS_SEQUENCE};
        SELECT CASE WHEN is_called THEN last_value ELSE -1 END
          INTO top_commit FROM {COMMITS_SEQUENCE};
    EXCEPTION WHEN OTHERS THEN
        PERFORM pg_advisory_unlock_shared({ALLOCATE_LOCK_KEY});
        RAISE;
    END;
    PERFORM pg_advisory_unlock_shared({ALLOCATE_LOCK_KEY});
    top_position := GREATEST(top_position,
        (SELECT COALESCE(max(position), -1) FROM path_entries));
    top_commit := GREATEST(top_commit,
        (SELECT COALESCE(max(commit_seq), -1) FROM append_intents),
        (SELECT COALESCE(max(commit_seq), -1) FROM side_writes));
    RETURN ARRAY[COALESCE(held_position - 1, top_position),
                 COALESCE(held_commit - 1, top_commit)];
END
$fn$""".replace("{ALLOCATE_LOCK_KEY}", str(ALLOCATE_LOCK_KEY))
    .replace("{POSITIONS_SEQUENCE}", POSITIONS_SEQUENCE)
    .replace("{COMMITS_SEQUENCE}", COMMITS_SEQUENCE)
)

DDL: Final = (
    f"CREATE SEQUENCE IF NOT EXISTS {POSITIONS_SEQUENCE} AS bigint "
    "MINVALUE 0 START WITH 0",
    f"CREATE SEQUENCE IF NOT EXISTS {COMMITS_SEQUENCE} AS bigint "
    "MINVALUE 0 START WITH 0",
    _ALLOCATE_FUNCTION,
    _SAFE_FUNCTION,
)

INDEXES: Final = {
    "idx_append_intents_commit": (
        "CREATE INDEX IF NOT EXISTS idx_append_intents_commit "
        "ON append_intents (commit_seq)"
    ),
    "idx_append_intents_unsealed": (
        "CREATE INDEX IF NOT EXISTS idx_append_intents_unsealed "
        "ON append_intents (commit_seq) WHERE head_digest IS NULL"
    ),
}
"""PostgreSQL's own indexes, by name: plain DDL, not in ``schema.METADATA``.

Declaring them on the tables (a partial index needs ``postgresql_where=``)
would import SQLAlchemy's PostgreSQL dialect into every process that opens a
SQLite trace; ``migration.prepare_postgres`` creates them instead, and
``goatherd verify`` counts them as goatherd's.
"""

TRACE_SALT: Final = f"('{POSITIONS_SEQUENCE}'::regclass::oid::bigint << 31)"
"""SQL for a value naming this trace in its database (its positions sequence).

Advisory locks are per database: a lock key XORed with it is this trace's, so
writers of traces in other schemas of the same database never wait for it.
"""

SAFE_SQL: Final = "SELECT goatherd_safe()"
"""Returns ``[safe position, safe commit number]`` (the readers' high-water mark)."""

ALLOCATE_SQL: Final = "SELECT goatherd_allocate(?, ?)"


FAULT_POINTS: Final = ("allocated", "written", "committing", "side-allocated")
"""Where a PostgreSQL writer holds drawn numbers it has not committed yet.

``allocated``: an append group's positions and commit numbers were drawn;
``written``: its rows were sent; ``committing``: any write transaction is
about to ``COMMIT``; ``side-allocated``: a side step's commit number was drawn.
"""

fault_hook: Callable[[str], None] | None = None
"""Called with the point's name at each of :data:`FAULT_POINTS` (fault tests)."""


def reached(point: str) -> None:
    """Run :data:`fault_hook` at ``point`` (one of :data:`FAULT_POINTS`)."""
    hook = fault_hook
    if hook is not None:
        hook(point)


def lock_key(kind: str, name: str) -> int:
    """Return the signed 64-bit advisory lock key of an owner or an intent."""
    digest = hashlib.blake2b(f"{kind}\0{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def sequence_restart(name: str, next_value: int) -> str:
    """Return the statement after which sequence ``name`` hands out ``next_value``."""
    if next_value <= 0:
        return f"SELECT setval('{name}', 0, false)"
    return f"SELECT setval('{name}', {next_value - 1}, true)"
