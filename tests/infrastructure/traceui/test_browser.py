"""The viewer in a real headless Chromium: tree, records, links, graph, live SSE."""

from __future__ import annotations

from pathlib import Path

import pytest

from goatherd.cli.output import short_id
from goatherd.domain import (
    TRUSTED_APPEND_CONTEXT,
    AppendBatch,
    AppendGroup,
    RecordDraft,
)
from goatherd.infrastructure import EffectBus
from goatherd.infrastructure.store import SQLiteTraceStore
from goatherd.infrastructure.traceui import TraceUiServer
from tests.infrastructure.traceui.trace import append, build_trace

pytestmark = [pytest.mark.browser, pytest.mark.integration]

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture
def page():
    if not CHROMIUM.exists():
        pytest.skip("Chromium is not installed at /usr/bin/chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield browser.new_page(viewport={"width": 1400, "height": 900})
        finally:
            browser.close()


def test_the_viewer_shows_the_trace_and_receives_a_live_record(tmp_path, page) -> None:
    from playwright.sync_api import expect

    bus = EffectBus()
    with SQLiteTraceStore(tmp_path / "trace.sqlite") as store:
        store.with_bus(bus)
        fork, step = build_trace(store)
        with TraceUiServer(store, bus) as server:
            page.goto(server.url)
            # the owner tree, the scope tree with states, and the records
            expect(page.locator("#live")).to_have_text("live")
            expect(page.locator('#owners a[data-path="root:a"]')).to_be_visible()
            expect(page.locator('#scopes li[data-owner="root:a"] .state')).to_have_text(
                "active"
            )
            page.click('#owners a[data-path="root:a"]')
            expect(page.locator("#current-path")).to_have_text("root:a")
            step_node = page.locator(f'.record[data-id="{step.fact_ids[0]}"]')
            expect(step_node.locator(".payload")).to_contain_text('"n": 1')
            # record ids are shown as ``goatherd log`` and ``show`` print them
            expect(step_node.locator(".id").first).to_have_text(
                short_id(step.fact_ids[0])
            )
            # a causal parent is a link to the parent record (on another path)
            step_node.locator(f'.parents a[data-id="{fork.fact_ids[0]}"]').click()
            expect(page.locator("#current-path")).to_have_text("root")
            expect(page.locator(".record.highlight")).to_have_attribute(
                "data-id", fork.fact_ids[0]
            )
            # a record appended now arrives over SSE without a reload
            live = append(store, "live", "root:b", "app.live.v1", {"msg": "hello"})
            live_node = page.locator(f'.record[data-id="{live.fact_ids[0]}"]')
            expect(live_node.locator(".payload")).to_contain_text('"msg": "hello"')
            expect(page.locator('#owners a[data-path="root:b"]')).to_be_visible()
            # the causal graph draws the records and their edges
            page.click("#show-graph")
            expect(page.locator("#graph circle").first).to_be_visible()
            assert page.locator("#graph line").count() >= 1
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "traceui.png"), full_page=True)
            page.click("#show-records")
            page.screenshot(path=str(ARTIFACTS / "traceui-records.png"))


def _fill(store, owner, count, per_batch=500):
    for start in range(0, count, per_batch):
        drafts = tuple(
            RecordDraft("capture", "app.tool.called.v1", {"n": n})
            for n in range(start, min(start + per_batch, count))
        )
        group = AppendGroup(owner, fact_drafts=drafts)
        store.append(TRUSTED_APPEND_CONTEXT, AppendBatch(f"{owner}:{start}", (group,)))


def test_a_large_trace_is_paged_and_live_records_wait_for_the_last_page(
    tmp_path, page
) -> None:
    from playwright.sync_api import expect

    bus = EffectBus()
    rows = page.locator('#records .record[data-owner="agent:main"]')
    with SQLiteTraceStore(tmp_path / "big.sqlite") as store:
        store.with_bus(bus)
        _fill(store, "agent:main", 1_200)
        with TraceUiServer(store, bus) as server:
            page.goto(server.url)
            expect(page.locator("#live")).to_have_text("live")
            # one page is rendered, not the whole trace (the trace's two
            # witness records lead the first page of "all owners")
            expect(rows).to_have_count(500)
            expect(page.locator("#records .record")).to_have_count(502)
            expect(page.locator("#more")).to_be_visible()
            # a record appended now belongs after the unloaded pages: not shown yet
            early = append(store, "early", "agent:main", "app.live.v1", {"m": 1})
            page.click("#more")
            expect(rows).to_have_count(1000)
            page.click("#more")
            expect(rows).to_have_count(1201)
            expect(page.locator("#more")).to_be_hidden()
            ordinals = rows.evaluate_all(
                "nodes => nodes.map(n => n.querySelector('.owner').textContent)"
            )
            assert ordinals == [f"agent:main #{i}" for i in range(1201)]
            assert rows.last.get_attribute("data-id") == early.fact_ids[0]
            # at the end of the list, live records are appended as they arrive
            late = append(store, "late", "agent:main", "app.live.v1", {"m": 2})
            expect(rows).to_have_count(1202)
            assert rows.last.get_attribute("data-id") == late.fact_ids[0]


def test_events_dropped_for_a_slow_page_are_read_again_in_log_order(
    tmp_path, page, monkeypatch
) -> None:
    from playwright.sync_api import expect

    import goatherd.infrastructure.traceui.app as app

    # A 3-event buffer per SSE client: a burst between two flushes drops most
    # of it, and the page must notice the jump in positions and re-read.
    monkeypatch.setattr(app, "SSE_BUFFER_EVENTS", 3)
    bus = EffectBus()
    rows = page.locator('#records .record[data-owner="agent:burst"]')
    with SQLiteTraceStore(tmp_path / "trace.sqlite") as store:
        store.with_bus(bus)
        append(store, "first", "agent:burst", "app.live.v1", {"m": -1})
        with TraceUiServer(store, bus) as server:
            page.goto(server.url)
            expect(page.locator("#live")).to_have_text("live")
            expect(rows).to_have_count(1)
            append(store, "one", "agent:burst", "app.live.v1", {"m": 0})
            expect(rows).to_have_count(2)  # the stream's position is known now
            for n in range(1, 40):
                append(store, f"burst:{n}", "agent:burst", "app.live.v1", {"m": n})
            expect(rows).to_have_count(41)
            ordinals = rows.evaluate_all(
                "nodes => nodes.map(n => n.querySelector('.owner').textContent)"
            )
            assert ordinals == [f"agent:burst #{i}" for i in range(41)]
