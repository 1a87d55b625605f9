"""The trace UI's HTTP API on every store backend (SQLite memory and file,
PostgreSQL when ``GOATHERD_TEST_DB_URL`` names a server; the fixtures come
from ``tests/infrastructure/conftest.py``).
"""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from goatherd.infrastructure import EffectBus
from goatherd.infrastructure.store import SQLiteTraceStore, open_trace_store_read_only
from goatherd.infrastructure.traceui import TraceUiServer, parse_addr
from tests.infrastructure.traceui.trace import append, build_trace


@pytest.fixture
def store(open_store):
    store = open_store()
    build_trace(store)
    return store


@pytest.fixture
def client(store):
    with TraceUiServer(store) as server, httpx.Client(base_url=server.url) as client:
        yield client


def _records(client, **params):
    response = client.get("/api/records", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_health_reports_liveness_bus_presence_and_the_record_count(
    store, client
) -> None:
    assert client.get("/api/health").json() == {
        "status": "ok",
        "bus": False,
        "records": store.fact_count(),
        "fact_count": store.fact_count(),
    }


def test_a_path_selects_its_subtree_and_a_shared_record_appears_per_path(
    client,
) -> None:
    page = _records(client, path="root")
    owners = [(r["owner"], r["kind"]) for r in page["records"]]
    assert owners == [
        ("root", "goatherd.scope.forked.v1"),
        ("root:a", "app.step.v1"),
        ("root", "app.shared.v1"),
        ("root:a", "app.shared.v1"),
    ]
    shared = [r for r in page["records"] if r["schema"] == "app.shared.v1"]
    assert shared[0]["id"] == shared[1]["id"]
    assert [r["ordinal"] for r in shared] == [1, 1]
    assert "rootless" not in {r["owner"] for r in page["records"]}


def test_records_carry_payloads_and_causal_edges_and_arrays_are_never_null(
    client,
) -> None:
    fork = _records(client, path="root:a")["records"][0]
    assert fork["payload"] == {"n": 1}
    assert isinstance(fork["parents"], list)
    assert len(fork["parents"]) == 1
    assert fork["digest"] == fork["id"]
    assert fork["witness"].startswith("sha256:")
    root = _records(client, path="root")["records"][0]
    assert root["parents"] == []
    assert _records(client, path="nobody") == {
        "count": 0,
        "limit": 1000,
        "truncated": False,
        "next_after": None,
        "records": [],
    }


def test_an_empty_path_spans_every_owner_and_lists_witnesses_first(client) -> None:
    records = _records(client)["records"]
    assert records[0]["owner"] == "kernel:witness"
    assert records[0]["position"] is None
    assert {"root", "root:a", "rootless"} <= {r["owner"] for r in records}


def test_through_is_an_inclusive_per_owner_ordinal_cutoff(client) -> None:
    records = _records(client, path="root", through="0")["records"]
    assert [(r["owner"], r["ordinal"]) for r in records] == [("root", 0), ("root:a", 0)]


def test_mode_filters_declarations_and_captures(client) -> None:
    declared = _records(client, path="root", mode="declarations_only")["records"]
    assert [r["mode"] for r in declared] == ["declaration"]
    captured = _records(client, path="root", mode="captures_only")["records"]
    assert {r["mode"] for r in captured} == {"capture"}


def test_pages_continue_after_the_last_position_and_say_when_cut(client) -> None:
    first = _records(client, path="root", limit="3")
    assert first["count"] == 3
    assert first["truncated"] is True
    rest = _records(client, path="root", after=str(first["next_after"]))
    assert rest["next_after"] is None
    assert rest["truncated"] is False
    assert len(rest["records"]) == 1


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("through=abc", "through must be an integer, got 'abc'"),
        ("through=-1", "through must be between 0 and"),
        ("mode=all", "mode must be one of both, captures_only, declarations_only"),
        ("limit=0", "limit must be between 1 and 10000"),
        ("after=x", "after must be an integer"),
        ("colour=red", "unknown query parameter 'colour'"),
    ],
)
def test_invalid_parameters_get_a_400_naming_the_problem(
    store, client, query, message
) -> None:
    before = store.fact_count()
    response = client.get(f"/api/records?{query}")
    assert response.status_code == 400
    assert message in response.json()["error"]
    assert store.fact_count() == before


def test_a_record_is_found_by_id_on_each_of_its_paths(client) -> None:
    shared = _records(client, path="root")["records"][-1]
    found = client.get(f"/api/records/{shared['id']}").json()
    assert [r["owner"] for r in found["records"]] == ["root", "root:a"]
    assert client.get("/api/records/sha256:nope").status_code == 404


def test_owners_and_scopes_are_listed(client) -> None:
    owners = {
        o["owner"]: o["count"] for o in client.get("/api/owners").json()["owners"]
    }
    assert owners == {"root": 2, "root:a": 2, "rootless": 1}
    scopes = client.get("/api/scopes").json()["scopes"]
    assert [(s["owner"], s["state"], s["parent_owner"]) for s in scopes] == [
        ("root", "active", None),
        ("root:a", "active", "root"),
    ]


def test_new_records_show_up_on_the_next_request(store, client) -> None:
    before = _records(client, path="late")["count"]
    append(store, "late", "late", "app.late.v1")
    assert (before, _records(client, path="late")["count"]) == (0, 1)


def test_events_without_a_bus_answer_503(client) -> None:
    response = client.get("/api/events")
    assert response.status_code == 503
    assert "poll /api/records" in response.json()["error"]


def test_the_viewer_page_and_its_assets_are_served(client) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert "goatherd trace" in page.text
    assert client.get("/static/app.js").status_code == 200


def test_a_read_only_store_is_served_without_writing(tmp_path) -> None:
    path = tmp_path / "trace.sqlite"
    with SQLiteTraceStore(path) as store:
        build_trace(store)
    size = path.stat().st_size
    with (
        open_trace_store_read_only(str(path)) as read_only,
        TraceUiServer(read_only) as server,
        httpx.Client(base_url=server.url) as client,
    ):
        assert _records(client, path="root")["count"] == 4
    assert path.stat().st_size == size


def test_sse_streams_one_event_per_appended_record(open_store) -> None:
    bus = EffectBus()
    with open_store() as store:
        store.with_bus(bus)
        with TraceUiServer(store, bus) as server:
            received: list[dict[str, object]] = []
            ready = threading.Event()

            def listen() -> None:
                with httpx.stream("GET", server.url + "/api/events", timeout=10) as r:
                    for line in r.iter_lines():
                        if line.startswith(": connected"):
                            ready.set()
                        if line.startswith("data: "):
                            received.append(json.loads(line[6:]))
                            return

            listener = threading.Thread(target=listen, daemon=True)
            listener.start()
            assert ready.wait(10)
            receipt = append(store, "live", "root", "app.live.v1", {"x": 1})
            listener.join(10)
        assert [(e["id"], e["payload"]) for e in received] == [
            (receipt.fact_ids[0], {"x": 1})
        ]
        assert received[0]["parents"] == []


def test_sse_clients_sharing_ticks_each_get_every_event_once_in_order(
    open_store,
) -> None:
    # Streams that keep up share one encoded write per flush tick; a burst
    # spread over several ticks must still reach each of them whole.
    clients, appends = 4, 120
    bus = EffectBus()
    with open_store() as store:
        store.with_bus(bus)
        with TraceUiServer(store, bus) as server:
            received: list[list[int]] = [[] for _ in range(clients)]
            ready = threading.Barrier(clients + 1, timeout=10)

            def listen(seen: list[int]) -> None:
                with httpx.stream("GET", server.url + "/api/events", timeout=20) as r:
                    for line in r.iter_lines():
                        if line.startswith(": connected"):
                            ready.wait()
                        if line.startswith("id: "):
                            seen.append(int(line[4:]))
                            if len(seen) == appends:
                                return

            listeners = [
                threading.Thread(target=listen, args=(seen,), daemon=True)
                for seen in received
            ]
            for listener in listeners:
                listener.start()
            ready.wait()
            for n in range(appends):
                append(store, f"burst-{n}", "root", "app.burst.v1", {"n": n})
                if n % 40 == 39:
                    time.sleep(0.3)  # the next appends fall in a later tick
            for listener in listeners:
                listener.join(20)
        first = received[0][0]
        for seen in received:
            assert seen == list(range(first, first + appends))


def test_addresses_need_a_port() -> None:
    assert parse_addr("127.0.0.1:8321") == ("127.0.0.1", 8321)
    assert parse_addr("[::1]:80") == ("::1", 80)
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_addr("localhost")


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/", 200),
        ("/static/app.js", 200),
        ("/static/style.css", 200),
        ("/api/health", 200),
        ("/api/records", 200),
        ("/api/records?limit=x", 400),
        ("/api/records/sha256:nothing", 404),
        ("/api/events", 503),
        ("/static/missing.js", 404),
    ],
)
def test_every_response_is_unsniffable_unframeable_and_self_only(
    client, path: str, status: int
) -> None:
    response = client.get(path)
    assert response.status_code == status
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["x-frame-options"] == "DENY"
    policy = response.headers["content-security-policy"]
    assert "default-src 'none'" in policy
    assert "script-src 'self'" in policy
    assert "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy
    assert response.headers["referrer-policy"] == "no-referrer"


def test_a_refused_host_gets_the_headers_too(client) -> None:
    response = client.get("/", headers={"Host": "evil.example"})
    assert response.status_code == 421
    assert response.headers["x-frame-options"] == "DENY"
