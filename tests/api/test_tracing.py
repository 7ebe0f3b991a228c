"""OpenTelemetry traces (the `otel` extra): a request through the real app and PostgreSQL is one
trace, continuing the caller's `traceparent`, with the embedding, the screening, the SQL statements
and the audit append nested under the request's span, and no content in any attribute. The spans
go to the SDK's in-memory exporter instead of an OTLP collector; everything else is real."""

import pytest

from app.observability import tracing
from app.services.tenancy.tenant_config import set_policy
from tests.harness import bearer, unique

pytest.importorskip("opentelemetry.sdk", reason="the `otel` extra is not installed")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind  # noqa: E402

TRACE_ID, CALLER_SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.install(provider)
    yield exporter
    tracing.uninstall()
    provider.shutdown()


@pytest.fixture
def headers(ctx, tenant, make_key):
    set_policy(ctx, tenant_id=tenant.id, doc={"rules": []}, actor={"kind": "test", "id": "t"})
    return bearer(make_key())


def _ancestors(span, by_id):
    while span.parent is not None and span.parent.span_id in by_id:
        span = by_id[span.parent.span_id]
        yield span


def test_a_remember_request_is_one_trace_with_nested_spans_and_no_content(client, headers, spans):
    secret = unique("launch-word")
    content = f"The launch code word for the rocket is {secret}."
    # From the user: a secret-shaped word is a high-impact fact, which an unstated source would stage.
    response = client.post("/v1/memories/remember", json={"agent_id": "agent-a", "type": "semantic",
                                                          "content": content, "source": "user"},
                           headers={**headers, "traceparent": f"00-{TRACE_ID}-{CALLER_SPAN}-01"})
    assert response.status_code == 201, response.text

    finished = spans.get_finished_spans()
    by_id = {s.context.span_id: s for s in finished}
    [request] = [s for s in finished if s.kind == SpanKind.SERVER]
    assert request.name == "POST /v1/memories/remember"
    assert request.attributes["http.route"] == "/v1/memories/remember"
    assert request.attributes["http.response.status_code"] == 201
    # The caller's trace continues: same trace id, the caller's span as parent.
    assert f"{request.context.trace_id:032x}" == TRACE_ID and f"{request.parent.span_id:016x}" == CALLER_SPAN

    inside = [s for s in finished if request in _ancestors(s, by_id)]
    names = {s.name for s in inside}
    assert {"memwarden.embed", "memwarden.screen", "memwarden.audit.append", "SELECT", "INSERT"} <= names
    [screen] = [s for s in inside if s.name == "memwarden.screen"]
    assert any(screen in _ancestors(s, by_id) for s in inside if s.name == "SELECT")  # its nearest-memory search
    [audit] = [s for s in inside if s.name == "memwarden.audit.append"]
    assert audit.attributes["memwarden.audit.entries"] >= 1
    assert all(s.attributes["db.system.name"] == "postgresql" for s in inside if s.kind == SpanKind.CLIENT)

    for span in finished:  # neither the content nor the key in any attribute or span name
        text = span.name + repr(dict(span.attributes or {}))
        assert secret not in text and "launch code" not in text and headers["Authorization"][7:] not in text


def test_nothing_is_traced_while_tracing_is_off(client, headers, spans):
    tracing.uninstall()
    response = client.post("/v1/memories/remember", json={"agent_id": "agent-a", "type": "semantic",
                                                          "content": "An untraced note."}, headers=headers)
    assert response.status_code == 201 and spans.get_finished_spans() == ()


def test_only_an_otlp_endpoint_turns_tracing_on():
    assert not tracing.wanted({})
    assert not tracing.wanted({"OTEL_SERVICE_NAME": "memwarden"})
    assert tracing.wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert tracing.wanted({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"})
    assert not tracing.wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318", "OTEL_SDK_DISABLED": "true"})


def test_an_embedding_started_before_the_key_check_is_traced_inside_its_request(client, headers, spans):
    first = client.post("/v1/memories/remember", headers=headers,
                        json={"agent_id": "agent-a", "type": "semantic", "content": "A warm-up fact."})
    assert first.status_code == 201, first.text  # the key is now one verified here lately
    spans.clear()
    response = client.post("/v1/memories/recall", json={"agent_id": "agent-a", "query": "which fact?"},
                           headers={**headers, "traceparent": f"00-{TRACE_ID}-{CALLER_SPAN}-01"})
    assert response.status_code == 200, response.text
    finished = spans.get_finished_spans()
    by_id = {s.context.span_id: s for s in finished}
    [request] = [s for s in finished if s.kind == SpanKind.SERVER]
    [embed] = [s for s in finished if s.name == "memwarden.embed"]
    assert request in _ancestors(embed, by_id)
