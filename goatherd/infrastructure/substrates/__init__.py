"""Reference substrates with a real world: the SQLite KV store and the workspace.

Each module declares its public names in ``__all__``; this package re-exports
them all.
"""

from goatherd.infrastructure.substrates.kv import *
from goatherd.infrastructure.substrates.workspace import *

# A literal list (not ``+=`` of the modules' lists) so mypy can follow the
# two-level re-export through ``goatherd.infrastructure`` and the facade;
# tests/infrastructure/substrates/test_package.py keeps it equal to the modules'.
__all__ = [
    "KVSubstrate",
    "KV_PUT_APPLIED_SCHEMA_REF",
    "KV_PUT_SCHEMA_REF",
    "KV_SUBSTRATE_REF",
    "SQLiteKVSubstrate",
    "WORKSPACE_EXEC_APPLIED_SCHEMA_REF",
    "WORKSPACE_EXEC_SCHEMA_REF",
    "WORKSPACE_FILE_WRITE_APPLIED_SCHEMA_REF",
    "WORKSPACE_FILE_WRITE_SCHEMA_REF",
    "WORKSPACE_SUBSTRATE_REF",
    "WorkspaceSubstrate",
]
