"""A real `memwarden serve` with the `otel` extra and `OTEL_EXPORTER_OTLP_ENDPOINT` set sends its
request's spans over OTLP/HTTP to a collector (here a plain HTTP receiver that decodes the
protobuf): the wiring from the standard environment variables to the exporter, in a worker process."""

import time

import httpx
import pytest

from tests.harness import bearer, start_server, stop_server, unique
from tests.http_receiver import Receiver

pytest.importorskip("opentelemetry.sdk", reason="the `otel` extra is not installed")

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402


def test_serve_exports_a_requests_spans_to_the_otlp_endpoint(settings, live_key):
    receiver = Receiver()
    collector = receiver.url.rsplit("/", 1)[0]
    proc, base = start_server(settings, OTEL_EXPORTER_OTLP_ENDPOINT=collector, OTEL_BSP_SCHEDULE_DELAY="100")
    try:
        secret = unique("never-exported")
        response = httpx.post(f"{base}/v1/memories/remember", headers=bearer(live_key()), timeout=30,
                              json={"agent_id": "agent-a", "type": "semantic", "content": f"The word is {secret}."})
        assert response.status_code in (201, 202), response.text
        deadline, names = time.monotonic() + 20, set()
        while time.monotonic() < deadline and "POST /v1/memories/remember" not in names:
            time.sleep(0.2)
            for _headers, body in list(receiver.requests):
                for resource_spans in ExportTraceServiceRequest.FromString(body).resource_spans:
                    service = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                    assert service["service.name"] == "memwarden"
                    names |= {s.name for scope in resource_spans.scope_spans for s in scope.spans}
        assert {"POST /v1/memories/remember", "memwarden.embed", "memwarden.screen", "memwarden.audit.append",
                "INSERT"} <= names
        assert all(secret.encode() not in body for _, body in receiver.requests)
        assert all(path_headers.get("content-type") == "application/x-protobuf" for path_headers, _ in receiver.requests)
    finally:
        stop_server(proc)
        receiver.close()
