"""The `/mcp` endpoint: the SDK's low-level MCP server over streamable HTTP, stateless with JSON
responses, so any worker serves any request.

The low-level `Server` rather than `MCPServer`: `MCPServer` derives input schemas from Python
signatures, whereas these tools publish and validate against the contract files in `schemas/`.
Authentication happens before the SDK sees the request (`ApiKeyAuth` covers `/mcp`): the
principal arrives in the Starlette request's state, exactly as for `/v1`.
"""

from __future__ import annotations

import contextlib
import json
import logging
from typing import Any, AsyncIterator
from urllib.parse import urlsplit

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from app import __version__
from app.api.idempotency import answer_once
from app.api.routes import note_key_write, require_scope
from app.contracts import default_contracts
from app.api.jsonio import json_response
from app.error_responses import as_app_error
from app.errors import AppError, Forbidden, NotFound
from app.mcp import resources
from app.middleware import header
from app.mcp.schemas import output_schema
from app.mcp.tools import TOOLS, Tool, v1_result_schemas, v1_scopes
from app.services.runtime import idempotency

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "Memwarden is a governed memory store. Every call acts for one agent_id your key is allowed; "
    "writes may be staged for human review (status 'pending' with change_id: poll change_status). "
    "Errors carry {\"error\": {\"code\", \"message\", \"details\"}}."
)
# A write tool call's `_meta` may carry an idempotency key: a retry with the same key and
# arguments gets the first answer back (flagged with REPLAYED_META) and writes nothing twice.
IDEMPOTENCY_META = "io.memwarden/idempotency-key"
REPLAYED_META = "io.memwarden/idempotent-replayed"


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def tool_result(body: dict[str, Any], replayed: bool = False) -> types.CallToolResult:
    """A successful call: the `/v1` response body, as structured content and as JSON text."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=_dump(body))], structured_content=body,
                                meta={REPLAYED_META: True} if replayed else None)


def tool_error(error: AppError) -> types.CallToolResult:
    """A failed call: the `/v1` error envelope as JSON text, flagged `isError` so the model sees it
    and can react. Not as structured content: a client checks structured content against the tool's
    output schema, which describes the success body, and the TypeScript SDK rejects the whole result
    (-32602) when it does not match; the spec carries tool errors in `content`."""
    envelope = error.envelope()
    return types.CallToolResult(content=[types.TextContent(type="text", text=_dump(envelope))], is_error=True)


def build_server() -> Server:
    """An MCP server whose tools are `TOOLS`, each checked with the scope of its `/v1` route."""
    tools = {tool.name: tool for tool in TOOLS}
    scopes = v1_scopes()
    results = v1_result_schemas()
    listing = types.ListToolsResult(tools=[
        types.Tool(name=t.name, title=t.name.replace("_", " ").capitalize(), description=t.description,
                   input_schema=t.input_schema(), output_schema=output_schema(results[t.route]),
                   annotations=types.ToolAnnotations(read_only_hint=t.read_only, destructive_hint=t.destructive,
                                                     idempotent_hint=t.read_only, open_world_hint=False))
        for t in TOOLS
    ])

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return listing

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            tool = tools.get(params.name)
            if tool is None:
                raise NotFound(f"no tool named {params.name[:64]!r}",
                               details=[{"path": "/name", "message": f"tools: {', '.join(tools)}"}])
            return await _call(tool, scopes[tool.route], ctx.request, params.arguments or {}, params.meta or {})
        except Exception as exc:  # every failure reaches the agent as the envelope /v1 would send
            return tool_error(as_app_error(exc))

    recall_tool = tools["recall"]
    templates = types.ListResourceTemplatesResult(resource_templates=[types.ResourceTemplate(
        name="recall", title="Recall", uri_template=resources.RECALL_TEMPLATE,
        description=resources.RECALL_DESCRIPTION, mime_type="application/json")])

    async def list_resources(ctx, params) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[])  # recall results exist per query: see the template

    async def list_resource_templates(ctx, params) -> types.ListResourceTemplatesResult:
        return templates

    async def read_resource(ctx, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        """A `memwarden://recall?...` URI read as the recall tool call it spells (same scope and schema)."""
        try:
            principal, args = _authorised(recall_tool, scopes[recall_tool.route], ctx.request,
                                          resources.recall_arguments(str(params.uri)))
            body = await run_in_threadpool(recall_tool.run, ctx.request.app.state.ctx, principal, args)
        except Exception as exc:  # a JSON-RPC error carrying the envelope /v1 would send
            error = as_app_error(exc)
            raise MCPError(code=types.INTERNAL_ERROR if error.status >= 500 else types.INVALID_PARAMS,
                           message=error.message, data=error.envelope()) from None
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=str(params.uri), mime_type="application/json", text=_dump(body))])

    return Server("memwarden", version=__version__, title="Memwarden", instructions=INSTRUCTIONS,
                  get_tool_input_schema=lambda name: tools[name].input_schema() if name in tools else None,
                  on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=list_resources,
                  on_list_resource_templates=list_resource_templates, on_read_resource=read_resource)


def _authorised(tool: Tool, scope: str | None, request: Request | None,
                arguments: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The caller (holding the `/v1` route's scope) and the arguments, validated against the tool's schema."""
    principal = request.scope.get("state", {}).get("principal") if request is not None else None
    require_scope(principal, scope)
    return principal, default_contracts().validate(tool.schema, tool.arguments(arguments))


async def _call(tool: Tool, scope: str | None, request: Request | None, arguments: dict[str, Any],
                meta: dict[str, Any]) -> types.CallToolResult:
    principal, args = _authorised(tool, scope, request, arguments)
    ctx = request.app.state.ctx
    if tool.read_only:
        return tool_result(await run_in_threadpool(tool.run, ctx, principal, args))
    try:
        return await _write(tool, ctx, principal, args, arguments, meta)
    finally:  # a failed write may have committed part of its work (or none: noting it is harmless)
        await note_key_write(ctx, principal)


async def _write(tool: Tool, ctx, principal, args: dict[str, Any], arguments: dict[str, Any],
                 meta: dict[str, Any]) -> types.CallToolResult:
    """A write tool's call, once per `Idempotency-Key` meta when the caller sent one."""
    if IDEMPOTENCY_META not in meta:
        return tool_result(await run_in_threadpool(tool.run, ctx, principal, args))
    key = idempotency.validate_key(meta[IDEMPOTENCY_META], where=f"/_meta/{IDEMPOTENCY_META.replace('/', '~1')}")
    request_fingerprint = idempotency.fingerprint(method="MCP", path=f"tools/{tool.name}", query="",
                                                  api_key_id=principal.key_id, body=_dump(arguments).encode())
    result = await answer_once(
        ctx, principal.tenant_id, key, request_fingerprint,
        lambda bound: run_in_threadpool(tool.run, bound, principal, args),
        lambda body: idempotency.StoredResponse(200, [], _dump(body).encode()))
    if isinstance(result, idempotency.StoredResponse):
        return tool_result(json.loads(result.body), replayed=True)
    return tool_result(result)


class OriginGuard:
    """Refuses (403) a request whose `Origin` is not allowed, as the streamable-HTTP transport
    requires of servers (against DNS rebinding: a page on another site must not drive the endpoint
    from a user's browser). Allowed: origins listed in `MEMWARDEN_MCP_ALLOWED_ORIGINS`, and a
    loopback origin naming the very host and port the request was sent to. A same-host rule alone
    would not do: a rebinding page's `Origin` and `Host` both name the attacker's site. Requests
    without `Origin` (agents, SDK clients) pass."""

    def __init__(self, app, allowed_origins: str):
        self.app = app
        self.allowed = {_normal_origin(o) for o in allowed_origins.split(",") if o.strip()}

    async def __call__(self, scope, receive, send) -> None:
        origin = header(scope, b"origin")
        if origin is not None and not self._allowed(origin, header(scope, b"host") or ""):
            error = Forbidden("this Origin may not call /mcp (see MEMWARDEN_MCP_ALLOWED_ORIGINS)",
                              details=[{"path": "/headers/Origin", "message": "origin not allowed"}])
            await json_response(error.envelope(), error.status)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _allowed(self, origin: str, host: str) -> bool:
        normal = _normal_origin(origin)
        if normal in self.allowed:
            return True
        parsed = urlsplit(normal)
        return (parsed.scheme in ("http", "https") and parsed.hostname in _LOOPBACK
                and parsed.netloc == _normal_host(host, parsed.scheme))


_LOOPBACK = {"localhost", "127.0.0.1", "::1"}


def _normal_origin(origin: str) -> str:
    """`scheme://host[:port]` lower-cased, without a default port or trailing slash."""
    parsed = urlsplit(origin.strip().lower())
    return f"{parsed.scheme}://{_normal_host(parsed.netloc, parsed.scheme)}"


def _normal_host(netloc: str, scheme: str) -> str:
    host = netloc.strip().lower()
    default = {"http": ":80", "https": ":443"}.get(scheme)
    return host[: -len(default)] if default and host.endswith(default) else host


class McpEndpoint:
    """The ASGI app to mount at `/mcp` and the session manager the app's lifespan must run."""

    def __init__(self, max_body_bytes: int, allowed_origins: str = ""):
        self.server = build_server()
        self.sessions = StreamableHTTPSessionManager(self.server, json_response=True, stateless=True,
                                                     max_request_body_size=max_body_bytes)
        self.asgi = OriginGuard(StreamableHTTPASGIApp(self.sessions), allowed_origins)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run for the app's lifetime (the SDK's task group for per-request server tasks)."""
        async with self.sessions.run():
            yield
