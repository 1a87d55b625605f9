"""The trace store's tables (SQLAlchemy Core, one ``MetaData``): schema v3.

The logical layout follows the reference's SQLite layout (kernel-spec section
6) with these additions: ``path_entries.position`` (the store-global log
position of an ordinary path entry, ``NULL`` for witness entries), the
``checkpoint_snapshots`` table (runtime-spec 4.3), and, since v2, the commit
chain columns of ``append_intents`` (``commit_seq``, ``commit_digest``,
``head_digest``) and the writer's transaction id (``txid``, PostgreSQL only)
on ``append_intents`` and ``path_entries``. The same definitions create the
schema on SQLite and on PostgreSQL.

Schema v2 also changes the physical SQLite layout for fewer pages per commit
(ADR 0033): ``path_entries`` and ``contexts`` are ``WITHOUT ROWID`` tables
clustered on their keys, and the redundant ``UNIQUE (commit_receipt)`` is gone
(a receipt is ``commit:<position>`` or ``witness:<record id>``, both unique
already). ``migration.py`` upgrades v1 files and databases.

Schema v3 adds ``side_writes`` (ADR 0064): one step of the commit chain per
write to a side table (the materialization ledger and the checkpoint blob
table), with the digest of the row it left (``NULL``: deleted). The side
tables stay outside the trace; the chain vouches for their rows.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
    text,
)

__all__ = [
    "METADATA",
    "META_HEAD",
    "META_NEXT_COMMIT",
    "META_SCHEMA",
    "SCHEMA_V1",
    "SCHEMA_V2",
    "SCHEMA_VERSION",
    "SIDE_TABLES",
    "TRACE_TABLES",
    "append_intents",
    "checkpoint_snapshots",
    "contexts",
    "frontiers",
    "materialization_intents",
    "meta",
    "owner_ordinals",
    "path_entries",
    "record_edges",
    "records",
    "side_writes",
]

SCHEMA_VERSION: Final = "goatherd.trace.v3"
SCHEMA_V2: Final = "goatherd.trace.v2"
SCHEMA_V1: Final = "goatherd.trace.v1"
META_SCHEMA: Final = "schema"
META_NEXT_COMMIT: Final = "next_commit_seq"
META_HEAD: Final = "head"
"""The chained head: ``<commits chained> <digest>`` (``chain.py``)."""

METADATA: Final = MetaData()

_NOW = text("CURRENT_TIMESTAMP")
# Owner paths order by code point everywhere (kernel-spec 7.7): SQLite's BINARY
# collation does that; PostgreSQL needs the "C" collation instead of the locale's.
_PATH_TEXT = Text().with_variant(Text(collation="C"), "postgresql")

meta = Table(
    "meta",
    METADATA,
    Column("key", Text, primary_key=True),
    Column("value", Text, nullable=False),
    sqlite_with_rowid=False,
)

append_intents = Table(
    "append_intents",
    METADATA,
    Column("append_intent_id", Text, primary_key=True),
    Column("batch_digest", Text, nullable=False),
    Column("receipt_json", Text, nullable=False),
    Column("committed_at", Text, nullable=False, server_default=_NOW),
    # The commit chain (ADR 0033): the 0-based commit number, the digest of
    # what the commit wrote, and the chained head after it.
    Column("commit_seq", BigInteger, nullable=True),
    Column("commit_digest", Text, nullable=True),
    Column("head_digest", Text, nullable=True),
    # PostgreSQL: the writer's transaction id (readers' high-water mark).
    Column("txid", BigInteger, nullable=True),
)
# PostgreSQL's two indexes on append_intents (``idx_append_intents_commit`` and
# the partial ``idx_append_intents_unsealed``) are plain DDL in
# ``migration.POSTGRES_INDEXES``, run by ``prepare_postgres`` for every new or
# upgraded trace: a ``postgresql_where=`` option here would import SQLAlchemy's
# PostgreSQL dialect into every process that opens a SQLite trace (ADR 0089).

contexts = Table(
    "contexts",
    METADATA,
    Column("context_id", Text, primary_key=True),
    Column("active_binding_refs_json", Text, nullable=False),
    Column("capability_witness_refs_json", Text, nullable=False),
    Column("semantic_environment_refs_json", Text, nullable=False),
    Column("visibility_policy_refs_json", Text, nullable=False),
    Column("substrate_ref", Text, nullable=False),
    Column("containment", Text, nullable=False),
    Column(
        "append_intent_id",
        Text,
        ForeignKey("append_intents.append_intent_id"),
        nullable=False,
    ),
    sqlite_with_rowid=False,
)

owner_ordinals = Table(
    "owner_ordinals",
    METADATA,
    Column("trace_owner_id", Text, primary_key=True),
    Column("next_ordinal", BigInteger, nullable=False),
    CheckConstraint("next_ordinal >= 0", name="ck_owner_ordinals_next"),
    sqlite_with_rowid=False,
)

records = Table(
    "records",
    METADATA,
    Column("record_id", Text, primary_key=True),
    Column("digest", Text, nullable=False),
    Column("schema_ref", Text, nullable=False),
    Column("mode", Text, nullable=False),
    Column("witness_ref", Text, nullable=False),
    Column("caused_by_json", Text, nullable=False),
    Column("body_json", Text, nullable=False),
    Column(
        "append_intent_id",
        Text,
        ForeignKey("append_intents.append_intent_id"),
        nullable=False,
    ),
    CheckConstraint("record_id = digest", name="ck_records_id_is_digest"),
)
Index("idx_records_schema", records.c.schema_ref)

record_edges = Table(
    "record_edges",
    METADATA,
    Column(
        "child_record_id",
        Text,
        ForeignKey("records.record_id"),
        primary_key=True,
    ),
    Column("parent_position", Integer, primary_key=True),
    Column(
        "parent_record_id",
        Text,
        ForeignKey("records.record_id"),
        nullable=False,
    ),
    CheckConstraint("parent_position >= 0", name="ck_record_edges_position"),
)
Index("idx_record_edges_parent", record_edges.c.parent_record_id)

path_entries = Table(
    "path_entries",
    METADATA,
    Column("path_ref", _PATH_TEXT, primary_key=True),
    Column("path_ordinal", BigInteger, primary_key=True),
    Column("record_id", Text, ForeignKey("records.record_id"), nullable=False),
    Column("retained_context_ref", Text, nullable=False),
    Column("kind_label", Text, nullable=False),
    Column(
        "append_intent_id",
        Text,
        ForeignKey("append_intents.append_intent_id"),
        nullable=False,
    ),
    Column("commit_receipt", Text, nullable=False),
    Column("position", BigInteger, nullable=True),
    Column("txid", BigInteger, nullable=True),
    CheckConstraint("path_ordinal >= 0", name="ck_path_entries_ordinal"),
    sqlite_with_rowid=False,
)
Index("idx_path_entries_record", path_entries.c.record_id)
Index("idx_path_entries_position", path_entries.c.position, unique=True)

frontiers = Table(
    "frontiers",
    METADATA,
    Column("frontier_id", Text, primary_key=True),
    Column("target_trace_owner_id", Text, nullable=False),
    Column("through_fact_id", Text, ForeignKey("records.record_id"), nullable=False),
    Column("through_owner_ordinal", BigInteger, nullable=False),
    Column("publisher_trace_owner_id", Text, nullable=True),
    Column(
        "created_by_fact_id",
        Text,
        ForeignKey("records.record_id"),
        nullable=False,
        unique=True,
    ),
    Column(
        "append_intent_id",
        Text,
        ForeignKey("append_intents.append_intent_id"),
        nullable=False,
        unique=True,
    ),
    CheckConstraint("through_owner_ordinal >= 0", name="ck_frontiers_ordinal"),
)

materialization_intents = Table(
    "materialization_intents",
    METADATA,
    Column("materialize_intent_id", Text, primary_key=True),
    Column("request_digest", Text, nullable=False),
    Column("receipt_json", Text, nullable=False),
    Column("completed_at", Text, nullable=False, server_default=_NOW),
)

checkpoint_snapshots = Table(
    "checkpoint_snapshots",
    METADATA,
    Column("checkpoint_id", Text, primary_key=True),
    Column("scope_id", Text, nullable=False),
    Column("seq", BigInteger, nullable=False),
    Column("state_json", Text, nullable=False),
    Column("snapshot", LargeBinary, nullable=False),
    Column("created_at_unixnano", BigInteger, nullable=False),
)

side_writes = Table(
    "side_writes",
    METADATA,
    # A step of the commit chain (ADR 0064): its commit number, drawn from the
    # same allocator as the append commits', the side table and row key it
    # wrote, the digest of the row it left (NULL: it deleted the row), and
    # the chain's commit and head digests.
    Column("commit_seq", BigInteger, primary_key=True, autoincrement=False),
    Column("table_name", Text, nullable=False),
    Column("row_key", Text, nullable=False),
    Column("row_digest", Text, nullable=True),
    Column("commit_digest", Text, nullable=False),
    Column("head_digest", Text, nullable=True),
)
Index("idx_side_writes_row", side_writes.c.table_name, side_writes.c.row_key)

SIDE_TABLES: Final = (materialization_intents.name, checkpoint_snapshots.name)
"""The side tables whose every write is a step of the chain (ADR 0064)."""

TRACE_TABLES: Final = tuple(METADATA.sorted_tables)
