"""Schemathesis over every `/v1` operation of `/openapi.json`: no 5xx, no response that breaks
its documented schema.

The app runs in-process (ASGI) on a real PostgreSQL with real commits (`committed_ctx`, a fresh
tenant) and the real embedding model, called with a key that has every scope. Examples are
bounded and derandomized, so a run is repeatable and takes about a minute.

`GET /v1/events` follows the stream live unless told otherwise; every generated request to it
gets `once=true` (replay the backlog, then close) so a case always terminates — the other
parameters and the `Last-Event-ID` header stay fuzzed.
"""

from __future__ import annotations

from typing import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import content_type_conformance, response_schema_conformance
from sqlalchemy import delete

from app.api.openapi import build_openapi
from app.db.models import Webhook
from app.main import api_routes, create_app
from tests.harness import bearer

pytestmark = pytest.mark.slow
ALL_SCOPES = "memory:read,memory:write,review:decide,audit:read,workspace:read,workspace:write,events:read,admin"
CHECKS = [not_a_server_error, response_schema_conformance, content_type_conformance]


@pytest.fixture(scope="module")
def fuzz_key(committed_ctx) -> Iterator[str]:
    """A key with every scope in a fresh tenant. Afterwards the tenant's webhooks (and their pending
    deliveries) go: the fuzzer registers reachable-looking receivers, and their deliveries would
    otherwise sit in the queue of every later test that runs the delivery job."""
    from app.services.tenancy.apikeys import create_key
    from app.services.tenancy.tenants import create_tenant
    from tests.harness import unique

    tenant = create_tenant(committed_ctx, name=unique("fuzz"), actor={"kind": "test", "id": "pytest"})
    yield create_key(committed_ctx, tenant_id=tenant.id, scopes=ALL_SCOPES, agents="*",
                     actor={"kind": "test", "id": "pytest"}).token
    with committed_ctx.db.sessions.begin() as session:
        session.execute(delete(Webhook).where(Webhook.tenant_id == tenant.id))


@pytest.fixture(scope="module")
def asgi_app(committed_ctx):
    """The app without its lifespan: schemathesis' ASGI client would start one per client, and the
    injected test context needs none (no background jobs, no MCP sessions under test here)."""
    app = create_app(committed_ctx.settings, ctx=committed_ctx)

    async def without_lifespan(scope, receive, send):
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        await app(scope, receive, send)

    return without_lifespan


# The document `/openapi.json` serves (test_openapi checks it covers every route), built at import
# because schemathesis parametrizes at collection time.
schema = schemathesis.openapi.from_dict(build_openapi(api_routes()))


@schema.parametrize()
@settings(max_examples=15, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
def test_no_server_errors_and_responses_match_their_schemas(case, asgi_app, fuzz_key):
    if case.path == "/v1/events":
        case.query = {**(case.query or {}), "once": "true"}
    case.call_and_validate(app=asgi_app, base_url="http://testserver", headers=bearer(fuzz_key), checks=CHECKS)
