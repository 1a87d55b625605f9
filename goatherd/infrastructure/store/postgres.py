"""PostgreSQL specifics of schema v2: position allocation and the safe high-water mark.

Writers on PostgreSQL hold no global lock through their commit (ADR 0036).
Each append transaction locks only what it touches (advisory transaction locks
on its owners and its intent), plans, and then calls ``goatherd_allocate``
once. That function takes a session-level advisory lock for one statement,
makes the transaction take its transaction id, draws the transaction's log
positions and commit numbers from two sequences, and releases the lock. So
transaction ids and positions are allocated in the same order: a transaction
with a smaller id holds smaller positions.

A reader then only trusts rows whose writer's transaction id is below the
``xmin`` of its snapshot (every transaction below it has ended): that set is
a prefix of the log, so a follower never passes a position that commits
later. A transaction that dies after allocating leaves its positions unused
(ADR 0036 says when that can happen and what ``verify`` reports).
"""

from __future__ import annotations

import hashlib
from typing import Final

__all__ = [
    "ALLOCATE_SQL",
    "COMMITS_SEQUENCE",
    "DDL",
    "POSITIONS_SEQUENCE",
    "SAFE_TXID_SQL",
    "lock_key",
    "sequence_restart",
]

ALLOCATE_LOCK_KEY: Final = 0x60A7_A110
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
        -- Never below what is committed: rows an import wrote took numbers
        -- without the sequences (two index lookups).
        IF positions > 0 THEN
            first_position := nextval('{POSITIONS_SEQUENCE}');
            SELECT COALESCE(max(position) + 1, 0) INTO floor FROM path_entries;
            first_position := GREATEST(first_position, floor);
            PERFORM setval('{POSITIONS_SEQUENCE}', first_position + positions - 1);
        END IF;
        IF commits > 0 THEN
            first_commit := nextval('{COMMITS_SEQUENCE}');
            SELECT COALESCE(max(commit_seq) + 1, 0) INTO floor FROM append_intents;
            first_commit := GREATEST(first_commit, floor);
            PERFORM setval('{COMMITS_SEQUENCE}', first_commit + commits - 1);
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

DDL: Final = (
    f"CREATE SEQUENCE IF NOT EXISTS {POSITIONS_SEQUENCE} AS bigint "
    "MINVALUE 0 START WITH 0",
    f"CREATE SEQUENCE IF NOT EXISTS {COMMITS_SEQUENCE} AS bigint "
    "MINVALUE 0 START WITH 0",
    _ALLOCATE_FUNCTION,
)

ALLOCATE_SQL: Final = "SELECT goatherd_allocate(?, ?)"

SAFE_TXID_SQL: Final = "pg_snapshot_xmin(pg_current_snapshot())::text::bigint"
"""Below this transaction id every writer has ended (the high-water mark)."""


def lock_key(kind: str, name: str) -> int:
    """Return the signed 64-bit advisory lock key of an owner or an intent."""
    digest = hashlib.blake2b(f"{kind}\0{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def sequence_restart(name: str, next_value: int) -> str:
    """Return the statement after which sequence ``name`` hands out ``next_value``."""
    if next_value <= 0:
        return f"SELECT setval('{name}', 0, false)"
    return f"SELECT setval('{name}', {next_value - 1}, true)"
