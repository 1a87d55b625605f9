"""The viewer in a real headless Chromium: tree, records, links, graph, live SSE."""

from __future__ import annotations

from pathlib import Path

import pytest

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
