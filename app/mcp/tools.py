"""The MCP tools. Each one is a `/v1` call under another name: the same request schema, the same
scope (read off the `/v1` route), the same service function. No business rule lives here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from app.api import changes as changes_api
from app.api import memories as memories_api
from app.api.routes import ApiRoute, prefixed_id
from app.core.access import Principal
from app.services.memory import memories, reads, recall, remembering
from app.services.review import changes
from app.services.runtime.context import AppContext

Runner = Callable[[AppContext, Principal, dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class Tool:
    """One MCP tool and the `/v1` endpoint it mirrors."""

    name: str
    description: str
    schema: str
    """The request schema in `schemas/` (input schema and validation)."""
    route: tuple[str, str]
    """(method, path) of the `/v1` route whose scope this tool requires."""
    run: Runner
    """Blocking service call (database, embedding); run in the thread pool."""
    read_only: bool
    destructive: bool = False
    defaults: tuple[tuple[str, Any], ...] = ()
    """Arguments the tool fills in when the caller leaves them out, as the Python client does
    (remember's `type` is `semantic`); the tool's input schema marks them optional, with the default."""

    def input_schema(self) -> dict[str, Any]:
        """The request schema made self-contained, with `defaults` optional."""
        from app.mcp.schemas import input_schema

        schema = input_schema(self.schema)
        if self.defaults:
            names = dict(self.defaults)
            schema = dict(schema)  # the inlined schema is cached and shared
            schema["required"] = [name for name in schema.get("required", []) if name not in names]
            schema["properties"] = {name: {**spec, "default": names[name]} if name in names else spec
                                    for name, spec in schema["properties"].items()}
        return schema

    def arguments(self, given: dict[str, Any]) -> dict[str, Any]:
        return {**dict(self.defaults), **given}


def _body(service: Callable[[AppContext, Principal, dict[str, Any]], memories.Outcome]) -> Runner:
    """A mutation's response body: 201/200 as done, 202 as `{"status":"pending","change_id","review_url"}`."""
    return lambda ctx, principal, args: service(ctx, principal, args).body


def _get(ctx: AppContext, principal: Principal, args: dict[str, Any]) -> dict[str, Any]:
    return reads.get_memory(ctx, principal, prefixed_id(args["id"], "mem", "memory"), args.get("as_of"))


def _history(ctx: AppContext, principal: Principal, args: dict[str, Any]) -> dict[str, Any]:
    return reads.history(ctx, principal, prefixed_id(args["id"], "mem", "memory"))


def _change_status(ctx: AppContext, principal: Principal, args: dict[str, Any]) -> dict[str, Any]:
    change_id = prefixed_id(args["id"], "chg", "change")
    return changes.get_change_for_key(ctx, principal, change_id)


TOOLS: tuple[Tool, ...] = (
    Tool("remember", "Store a memory for an agent. Returns the stored entry, or — when a tenant policy "
         "or approval_required asks for review — status 'pending' with change_id and review_url "
         "(poll change_status). Secret-shaped values are redacted first.",
         "remember.request", ("POST", "/v1/memories/remember"), _body(remembering.remember), read_only=False,
         defaults=(("type", "semantic"),)),
    Tool("recall", "Hybrid (semantic + keyword) search over one agent's live memories, best first.",
         "recall.request", ("POST", "/v1/memories/recall"), recall.recall, read_only=True),
    Tool("forget", "Forget memories by ids and/or a metadata filter (soft delete unless hard_delete); "
         "may be staged for review.",
         "forget.request", ("POST", "/v1/memories/forget"), _body(memories.forget), read_only=False,
         destructive=True),
    Tool("merge", "Merge duplicate memories into a canonical one; may be staged for review.",
         "merge.request", ("POST", "/v1/memories/merge"), _body(memories.merge), read_only=False,
         destructive=True),
    Tool("expire", "Apply a TTL policy (forget, archive or demote what matches); may be staged for review.",
         "expire.request", ("POST", "/v1/memories/expire"), _body(memories.expire), read_only=False,
         destructive=True),
    Tool("get", "One memory by id (as of an instant, optionally).",
         "mcp-get.request", ("GET", "/v1/memories/{memory_id}"), _get, read_only=True),
    Tool("list", "An agent's memories, newest first, with a cursor for the next page.",
         "list.query", ("GET", "/v1/memories"), reads.list_memories, read_only=True),
    Tool("history", "A memory's audit trail, oldest first (identifiers and digests, never content).",
         "mcp-history.request", ("GET", "/v1/memories/{memory_id}/history"), _history, read_only=True),
    Tool("change_status", "A staged change: pending, approved, rejected or withdrawn, with who decided and why.",
         "mcp-change-status.request", ("GET", "/v1/changes/{change_id}"), _change_status, read_only=True),
)


def _v1_operations() -> dict[tuple[str, str], Any]:
    routes = [*memories_api.routes, *changes_api.routes]
    return {(r.operation.method, r.operation.path): r.operation for r in routes if isinstance(r, ApiRoute)}


def v1_scopes() -> dict[tuple[str, str], str | None]:
    """The scope each mirrored `/v1` route requires, by (method, path)."""
    return {key: operation.scope for key, operation in _v1_operations().items()}


def v1_result_schemas() -> dict[tuple[str, str], tuple[str, ...]]:
    """The response schemas of each mirrored `/v1` route's successes (a tool's results), by (method, path)."""
    return {key: tuple(name for status, name in sorted(operation.responses.items())
                       if 200 <= status < 300 and isinstance(name, str))
            for key, operation in _v1_operations().items()}
