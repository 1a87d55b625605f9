"""Fuzz the trace UI's query parameters through Starlette's TestClient.

``/api/records`` answers 200 or 400 (a clear error naming the parameter),
never 500; a record lookup answers 200 or 404. The TestClient re-raises any
server exception, so a crash fails the test directly.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from goatherd.infrastructure.store import SQLiteTraceStore
from goatherd.infrastructure.traceui import create_app
from tests.fuzz.tables import table_rows
from tests.infrastructure.traceui.trace import build_trace

with warnings.catch_warnings():
    # Starlette asks for the ``httpx2`` fork; plain httpx still drives it here.
    warnings.simplefilter("ignore", UserWarning)
    from starlette.testclient import TestClient

_CLIENT: list[TestClient] = []
_STORE: list[SQLiteTraceStore] = []

PARAM_NAMES = ("path", "through", "mode", "after", "limit", "x", "", "PATH")
VALUES = st.sampled_from(
    (
        "",
        "0",
        "-1",
        "1",
        "10000",
        "10001",
        "9223372036854775807",
        "9223372036854775808",
        "-9223372036854775809",
        "1e3",
        " 1",
        "0x10",
        "root",
        "root:a",
        "kernel:witness",
        "both",
        "captures_only",
        "declarations_only",
        "NaN",
        "%00",
        "\u0663",
    )
) | st.text(max_size=30)


@pytest.fixture(scope="module", autouse=True)
def _app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    path: Path = tmp_path_factory.mktemp("traceui") / "trace.sqlite"
    with SQLiteTraceStore(path) as store:
        build_trace(store)
        app = create_app(store, allowed_hosts=("testserver",))
        with TestClient(app) as client:
            _CLIENT.append(client)
            _STORE.append(store)
            yield
    _CLIENT.clear()
    _STORE.clear()


@given(
    st.lists(
        st.tuples(st.sampled_from(PARAM_NAMES) | st.text(max_size=8), VALUES),
        max_size=5,
    )
)
def test_record_queries_answer_200_or_a_clear_400_never_500(
    # The element type both httpx and httpx2 (starlette's TestClient uses
    # httpx2 when it is installed, as the langgraph extra does) accept.
    params: list[tuple[str, str | int | float | bool | None]],
) -> None:
    response = _CLIENT[0].get("/api/records", params=params)
    assert response.status_code in (200, 400), response.text
    body = response.json()
    if response.status_code == 400:
        assert body["error"]
    else:
        assert body["count"] == len(body["records"])


@given(st.text(max_size=80))
def test_record_lookups_answer_200_or_404_never_500(record_id: str) -> None:
    response = _CLIENT[0].get("/api/records/" + quote(record_id, safe=":/"))
    assert response.status_code in (200, 404), response.text


@given(st.text(max_size=40))
def test_the_other_routes_ignore_any_query_string(query: str) -> None:
    before = table_rows(_STORE[0].engine)
    for route in ("/api/health", "/api/owners", "/api/scopes"):
        response = _CLIENT[0].get(route, params={"q": query})
        assert response.status_code == 200, response.text
    assert table_rows(_STORE[0].engine) == before
