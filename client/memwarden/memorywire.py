"""memorywire on Memwarden: `MemwardenStore`, a `memorywire.store.MemoryStore`.

    from memorywire import MemoryRouter
    from memwarden.client import AsyncClient
    from memwarden.memorywire import MemwardenStore

    store = MemwardenStore(AsyncClient(url, api_key=key))
    router = MemoryRouter([store, other_store])        # memorywire fans out to Memwarden too

Install with `pip install 'memwarden-client[memorywire]'`. Each operation is one call to the
server's memorywire wire surface (`POST /memorywire/v0/<operation>`), whose answers are memorywire's
own response shapes, so this store only converts between memorywire's models and JSON:

- Governance arrives through memorywire's channel: a write a review policy stages (or that asks
  `approval_required`) answers `pending_approval=True` with `approval_url`, the change's review page,
  and stays invisible to recall until a reviewer approves it. A staged remember's `id` is the id the
  memory gets once approved.
- `hops` is honoured by the server: hits of one result set linked by merge or supersede links
  boost each other (memorywire's formula); nothing is added. There is no `neighbors` call, so the
  store does not declare `graph` and the router's own boost skips it.
- A request the server refuses as invalid (forget or expire without a scope, a bad field) raises
  `InvalidRequest`, which is both memorywire's `ValueError` and Memwarden's `ValidationError`
  (with `details`). Other errors are Memwarden's (`memwarden.errors`), never swallowed.
- `k` above 1000 (the router over-fetches `k * 4`) is asked as 1000, the server's maximum.
"""

from __future__ import annotations

from typing import Any, TypeVar

from memorywire.models import (
    ExpireRequest,
    ExpireResponse,
    ForgetRequest,
    ForgetResponse,
    MergeRequest,
    MergeResponse,
    RecallRequest,
    RecallResponse,
    RememberRequest,
    RememberResponse,
)
from memorywire.store.base import Capability
from pydantic import BaseModel

from memwarden import errors
from memwarden.client import AsyncClient, _Call

PREFIX = "/memorywire/v0"
MAX_K = 1000

Response = TypeVar("Response", bound=BaseModel)


class InvalidRequest(errors.ValidationError, ValueError):
    """422 from the server: memorywire's `ValueError`, with Memwarden's `code` and `details`."""


class MemwardenStore:
    """A memorywire `MemoryStore` whose memories are governed by a Memwarden server (see the module
    docstring). `client` is a `memwarden.client.AsyncClient` holding a key with `memory:read` and
    `memory:write`; the store does not close it."""

    BACKEND_NAME = "memwarden"
    """memorywire's router names a store by this (`stores_queried`, fusion weights)."""

    def __init__(self, client: AsyncClient):
        self._client = client

    @property
    def capabilities(self) -> set[str]:
        """What the server honours: every memory type, vector and full-text recall, governance
        (review), and recall tracking (for `expire(policy={"no_recall_in_days": n})`)."""
        return {Capability.SEMANTIC, Capability.EPISODIC, Capability.PROCEDURAL, Capability.EMOTIONAL,
                Capability.VECTOR, Capability.FTS, Capability.GOVERNANCE, Capability.RECALL_TRACKING}

    async def remember(self, req: RememberRequest) -> RememberResponse:
        """Store (or stage for review) one memory."""
        return await self._post("remember", req, RememberResponse)

    async def recall(self, req: RecallRequest) -> RecallResponse:
        """Hybrid recall on the server, in memorywire's result shape (`source_store="memwarden"`)."""
        if req.k is not None and req.k > MAX_K:
            req = req.model_copy(update={"k": MAX_K})
        return await self._post("recall", req, RecallResponse, read_only=True)

    async def forget(self, req: ForgetRequest) -> ForgetResponse:
        """Forget by ids and/or a metadata filter (never without one: `InvalidRequest`)."""
        return await self._post("forget", req, ForgetResponse)

    async def merge(self, req: MergeRequest) -> MergeResponse:
        """Merge duplicates into the canonical memory (ids are Memwarden's `mem_…`)."""
        return await self._post("merge", req, MergeResponse)

    async def expire(self, req: ExpireRequest) -> ExpireResponse:
        """Apply a TTL policy (an empty policy is refused: `InvalidRequest`)."""
        return await self._post("expire", req, ExpireResponse)

    async def health(self) -> dict[str, Any]:
        """The server's readiness (`/readyz`): `{"status": "ok"}` when it can serve, else `"error"`."""
        try:
            await self._client._run(_Call("GET", "/readyz", parse=dict))
        except errors.MemwardenError as exc:
            return {"status": "error", "backend": self.BACKEND_NAME, "error": exc.code}
        return {"status": "ok", "backend": self.BACKEND_NAME}

    async def _post(self, operation: str, req: BaseModel, model: type[Response], read_only: bool = False) -> Response:
        body = req.model_dump(mode="json", exclude_none=True)
        try:
            answer = await self._client._run(_Call("POST", f"{PREFIX}/{operation}", parse=dict, body=body,
                                                   read_only=read_only))
        except errors.ValidationError as exc:
            raise InvalidRequest(exc.code, exc.message, details=exc.details, status=exc.status,
                                 headers=exc.headers) from exc
        return model.model_validate(answer)

    def __repr__(self) -> str:
        return f"MemwardenStore({self._client.base_url!r})"


__all__ = ["InvalidRequest", "MemwardenStore"]
