"""Rows written by an import (not by ``append``): appends continue after them.

PostgreSQL appends draw positions and commit numbers from sequences; an
import writes rows without them, so the allocation never goes below what is
committed (ADR 0036).
"""

from __future__ import annotations

import io

from goatherd import TRUSTED_APPEND_CONTEXT
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.portability.jsonl import export_trace, import_trace
from goatherd.infrastructure.store import SQLiteTraceStore, open_trace_store
from tests.infrastructure.store.helpers import batch, draft


def test_appends_after_an_import_continue_its_positions(
    durable_store_url: str, tmp_path
) -> None:
    with SQLiteTraceStore(tmp_path / "source.sqlite") as source:
        for n in range(3):
            source.append(TRUSTED_APPEND_CONTEXT, batch(f"i:{n}", "exec:a", draft(n)))
        text = io.StringIO()
        export_trace(source, text)
    with open_trace_store(durable_store_url) as target:
        import_trace(io.StringIO(text.getvalue()).readlines(), target)
        receipt = target.append(
            TRUSTED_APPEND_CONTEXT, batch("i:after", "exec:a", draft("after"))
        )
        assert receipt.commit_receipts == ("commit:3",)
        assert receipt.owner_ordinal_ranges == {"exec:a": (3, 3)}
        assert target.max_position() == 3
        assert verify_trace(target).ok
