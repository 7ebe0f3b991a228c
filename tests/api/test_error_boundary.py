"""An unhandled exception is answered with a complete 500 that closes the connection cleanly and
carries the security headers; 4xx from middleware and 405s carry them too (and 405 names `Allow`)."""

from __future__ import annotations

import http.client
import threading
import time

import pytest
import uvicorn
from starlette.routing import Route

from app.api.routes import ApiRoute
from app.main import create_app
from app.middleware import SECURITY_HEADERS
from tests.harness import bearer, free_port
from tests.schema_check import assert_error


async def _boom_page(request):
    raise RuntimeError("boom (test-only route)")


async def _boom_api(request, principal):
    raise RuntimeError("boom (test-only API route)")


def _app_with_failing_routes(ctx):
    app = create_app(ctx.settings, ctx=ctx)
    app.router.routes.insert(0, Route("/boom", _boom_page, methods=["GET"]))
    app.router.routes.insert(0, ApiRoute("/v1/boom", _boom_api, method="GET", summary="test", scope=None))
    return app


def _assert_security_headers(headers) -> None:
    for name, value in SECURITY_HEADERS.items():
        assert headers.get(name) == value, name


@pytest.fixture
def failing_client(ctx):
    from starlette.testclient import TestClient

    with TestClient(_app_with_failing_routes(ctx), raise_server_exceptions=False) as client:
        yield client


def test_api_500_is_an_envelope_with_security_headers_and_connection_close(failing_client, make_key):
    response = failing_client.get("/v1/boom", headers=bearer(make_key()))
    error = assert_error(response, 500, "internal_error")
    assert "boom" not in error["message"]  # the exception text stays in the log
    assert response.headers["connection"] == "close"
    _assert_security_headers(response.headers)


def test_page_500_has_security_headers(failing_client):
    response = failing_client.get("/boom")
    assert response.status_code == 500
    assert response.headers["connection"] == "close"
    _assert_security_headers(response.headers)


def test_middleware_4xx_and_405_carry_security_headers(client, make_key):
    unauthorized = client.get("/v1/whoami")
    assert_error(unauthorized, 401, "unauthorized")
    _assert_security_headers(unauthorized.headers)
    too_large = client.post("/v1/memories/remember", content=b"x" * 3_000_000,
                            headers={**bearer(make_key()), "content-type": "application/json"})
    assert_error(too_large, 413, "payload_too_large")
    _assert_security_headers(too_large.headers)
    wrong_method = client.put("/v1/memories/mem_00000000000000000000000000", headers=bearer(make_key()))
    assert_error(wrong_method, 405, "method_not_allowed")
    _assert_security_headers(wrong_method.headers)
    assert {m.strip() for m in wrong_method.headers["allow"].split(",")} >= {"GET", "DELETE"}


def test_real_server_answers_a_500_completely_and_closes_the_connection(ctx):
    """Over a real uvicorn socket: the 500 arrives whole with `Connection: close`, then EOF — not a reset."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(_app_with_failing_routes(ctx), host="127.0.0.1", port=port,
                                           log_level="critical", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        conn.request("GET", "/healthz")
        ok = conn.getresponse()
        ok.read()
        assert ok.status == 200 and not ok.will_close  # keep-alive before the failure
        conn.request("GET", "/boom", headers={"Accept": "application/json"})
        failed = conn.getresponse()
        body = failed.read()
        assert failed.status == 500
        assert failed.getheader("connection") == "close" and failed.will_close
        assert b"internal_error" in body
        _assert_security_headers({k.lower(): v for k, v in failed.getheaders()})
        assert conn.sock is None  # http.client closed it as announced; nothing was reset under us
    finally:
        server.should_exit = True
        thread.join(10)
