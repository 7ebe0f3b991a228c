"""The outermost middleware: a request id for every request (echoed in `X-Request-ID`), the
request context of its log lines, and the HTTP metrics (rate, latency, status class per route)."""

from __future__ import annotations

import time
import uuid

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.middleware import header
from app.observability import logs, metrics


class RequestObservation:
    """Outside every other middleware, so 401s, 413s and 500s get their id and are counted too.

    An incoming `X-Request-ID` is kept when it is 1-64 characters of `A-Za-z0-9._-` (a proxy's id
    then follows the request through); anything else is replaced by a fresh one, never echoed.
    The id is also in `scope["state"]["request_id"]` for the error pages."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = logs.safe_request_id(header(scope, b"x-request-id")) or uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        token = logs.bind(logs.RequestContext(request_id, scope))
        started = time.perf_counter()
        status: int | None = None

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                MutableHeaders(scope=message)["x-request-id"] = request_id
                self._observe(scope, status, time.perf_counter() - started)
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except BaseException:
            if status is None:  # nothing was answered: the server will say 500 or cut the connection
                self._observe(scope, 500, time.perf_counter() - started)
            raise
        finally:
            logs.unbind(token)

    @staticmethod
    def _observe(scope: Scope, status: int, seconds: float) -> None:
        route, method = logs.route_template(scope), metrics.method_label(scope.get("method", ""))
        metrics.HTTP_REQUESTS.labels(route, method, metrics.status_class(status)).inc()
        metrics.HTTP_DURATION.labels(route, method).observe(seconds)
