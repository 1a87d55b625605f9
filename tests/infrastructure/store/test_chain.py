"""The commit chain: every commit's head covers everything before it (ADR 0038).

A head noted outside the trace (``str(store.trace_head())``) must stop
verifying after any rewrite or truncation of what a reader shows or trusts,
even when the rewriter recomputes every stored digest; the payload bytes are
not in the chain (a recorded redaction keeps it verifiable).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import delete, select, text, update

from goatherd import TRUSTED_APPEND_CONTEXT, AppendBatch, AppendGroup, CutSpec
from goatherd.infrastructure.audit.verify import verify_trace
from goatherd.infrastructure.store import (
    SqlAlchemyTraceStore,
    SQLiteTraceStore,
    appending,
    open_trace_store,
    open_trace_store_read_only,
)
from goatherd.infrastructure.store.chain import GENESIS, TraceHead, parse_head
from goatherd.infrastructure.store.schema import (
    append_intents,
    contexts,
    frontiers,
    meta,
    owner_ordinals,
    path_entries,
    records,
)
from tests.infrastructure.store.helpers import batch, draft

CTX = TRUSTED_APPEND_CONTEXT
FIXTURE = Path(__file__).parent / "fixtures" / "trace_v1.sqlite"


def _fill(store: SqlAlchemyTraceStore) -> None:
    root = store.append(CTX, batch("i:1", "exec:a", draft(1), draft(2)))
    store.append(
        CTX,
        AppendBatch(
            "i:2",
            (
                AppendGroup("exec:b", fact_drafts=(draft(3, parents=root.fact_ids),)),
                AppendGroup("exec:a", fact_drafts=(draft(4),)),
            ),
        ),
    )
    store.append(CTX, AppendBatch("i:empty"))
    store.publish_cut(CTX, CutSpec("cut:1", "exec:a", root.fact_ids[1]))
    store.append(CTX, batch("i:3", "exec:a", draft("caf\u00e9")))


class TestTheHead:
    def test_every_commit_moves_the_head_and_the_stored_chain_verifies(
        self, store: SqlAlchemyTraceStore
    ) -> None:
        heads = [store.trace_head()]
        assert heads[0] == TraceHead(0, GENESIS)
        store.append(CTX, batch("i:1", "exec:a", draft(1)))
        heads.append(store.trace_head())
        store.append(CTX, AppendBatch("i:empty"))
        heads.append(store.trace_head())
        assert [h.commits for h in heads] == [0, 1, 2]
        assert len({h.digest for h in heads}) == 3
        report = store.verify_chain(expect=str(heads[1]))
        assert report.ok, report.problems
        assert report.head == heads[-1]
        assert report.expected is True

    def test_the_same_appends_give_the_same_head_on_every_backend(
        self,
        open_store: Callable[[], SqlAlchemyTraceStore],
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        # Apart from the commit time (in the chain, in each backend's form),
        # nothing backend-specific enters a digest.
        monkeypatch.setattr(
            appending, "commit_time", lambda *, postgres: "2025-01-02 03:04:05"
        )
        store = open_store()
        _fill(store)
        with SQLiteTraceStore(tmp_path / "other.sqlite") as other:
            _fill(other)
            assert store.trace_head() == other.trace_head()

    def test_a_read_only_store_reads_the_same_head(
        self, durable_store_url: str
    ) -> None:
        with open_trace_store(durable_store_url) as store:
            _fill(store)
            head = store.trace_head()
        with open_trace_store_read_only(durable_store_url) as reader:
            assert reader.trace_head() == head
            assert reader.verify_chain(expect=head).ok

    def test_a_group_links_its_commits_in_commit_order(self, tmp_path: Path) -> None:
        import threading

        with SQLiteTraceStore(tmp_path / "g.sqlite") as grouped:
            threads = [
                threading.Thread(
                    target=lambda k=k: [
                        grouped.append(CTX, batch(f"t{k}:{n}", f"exec:{k}", draft(n)))
                        for n in range(20)
                    ]
                )
                for k in range(6)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
            report = grouped.verify_chain()
            assert report.ok, report.problems
            assert report.head == grouped.trace_head()
            assert report.head.commits == 120


def _tamper(store: SqlAlchemyTraceStore, statement: object) -> None:
    with store.engine.begin() as conn:
        conn.execute(statement)  # type: ignore[call-overload]


EDITS: dict[str, Callable[[], object]] = {
    "kind label": lambda: (
        update(path_entries)
        .where(path_entries.c.path_ref == "exec:a", path_entries.c.path_ordinal == 1)
        .values(kind_label="tool:harmless")
    ),
    "entry moved to another owner": lambda: (
        update(path_entries)
        .where(path_entries.c.path_ref == "exec:b")
        .values(path_ref="exec:c")
    ),
    "context ref": lambda: (
        update(path_entries)
        .where(path_entries.c.path_ref == "exec:a", path_entries.c.path_ordinal == 0)
        .values(retained_context_ref="context:forged")
    ),
    "context content": lambda: update(contexts).values(substrate_ref="forged"),
    "receipt": lambda: (
        update(append_intents)
        .where(append_intents.c.append_intent_id == "i:1")
        .values(receipt_json='{"append_intent_id":"i:1"}')
    ),
    "commit time": lambda: (
        update(append_intents)
        .where(append_intents.c.append_intent_id == "i:1")
        .values(committed_at="2001-01-01 00:00:00")
    ),
    "batch digest": lambda: (
        update(append_intents)
        .where(append_intents.c.append_intent_id == "i:2")
        .values(batch_digest="0" * 64)
    ),
    "record metadata": lambda: (
        update(records)
        .where(records.c.schema_ref == "test.step.v1")
        .values(mode="declaration")
    ),
    "frontier index": lambda: update(frontiers).values(through_owner_ordinal=0),
    "position": lambda: (
        update(path_entries).where(path_entries.c.position == 0).values(position=99)
    ),
}


class TestTampering:
    @pytest.mark.parametrize("edit", sorted(EDITS))
    def test_an_edit_breaks_the_stored_chain_and_the_noted_head(
        self, durable_store_url: str, edit: str
    ) -> None:
        with open_trace_store(durable_store_url) as store:
            _fill(store)
            noted = str(store.trace_head())
            _tamper(store, EDITS[edit]())
            report = store.verify_chain(expect=noted)
            assert report.problems, edit
            assert report.expected is False
            assert not report.ok
            assert "commit" in str(report.problems[0])

    def test_a_rewriter_who_recomputes_every_digest_still_fails_the_noted_head(
        self, durable_store_url: str
    ) -> None:
        with open_trace_store(durable_store_url) as store:
            _fill(store)
            noted = store.trace_head()
            _tamper(store, EDITS["kind label"]())
            # rewrite the chain itself: clear every digest and link again
            _tamper(
                store,
                update(append_intents).values(commit_digest=None, head_digest=None),
            )
            _tamper(store, delete(meta).where(meta.c.key == "head"))
            relinked = store.seal()
            report = store.verify_chain(expect=noted)
            assert not report.problems  # self-consistent after the rewrite
            assert report.expected is False  # but not the head noted before
            assert relinked.commits == noted.commits
            assert relinked.digest != noted.digest

    def test_a_consistent_tail_truncation_fails_the_noted_head(
        self, durable_store_url: str
    ) -> None:
        with open_trace_store(durable_store_url) as store:
            _fill(store)
            noted = store.trace_head()
            last = store.read_log(limit=100)[-1]
            # delete the last commit and fix every counter, as an attacker would
            with store.engine.begin() as conn:
                conn.execute(
                    delete(path_entries).where(
                        path_entries.c.append_intent_id == last.append_intent_id
                    )
                )
                conn.execute(
                    delete(records).where(
                        records.c.append_intent_id == last.append_intent_id
                    )
                )
                conn.execute(
                    delete(contexts).where(
                        contexts.c.append_intent_id == last.append_intent_id
                    )
                )
                conn.execute(
                    delete(append_intents).where(
                        append_intents.c.append_intent_id == last.append_intent_id
                    )
                )
                conn.execute(
                    update(owner_ordinals)
                    .where(owner_ordinals.c.trace_owner_id == "exec:a")
                    .values(next_ordinal=owner_ordinals.c.next_ordinal - 1)
                )
                conn.execute(
                    update(meta)
                    .where(meta.c.key == "next_commit_seq")
                    .values(value=str(last.position))
                )
                # and point meta.head at the last link left
                ((seq, head),) = conn.execute(
                    select(append_intents.c.commit_seq, append_intents.c.head_digest)
                    .order_by(append_intents.c.commit_seq.desc())
                    .limit(1)
                ).all()
                conn.execute(
                    update(meta)
                    .where(meta.c.key == "head")
                    .values(value=f"{seq + 1} {head}")
                )
            assert verify_trace(store).ok  # consistent: only the head tells
            report = store.verify_chain(expect=noted)
            assert report.expected is False
            assert report.head.commits == noted.commits - 1

    def test_a_payload_edit_leaves_the_chain_to_the_record_ids(
        self, durable_store_url: str
    ) -> None:
        # The chain covers record ids and metadata, not payload bytes: a
        # recorded redaction keeps it verifiable; the record id check (verify)
        # is what catches a silent payload edit.
        with open_trace_store(durable_store_url) as store:
            _fill(store)
            noted = store.trace_head()
            _tamper(
                store,
                update(records)
                .where(records.c.schema_ref == "test.step.v1")
                .values(body_json='{"payload":{"value":"redacted"}}'),
            )
            assert store.verify_chain(expect=noted).ok
            assert not verify_trace(store).ok


class TestUpgradedTraces:
    def test_a_v1_trace_is_linked_when_a_writer_opens_it(self, tmp_path: Path) -> None:
        path = tmp_path / "trace.sqlite"
        shutil.copy(FIXTURE, path)
        with open_trace_store_read_only(path) as old:
            unlinked = old.trace_head()  # computed, not stored
        with SQLiteTraceStore(path) as store:
            head = store.trace_head()
            assert head == unlinked
            # 43 commits, then one side step per side row the upgrade found
            # (a ledger row and a checkpoint row, ADR 0064)
            assert head.commits == 45
            assert store.verify_chain(expect=head).ok
            store.append(CTX, batch("after", "fixture:a", draft("new")))
            assert store.trace_head().commits == 46
        with SQLiteTraceStore(path) as again:
            assert again.verify_chain(expect=head).expected is True


class TestParsing:
    def test_the_printed_head_parses_back(self) -> None:
        head = TraceHead(12, "ab" * 32)
        assert str(head) == "12:sha256:" + "ab" * 32
        assert parse_head(str(head)) == head
        assert parse_head("sha256:" + "ab" * 32) == TraceHead(-1, "ab" * 32)

    @pytest.mark.parametrize(
        "bad", ["", "12:sha256:xyz", "sha256:" + "A" * 64, "x" * 64]
    )
    def test_anything_else_is_refused_in_one_line(self, bad: str) -> None:
        with pytest.raises(ValueError, match="not a trace head") as info:
            parse_head(bad)
        assert "\n" not in str(info.value)


@pytest.mark.postgres
def test_postgres_writers_in_parallel_are_linked_in_commit_order(
    tmp_path: Path,
) -> None:
    import multiprocessing

    from tests.infrastructure.backends import backend_url

    for url in backend_url("postgres", tmp_path):
        open_trace_store(url).close()
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(4) as pool:
            pool.map(_pg_writer, [(url, k) for k in range(4)])
        with open_trace_store(url) as store:
            head = store.trace_head()
            assert head.commits == 4 * 25
            report = store.verify_chain(expect=head)
            assert report.ok, report.problems
            assert report.unsealed == 0
            with store.engine.connect() as conn:
                seqs = (
                    conn.execute(
                        text(
                            "SELECT commit_seq FROM append_intents ORDER BY commit_seq"
                        )
                    )
                    .scalars()
                    .all()
                )
            assert seqs == list(range(100))


def _pg_writer(args: tuple[str, int]) -> None:
    url, k = args
    with open_trace_store(url) as store:
        for n in range(25):
            store.append(CTX, batch(f"w{k}:{n}", f"exec:{k}", draft(n)))
