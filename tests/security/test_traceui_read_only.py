"""The trace UI never mutates and never serves files outside its own assets.

A real server (uvicorn on loopback) over a trace opened read-only: every route
answers 405 to every method other than GET/HEAD and the trace file's bytes
never change; the static route refuses every traversal (``..``, encoded
``%2e%2e``, encoded slashes, absolute paths, backslashes) sent as raw request
lines, so no client-side URL normalization hides an attack.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from goatherd.infrastructure.store import SQLiteTraceStore, open_trace_store_read_only
from goatherd.infrastructure.traceui import TraceUiServer
from goatherd.infrastructure.traceui.app import STATIC_DIR
from tests.infrastructure.traceui.trace import build_trace
from tests.security.files import trace_bytes

pytestmark = pytest.mark.integration

ROUTES = (
    "/",
    "/api/health",
    "/api/records",
    "/api/records/sha256:abc",
    "/api/owners",
    "/api/scopes",
    "/api/events",
    "/static/app.js",
    "/static/index.html",
    "/static/missing.js",
)
WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")
SECRET = "goatherd-security-canary-7f3a"


@pytest.fixture
def trace_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "db"
    directory.mkdir()
    with SQLiteTraceStore(directory / "trace.sqlite") as store:
        build_trace(store)
    # A file beside the trace and one beside the assets' parent: neither may leak.
    (tmp_path / "secret.txt").write_text(SECRET)
    return directory


@pytest.fixture
def server(trace_dir: Path) -> Iterator[TraceUiServer]:
    store = open_trace_store_read_only(trace_dir / "trace.sqlite")
    try:
        with TraceUiServer(store) as running:
            yield running
    finally:
        store.close()


def raw_get(url: str, target: str) -> tuple[int, bytes]:
    """Send ``GET target`` verbatim and return (status, body)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        request = (
            f"GET {target} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n"
        )
        conn.sendall(request.encode("latin-1"))
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    response = b"".join(chunks)
    status = int(response.split(b" ", 2)[1]) if response else 0
    return status, response.partition(b"\r\n\r\n")[2]


@pytest.mark.parametrize("method", WRITE_METHODS)
def test_every_route_refuses_every_writing_method_and_the_file_is_unchanged(
    trace_dir: Path, server: TraceUiServer, method: str
) -> None:
    before = trace_bytes(trace_dir)
    with httpx.Client(base_url=server.url, timeout=10) as client:
        for route in ROUTES:
            response = client.request(method, route, content=b'{"x":1}')
            assert response.status_code == 405, (route, response.text)
        # Reads still work and the file is byte-identical afterwards.
        assert client.get("/api/records").status_code == 200
    assert trace_bytes(trace_dir) == before


TRAVERSALS = (
    "/static/../app.py",
    "/static/../../../../etc/passwd",
    "/static/%2e%2e/app.py",
    "/static/%2E%2E/%2E%2E/store/store.py",
    "/static/%2e%2e%2fapp.py",
    "/static/..%2fapp.py",
    "/static/..%2F..%2F..%2F..%2F..%2Fsecret.txt",
    "/static/%252e%252e/app.py",
    "/static//etc/passwd",
    "/static/%2fetc%2fpasswd",
    "/static/..\\app.py",
    "/static/..%5capp.py",
    "/static/app.js/../../app.py",
    "/static/%00../app.py",
    "/static/" + "../" * 12 + "etc/passwd",
    "/../goatherd/infrastructure/traceui/app.py",
    "/%2e%2e/app.py",
    "/api/records/../../app.py",
)


@pytest.mark.parametrize("target", TRAVERSALS)
def test_the_static_route_never_serves_a_file_outside_its_assets(
    server: TraceUiServer, target: str
) -> None:
    status, body = raw_get(server.url, target)
    assert b"def create_app" not in body
    assert b"root:x:0:0" not in body
    assert SECRET.encode() not in body
    assert b"SqlAlchemyTraceStore" not in body
    served = {p.read_bytes() for p in STATIC_DIR.iterdir() if p.is_file()}
    if status == 200:
        # Only an asset (or the API's JSON) may ever come back.
        assert body in served or body.startswith(b"{"), (target, body[:80])
    else:
        assert status in (400, 404, 405), (target, status)


def test_the_assets_themselves_are_served(server: TraceUiServer) -> None:
    for asset in sorted(p.name for p in STATIC_DIR.iterdir() if p.is_file()):
        status, body = raw_get(server.url, f"/static/{asset}")
        assert status == 200
        assert body == (STATIC_DIR / asset).read_bytes()
