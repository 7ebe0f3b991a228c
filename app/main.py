"""`create_app(settings)`: routes, middleware, error handling and lifespan. Wiring only."""

from __future__ import annotations

import contextlib
import logging
from typing import AsyncIterator

from sqlalchemy.exc import OperationalError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from app.api import auth as api_auth
from app.api import health, openapi, wellknown
from app.config import Settings
from app.error_responses import handle_exception
from app.errors import AppError
from app.mcp import PATH as MCP_PATH
from app.mcp.server import McpEndpoint
from app.middleware import BodyLimit, ErrorBoundary, RejectUnstorableInput, SecurityHeaders
from app.observability import endpoint as metrics_endpoint
from app.observability import metrics
from app.observability.requests import RequestObservation
from app.observability.tracing import TracingMiddleware, configure_from_env
from app.paths import STATIC_DIR
from app.services.runtime.context import AppContext
from app.services.tenancy.oidc_client import OidcClient
from app.web import admin as admin_pages
from app.web import audit as audit_pages
from app.web import home, login
from app.web import incident as incident_pages
from app.web import memories as memory_pages
from app.web import oidc as oidc_pages
from app.web import review as review_pages
from app.web import review_stream
from app.web.auth import LoginRequired, SessionCookies, WebAuth, login_redirect
from app.web.csrf import CsrfProtect, CsrfTokens

log = logging.getLogger(__name__)
STARTUP_DATABASE_WAIT_SECONDS = 30.0


def api_routes() -> list:
    """Every bearer-key API route (`/v1`, `/memorywire/v0`), in one list (also what OpenAPI describes)."""
    from app.api import audit as audit_api
    from app.api import (changes, consolidation, events, memories, memorywire, meta, policy, recover, refs,
                         webhooks, workspace)

    return [*meta.routes, *memories.routes, *changes.routes, *audit_api.routes, *refs.routes, *events.routes,
            *webhooks.routes, *workspace.routes, *recover.routes, *consolidation.routes, *policy.routes, *memorywire.routes]


def create_app(settings: Settings | None = None, *, ctx: AppContext | None = None) -> Starlette:
    """Build the ASGI app. With `ctx` given (tests), it is used as is and not closed on shutdown."""
    settings = settings or (ctx.settings if ctx else Settings.from_env())
    configure_from_env()  # OpenTelemetry, when the `otel` extra and an OTLP endpoint are there

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        owned = app.state.ctx is None
        if owned:
            # A worker starting while the embedded database restarts waits for it, not dies.
            app.state.ctx = AppContext.open(settings, wait_seconds=STARTUP_DATABASE_WAIT_SECONDS)
            from app.services.tenancy.users import warm_up

            warm_up(app.state.ctx)  # before the first sign-in: its refusal costs what any other does
            if app.state.ctx.contradiction_model is None:  # loaded now, before a review page needs it (~1.5 s)
                log.info("contradiction model off: approvals retire what the rules read as replaced")
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(mcp.running())
            if owned:  # an injected (test) context runs no background jobs
                from app.services.runtime.background import start_background_jobs

                stack.callback(app.state.ctx.close)
                stack.callback(metrics.forget_this_process)  # runs last: after the pool is closed
                await stack.enter_async_context(start_background_jobs(app.state.ctx))
                from app.services.events.event_hub import EventHub  # SSE wake-ups; injected contexts poll

                app.state.event_hub = EventHub(app.state.ctx.db.engine)
                stack.push_async_callback(app.state.event_hub.close)
            yield

    mcp = McpEndpoint(max_body_bytes=settings.max_body_bytes, allowed_origins=settings.mcp_allowed_origins)
    routes = [
        *health.routes,
        *openapi.routes,
        *wellknown.routes,
        *metrics_endpoint.routes,
        *api_routes(),
        Route(MCP_PATH, mcp.asgi, name="mcp"),
        *home.routes,
        *login.routes,
        *oidc_pages.routes,
        *review_stream.routes,  # before /review/{change_id}
        *review_pages.routes,
        *memory_pages.routes,
        *audit_pages.routes,
        *incident_pages.routes,
        *admin_pages.routes,
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    secret = (ctx.settings if ctx else settings).resolved_secret_key()
    middleware = [
        Middleware(RequestObservation),  # outermost: every answer gets its request id and is counted
        Middleware(TracingMiddleware),  # a span per request when OpenTelemetry is on (configure_from_env)
        Middleware(SecurityHeaders),
        Middleware(ErrorBoundary),  # inside SecurityHeaders: even a 500 carries CSP & co.
        Middleware(BodyLimit, max_bytes=settings.max_body_bytes),
        Middleware(RejectUnstorableInput),
        Middleware(WebAuth, cookies=SessionCookies(secret)),
        Middleware(CsrfProtect, tokens=CsrfTokens(secret)),  # inside WebAuth: tokens bind to the session
        Middleware(api_auth.ApiKeyAuth, limiter=api_auth.RateLimiter(settings.rate_limit_per_minute)),
    ]
    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={
            LoginRequired: lambda request, exc: login_redirect(request),
            AppError: handle_exception, HTTPException: handle_exception,
            OperationalError: handle_exception, Exception: handle_exception,
        },
        lifespan=lifespan,
    )
    app.state.ctx = ctx
    app.state.session_cookies = SessionCookies(secret)
    app.state.settings = settings
    app.state.oidc = OidcClient(settings) if settings.oidc_issuer else None  # discovery waits for first use
    return app
