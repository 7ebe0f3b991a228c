"""OpenTelemetry traces, an optional extra (`pip install 'memwarden[otel]'`).

On only when the extra is installed and the standard exporter variables name a collector
(`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), unless
`OTEL_SDK_DISABLED=true`. The OTLP exporter and the SDK read every other `OTEL_*` variable
themselves (protocol headers, sampler, `OTEL_SERVICE_NAME`, resource attributes…).

Spans: one per HTTP request (`TracingMiddleware`, continuing an incoming W3C `traceparent`),
and inside it the embedding, the screening, each SQL statement (`instrument_engine`) and each audit
chain append. Attributes are names, counts and route templates only: never content, queries,
parameters, paths, headers or tenant data. Off, each span point costs one attribute check.
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Any, Mapping

from sqlalchemy import event
from sqlalchemy.engine import Engine
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.observability import logs

log = logging.getLogger(__name__)

TRACER_NAME = "memwarden"
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_NOTHING = contextlib.nullcontext()
_SPANS_KEY = "memwarden.otel_spans"  # Connection.info: the open statement spans, innermost last

_tracer: Any = None
"""The OpenTelemetry tracer while tracing is on; None (the usual case) means every span point is a no-op."""
_configured = False


def enabled() -> bool:
    return _tracer is not None


def wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the environment asks for traces (an OTLP endpoint, and the SDK not disabled)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(environ.get(name) for name in ENDPOINT_VARIABLES)


def configure_from_env(environ: Mapping[str, str] = os.environ) -> bool:
    """Turn tracing on for this process when the environment asks and the extra is installed
    (once per process: each `serve` worker calls it as it builds its app). True when on."""
    global _configured
    if _configured or not wanted(environ):
        return enabled()
    _configured = True
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning("OTEL_EXPORTER_OTLP_ENDPOINT is set but the `otel` extra is not installed "
                    "(pip install 'memwarden[otel]'); no traces")
        return False
    resource = Resource.create({} if environ.get("OTEL_SERVICE_NAME") else {"service.name": "memwarden"})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))  # flushed at exit by the SDK
    install(provider)
    return True


def install(provider: Any) -> None:
    """Trace with this `TracerProvider` (tests pass one with an in-memory exporter)."""
    global _tracer
    _tracer = provider.get_tracer(TRACER_NAME)


def uninstall() -> None:
    global _tracer
    _tracer = None


def span(name: str, **attributes: Any):
    """A context manager: a child span of the current one while tracing is on, else nothing.
    `attributes` must be names and counts, never content."""
    if _tracer is None:
        return _NOTHING
    return _tracer.start_as_current_span(name, attributes=attributes or None)


# --- requests ------------------------------------------------------------------------------------

class TracingMiddleware:
    """A SERVER span per HTTP request, named `METHOD /route/{template}` once the router has matched."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if _tracer is None or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from opentelemetry import propagate, trace  # installed whenever a tracer is

        carrier = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope.get("headers", ())
                   if name in (b"traceparent", b"tracestate")}
        method = scope.get("method", "")
        with _tracer.start_as_current_span(method, context=propagate.extract(carrier), kind=trace.SpanKind.SERVER,
                                           attributes={"http.request.method": method}) as current:
            async def send_observed(message: Message) -> None:
                if message["type"] == "http.response.start":
                    status = message["status"]
                    current.set_attribute("http.response.status_code", status)
                    if status >= 500:
                        current.set_status(trace.Status(trace.StatusCode.ERROR))
                await send(message)

            try:
                await self.app(scope, receive, send_observed)
            finally:
                route = logs.route_template(scope)
                current.set_attribute("http.route", route)
                current.update_name(f"{method} {route}")
                request_id = scope.get("state", {}).get("request_id")
                if request_id:
                    current.set_attribute("memwarden.request_id", request_id)


# --- the database --------------------------------------------------------------------------------

def instrument_engine(engine: Engine) -> None:
    """A CLIENT span per SQL statement on `engine` run inside a traced request, named by its
    operation (`SELECT`, `INSERT`…); the statement text and parameters are not recorded. Background
    jobs' statements make no spans (thousands of lone root spans would bury the requests)."""
    event.listen(engine, "before_cursor_execute", _statement_started)
    event.listen(engine, "after_cursor_execute", _statement_ended)
    event.listen(engine, "handle_error", _statement_failed)


def _operation(statement: str) -> str:
    word = statement.lstrip().split(None, 1)[0].upper() if statement.strip() else ""
    return word if word.isalpha() and len(word) <= 16 else "SQL"


def _statement_started(conn, cursor, statement, parameters, context, executemany) -> None:
    if _tracer is None:
        return
    from opentelemetry import trace

    started = None  # pushed all the same, so the end pops its own start
    if trace.get_current_span().is_recording():
        operation = _operation(statement)
        started = _tracer.start_span(operation, kind=trace.SpanKind.CLIENT,
                                     attributes={"db.system.name": "postgresql", "db.operation.name": operation})
    conn.info.setdefault(_SPANS_KEY, []).append(started)


def _statement_ended(conn, cursor, statement, parameters, context, executemany) -> None:
    spans = conn.info.get(_SPANS_KEY)
    if spans:
        ended = spans.pop()
        if ended is not None:
            ended.end()


def _statement_failed(context) -> None:
    conn = context.connection
    spans = conn.info.get(_SPANS_KEY) if conn is not None else None
    if spans:
        from opentelemetry import trace

        failed = spans.pop()
        if failed is not None:
            failed.set_status(trace.Status(trace.StatusCode.ERROR, type(context.original_exception).__name__))
            failed.end()


def client_span(operation: str):
    """A CLIENT span for one SQL statement sent outside SQLAlchemy (`app.db.prepared`), like those
    `instrument_engine` makes, while a traced request is recording; else nothing."""
    if _tracer is None:
        return _NOTHING
    from opentelemetry import trace

    if not trace.get_current_span().is_recording():
        return _NOTHING
    return _tracer.start_as_current_span(operation, kind=trace.SpanKind.CLIENT,
                                         attributes={"db.system.name": "postgresql",
                                                     "db.operation.name": operation})
