"""HTTP client for Memwarden's `/v1` API, sync (`Client`) and async (`AsyncClient`), on httpx.

    from memwarden.client import Client

    with Client() as mw:                       # MEMWARDEN_URL and MEMWARDEN_API_KEY from the environment
        saved = mw.remember(agent_id="support-bot", type="semantic", content="Ana prefers email.")
        if saved.pending:                      # a policy staged it: a reviewer decides
            print("review at", saved.review_url)
        for hit in mw.recall(agent_id="support-bot", query="how to contact Ana?").hits:
            print(hit.similarity, hit.content)  # cosine to the query; hit.score is the fused rank

Retries: reads are retried on connection errors, 429, 502, 503 and 504 with exponential backoff
(honouring `Retry-After`). Every write (POST, DELETE) carries an `Idempotency-Key` — a fresh
uuid4 per logical call, the same on each retry — so a write whose answer was lost is retried
without being applied twice. Errors raise `memwarden.errors.MemwardenError` subclasses.

Both clients share one definition of every call (`_Calls`): a method builds a `_Call` (HTTP method,
path, body, how to parse the answer) and hands it to the client's `_run`, which is blocking in
`Client` and a coroutine in `AsyncClient` (so `await mw.remember(...)` there).
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import os
import random
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, AsyncIterator, Awaitable, Callable, Generic, Iterable, Iterator, TypeVar
from urllib.parse import quote

import httpx

from memwarden import errors
from memwarden.models import (
    Change, ChangeDiff, ChangePage, Checkpoints, DeleteResult, Delivery, ExpireResult, ForgetResult, History, Memory,
    MemoryPage, MergeResult, ReadersPage, RecallResult, RememberResult, Whoami, WorkspaceFile, WorkspaceFileInfo,
    WorkspaceWrite, deliveries, workspace_listing,
)

T = TypeVar("T")
USER_AGENT = "memwarden-python/0.1"
RETRY_STATUSES = frozenset({429, 502, 503, 504})


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry: `max_retries` extra attempts, exponential backoff from
    `backoff` seconds (doubling, capped at `max_backoff`, with jitter), or `Retry-After` if longer."""

    max_retries: int = 3
    backoff: float = 0.5
    max_backoff: float = 8.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        computed = min(self.max_backoff, self.backoff * (2 ** attempt)) * (0.5 + random.random() / 2)
        return min(self.max_backoff * 4, max(computed, retry_after or 0.0))


@dataclass(frozen=True)
class _Call(Generic[T]):
    """One logical API call; retries of it reuse `idempotency_key`."""

    method: str
    path: str
    parse: Callable[[Any], T]
    body: dict[str, Any] | None = None
    params: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    read_only: bool = False
    """A POST that changes nothing a retry could duplicate (recall): no Idempotency-Key."""
    idempotency_key: str | None = None

    @property
    def is_write(self) -> bool:
        return self.method in ("POST", "PUT", "PATCH", "DELETE") and not self.read_only


def _drop_none(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _time(value: datetime | str | int | None) -> str | int | None:
    """Timestamps in: datetimes as RFC 3339; strings and epoch milliseconds as given."""
    return value.isoformat() if isinstance(value, datetime) else value


def _id(value: str) -> str:
    return quote(value, safe="")


WORKSPACE = "/v1/host/workspace/files"


def _file(path: str) -> str:
    return f"{WORKSPACE}/{quote(path, safe='/')}"


def _workspace_headers(if_match: str | None, agent_id: str | None) -> dict[str, str]:
    return _drop_none({"if-match": if_match, "x-agent-id": agent_id})


def _query(params: dict[str, Any] | None) -> list[tuple[str, str]] | None:
    if not params:
        return None
    return [(k, str(v)) for k, v in params.items() if v is not None]


class _Calls:
    """Every `/v1` memory, change and audit call, defined once for both clients."""

    def _run(self, call: _Call[T]) -> T:  # pragma: no cover - implemented by the clients
        raise NotImplementedError

    # --- memories (contract §3) --------------------------------------------------------------

    def remember(self, *, agent_id: str, content: str, type: str = "semantic", user_id: str | None = None,
                 metadata: dict[str, Any] | None = None, tags: Iterable[str] | None = None,
                 confidence: float | None = None, source: str | None = None,
                 expires_at: datetime | str | int | None = None, approval_required: bool | None = None,
                 run_id: str | None = None, node_id: str | None = None,
                 idempotency_key: str | None = None) -> RememberResult:
        """Store a memory (live) or have it staged for review (`result.pending`). `idempotency_key`:
        your own key for this write (default: a fresh one per call, reused by its retries), so a
        replay after your process restarts is answered with the first result instead of redone."""
        body = _drop_none({"agent_id": agent_id, "type": type, "content": content, "user_id": user_id,
                           "metadata": metadata, "tags": list(tags) if tags is not None else None,
                           "confidence": confidence, "source": source, "expires_at": _time(expires_at),
                           "approval_required": approval_required, "run_id": run_id, "node_id": node_id})
        return self._run(_Call("POST", "/v1/memories/remember", RememberResult.from_json, body,
                               idempotency_key=idempotency_key))

    def recall(self, *, agent_id: str, query: str, user_id: str | None = None, k: int | None = None,
               types: Iterable[str] | None = None, tags: Iterable[str] | None = None,
               filter: dict[str, Any] | None = None, fresher_than_days: float | None = None,
               min_score: float | None = None, fusion: str | None = None,
               as_of: datetime | str | int | None = None, run_id: str | None = None) -> RecallResult:
        """The `k` most relevant live memories of an agent (optionally one user's). `run_id`: the
        agent run the recall serves (`start_run`), recorded with the read for incident reports."""
        body = _drop_none({"agent_id": agent_id, "query": query, "user_id": user_id, "k": k,
                           "types": list(types) if types is not None else None,
                           "tags": list(tags) if tags is not None else None, "filter": filter,
                           "fresher_than_days": fresher_than_days, "min_score": min_score, "fusion": fusion,
                           "as_of": _time(as_of), "run_id": run_id})
        # Recall changes nothing a retry could duplicate (only recall counters): it retries as a read.
        return self._run(_Call("POST", "/v1/memories/recall", RecallResult.from_json, body, read_only=True))

    def forget(self, *, agent_id: str, ids: Iterable[str] | None = None, filter: dict[str, Any] | None = None,
               user_id: str | None = None, hard_delete: bool | None = None, reason: str | None = None,
               approval_required: bool | None = None) -> ForgetResult:
        """Forget by ids and/or a metadata filter (soft unless `hard_delete`)."""
        body = _drop_none({"agent_id": agent_id, "ids": list(ids) if ids is not None else None, "filter": filter,
                           "user_id": user_id, "hard_delete": hard_delete, "reason": reason,
                           "approval_required": approval_required})
        return self._run(_Call("POST", "/v1/memories/forget", ForgetResult.from_json, body))

    def merge(self, *, agent_id: str, canonical: str, duplicates: Iterable[str], strategy: str | None = None,
              approval_required: bool | None = None, reason: str | None = None) -> MergeResult:
        """Collapse `duplicates` into `canonical` (`keep_canonical`, `merge_content`, `keep_highest_confidence`);
        `reason` is shown to the reviewer when the merge is staged."""
        body = _drop_none({"agent_id": agent_id, "canonical": canonical, "duplicates": list(duplicates),
                           "strategy": strategy, "approval_required": approval_required, "reason": reason})
        return self._run(_Call("POST", "/v1/memories/merge", MergeResult.from_json, body))

    def expire(self, *, agent_id: str, policy: dict[str, Any], action: str | None = None,
               user_id: str | None = None, approval_required: bool | None = None,
               reason: str | None = None) -> ExpireResult:
        """Apply a TTL policy (`older_than_days`, `type`, `confidence_below`, `no_recall_in_days`);
        `reason` is shown to the reviewer when the expiry is staged."""
        body = _drop_none({"agent_id": agent_id, "policy": policy, "action": action, "user_id": user_id,
                           "approval_required": approval_required, "reason": reason})
        return self._run(_Call("POST", "/v1/memories/expire", ExpireResult.from_json, body))

    def list(self, *, agent_id: str, user_id: str | None = None, type: str | None = None, tag: str | None = None,
             limit: int | None = None, cursor: str | None = None,
             as_of: datetime | str | int | None = None) -> MemoryPage:
        """One page of an agent's memories, newest first (see `iter_memories` for all of them)."""
        params = {"agent_id": agent_id, "user_id": user_id, "type": type, "tag": tag, "limit": limit,
                  "cursor": cursor, "as_of": _time(as_of)}
        return self._run(_Call("GET", "/v1/memories", MemoryPage.from_json, params=params))

    def get(self, memory_id: str, *, as_of: datetime | str | int | None = None) -> Memory:
        """One visible memory; `NotFound` otherwise."""
        return self._run(_Call("GET", f"/v1/memories/{_id(memory_id)}", Memory.from_json,
                               params={"as_of": _time(as_of)}))

    def delete(self, memory_id: str) -> DeleteResult:
        """Forget one memory (a policy may stage it: `result.pending`)."""
        return self._run(_Call("DELETE", f"/v1/memories/{_id(memory_id)}", DeleteResult.from_json))

    def history(self, memory_id: str) -> History:
        """The memory's audit trail, oldest first."""
        return self._run(_Call("GET", f"/v1/memories/{_id(memory_id)}/history", History.from_json))

    def deliveries(self, memory_id: str) -> list[Delivery]:
        """Where the router delivered a memory: the newest delivery to each backend, with the store's id."""
        return self._run(_Call("GET", f"/v1/memories/{_id(memory_id)}/deliveries", deliveries))

    def readers(self, memory_id: str, *, limit: int | None = None, cursor: str | None = None) -> ReadersPage:
        """One page of the reads that returned a memory, newest first (scope `audit:read`)."""
        return self._run(_Call("GET", f"/v1/memories/{_id(memory_id)}/readers", ReadersPage.from_json,
                               params={"limit": limit, "cursor": cursor}))

    # --- changes (contract §4) ---------------------------------------------------------------

    def get_change(self, change_id: str) -> Change:
        return self._run(_Call("GET", f"/v1/changes/{_id(change_id)}", Change.from_json))

    def list_changes(self, *, status: str | None = None, agent_id: str | None = None, limit: int | None = None,
                     cursor: str | None = None) -> ChangePage:
        params = {"status": status, "agent_id": agent_id, "limit": limit, "cursor": cursor}
        return self._run(_Call("GET", "/v1/changes", ChangePage.from_json, params=params))

    def change_diff(self, change_id: str) -> ChangeDiff:
        """The change diffed against live state now; quote `.fingerprint` as `seen_state`."""
        return self._run(_Call("GET", f"/v1/changes/{_id(change_id)}/diff", ChangeDiff.from_json))

    def approve(self, change_id: str, *, reason: str | None = None, edits: dict[str, Any] | None = None,
                seen_state: str | None = None, merge_into: str | None = None,
                supersedes: str | None = None, confirm_risk: bool = False,
                memory_ids: Iterable[str] | None = None, keep_both: bool = False) -> Change:
        """Approve (needs `review:decide`); `Conflict` if already decided or the state went stale;
        `ConfirmationRequired` if the change needs confirmation (medium or high risk, a hard delete,
        a merge that drops facts) and `confirm_risk` is not set. `memory_ids` applies a forget or
        expire to those of its memories only. An approved remember retires the live memories it
        replaces (its `result["retired"]`) unless `keep_both`."""
        body = _drop_none({"reason": reason, "edits": edits, "seen_state": seen_state, "merge_into": merge_into,
                           "supersedes": supersedes, "confirm_risk": confirm_risk or None,
                           "keep_both": keep_both or None,
                           "memory_ids": list(memory_ids) if memory_ids is not None else None})
        return self._run(_Call("POST", f"/v1/changes/{_id(change_id)}/approve", Change.from_json, body))

    def reject(self, change_id: str, *, reason: str) -> Change:
        return self._run(_Call("POST", f"/v1/changes/{_id(change_id)}/reject", Change.from_json,
                               {"reason": reason}))

    def withdraw(self, change_id: str) -> Change:
        """Withdraw a pending change this key submitted."""
        return self._run(_Call("POST", f"/v1/changes/{_id(change_id)}/withdraw", Change.from_json))

    def recover(self, *, since: datetime | str | int, key: str | None = None, agent: str | None = None,
                source: str | None = None, until: datetime | str | int | None = None,
                dry_run: bool = False) -> dict[str, Any]:
        """Quarantine what one key, agent or source wrote in [since, until) and offer what it forgot,
        merged or expired for revert (needs the `admin` scope); returns the report (counts and ids)."""
        body = _drop_none({"key": key, "agent": agent, "source": source, "since": _time(since),
                           "until": _time(until), "dry_run": dry_run or None})
        return self._run(_Call("POST", "/v1/recover", dict, body))

    def incident_report(self, *, recover_id: str | None = None, since: datetime | str | int | None = None,
                        key: str | None = None, agent: str | None = None, source: str | None = None,
                        until: datetime | str | int | None = None) -> dict[str, Any]:
        """The incident report (needs `audit:read`) of a recover that ran (`recover_id`), or of a
        target named as `recover` takes it: what each poisoned memory could have influenced, its
        derived memories, the reads and the agent runs that returned any of them. Ids, no content."""
        if recover_id is not None:
            return self._run(_Call("GET", f"/v1/recover/{_id(recover_id)}/report", dict))
        params = _drop_none({"key": key, "agent": agent, "source": source, "since": _time(since),
                             "until": _time(until)})
        return self._run(_Call("GET", "/v1/recover/report", dict, params=params))

    def start_run(self, *, agent_id: str | None = None) -> dict[str, Any]:
        """Record the start of an agent run: `{"runId", "snapshot"}`. Pass the id to `recall` (and
        `remember`) so the reads and writes of the run are traced to it."""
        return self._run(_Call("POST", "/v1/runs", dict, _drop_none({"agent_id": agent_id})))

    # --- workspace files (contract §7) ------------------------------------------------------

    def list_files(self, *, prefix: str | None = None) -> list[WorkspaceFileInfo]:
        """Live workspace files (metadata only), optionally those whose path starts with `prefix`."""
        return self._run(_Call("GET", WORKSPACE, workspace_listing, params={"prefix": prefix}))

    def get_file(self, path: str, *, version: int | None = None) -> WorkspaceFile:
        """A file's current (or a retained) version; `NotFound` otherwise. Never pending content."""
        return self._run(_Call("GET", _file(path), WorkspaceFile.from_json, params={"version": version}))

    def put_file(self, path: str, content: str, *, content_type: str | None = None, if_match: str | None = None,
                 agent_id: str | None = None, run_id: str | None = None) -> WorkspaceWrite:
        """Create or replace a file, or have it staged for review (`result.pending`). `if_match` (an etag)
        makes a write over a version that is no longer current a `Conflict`."""
        body = _drop_none({"content": content, "contentType": content_type, "runId": run_id})
        return self._run(_Call("PUT", _file(path), WorkspaceWrite.from_json, body,
                               headers=_workspace_headers(if_match, agent_id)))

    def delete_file(self, path: str, *, if_match: str | None = None, agent_id: str | None = None) -> WorkspaceWrite:
        """Delete a file (a tombstone version), or have the delete staged (`result.pending`)."""
        return self._run(_Call("DELETE", _file(path), WorkspaceWrite.from_json,
                               headers=_workspace_headers(if_match, agent_id)))

    # --- audit (contract §6) -----------------------------------------------------------------

    def whoami(self) -> Whoami:
        """The calling key's tenant, scopes and agent allow-list."""
        return self._run(_Call("GET", "/v1/whoami", Whoami.from_json))

    def checkpoints(self) -> Checkpoints:
        return self._run(_Call("GET", "/v1/audit/checkpoints", Checkpoints.from_json))

    def public_key(self) -> str:
        """The Ed25519 verifier key (C2SP vkey) that signs audit checkpoints."""
        return self._run(_Call("GET", "/v1/audit/public-key", lambda text: text.strip(),
                               headers={"accept": "text/plain"}))


DEFAULT_URL = "http://127.0.0.1:8000"
URL_ENV, KEY_ENV = "MEMWARDEN_URL", "MEMWARDEN_API_KEY"


class _Base(_Calls):
    def __init__(self, base_url: str | None, api_key: str | None, retry: RetryPolicy | None):
        """`base_url` and `api_key` default to the environment's MEMWARDEN_URL (else a local
        `memwarden serve`, http://127.0.0.1:8000) and MEMWARDEN_API_KEY (else no key)."""
        base_url = base_url or os.environ.get(URL_ENV) or DEFAULT_URL
        api_key = api_key if api_key is not None else os.environ.get(KEY_ENV)
        self.base_url = base_url.rstrip("/")
        self.retry = retry or RetryPolicy()
        self._headers = {"user-agent": USER_AGENT, "accept": "application/json"}
        if api_key:
            self._headers["authorization"] = f"Bearer {api_key}"

    def _prepare(self, call: _Call) -> tuple[_Call, dict[str, Any]]:
        """Request arguments; a write gets its Idempotency-Key here, once per logical call."""
        if call.is_write and call.idempotency_key is None:
            call = dataclasses.replace(call, idempotency_key=str(uuid.uuid4()))
        headers = {**self._headers, **call.headers}
        if call.idempotency_key:
            headers["idempotency-key"] = call.idempotency_key
        kwargs: dict[str, Any] = {"headers": headers, "params": _query(call.params)}
        if call.body is not None:
            kwargs["content"] = json.dumps(call.body, ensure_ascii=False).encode("utf-8")
            headers["content-type"] = "application/json"
        return call, kwargs

    def _retry_wait(self, attempt: int, response: httpx.Response | None = None) -> float | None:
        """Seconds to wait before retrying after `attempt` (counted from 0), or None when the outcome
        stands: a response that is not retryable, or no retries left. No response: a transport error."""
        if attempt >= self.retry.max_retries:
            return None
        if response is None:
            return self.retry.delay(attempt, None)
        if response.status_code in RETRY_STATUSES:
            return self.retry.delay(attempt, errors.retry_after_seconds(dict(response.headers)))
        return None

    @staticmethod
    def _parse(call: _Call[T], response: httpx.Response) -> T:
        if response.is_success:
            if "json" in response.headers.get("content-type", ""):
                return call.parse(response.json())
            return call.parse(response.text)
        raise _error(response)


def _pages(fetch: Callable[[str | None], Any]) -> Iterator[Any]:
    """The items of every page `fetch(cursor)` returns, following `next_cursor` to the end."""
    cursor = None
    while True:
        page = fetch(cursor)
        yield from page.items
        if not page.next_cursor:
            return
        cursor = page.next_cursor


async def _async_pages(fetch: Callable[[str | None], Awaitable[Any]]) -> AsyncIterator[Any]:
    """`_pages` for coroutine fetches."""
    cursor = None
    while True:
        page = await fetch(cursor)
        for item in page.items:
            yield item
        if not page.next_cursor:
            return
        cursor = page.next_cursor


def _error(response: httpx.Response) -> errors.MemwardenError:
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text[:500]
    return errors.error_from_response(response.status_code, body, dict(response.headers))


def _connection_error(exc: Exception) -> errors.ConnectionFailed:
    return errors.ConnectionFailed("connection_error", f"{type(exc).__name__}: {exc}")


class Client(_Base):
    """Blocking client. Use as a context manager (or call `close()`) to release connections."""

    def __init__(self, base_url: str | None = None, api_key: str | None = None, *, timeout: float = 30.0,
                 retry: RetryPolicy | None = None, transport: httpx.BaseTransport | None = None,
                 http: httpx.Client | None = None):
        super().__init__(base_url, api_key, retry)
        self._owns_http = http is None
        self._http = http or httpx.Client(base_url=self.base_url, timeout=timeout, transport=transport)
        self._sleep = time.sleep

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def _send(self, call: _Call, kwargs: dict[str, Any], stream: bool = False) -> httpx.Response:
        for attempt in itertools.count():
            try:
                response = self._http.send(self._http.build_request(call.method, self.base_url + call.path, **kwargs),
                                           stream=stream)
            except httpx.TransportError as exc:
                wait = self._retry_wait(attempt)
                if wait is None:
                    raise _connection_error(exc) from exc
            else:
                wait = self._retry_wait(attempt, response)
                if wait is None:
                    return response
                response.close()
            self._sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    def _run(self, call: _Call[T]) -> T:
        call, kwargs = self._prepare(call)
        return self._parse(call, self._send(call, kwargs))

    def iter_memories(self, *, agent_id: str, page_size: int = 100, **filters: Any) -> Iterator[Memory]:
        """Every memory of an agent, newest first, fetching pages of `page_size` as needed."""
        return _pages(lambda cursor: self.list(agent_id=agent_id, limit=page_size, cursor=cursor, **filters))

    def iter_changes(self, *, page_size: int = 50, **filters: Any) -> Iterator[Change]:
        """Every change matching the filters (default: pending), page by page."""
        return _pages(lambda cursor: self.list_changes(limit=page_size, cursor=cursor, **filters))

    def export_audit(self, *, from_seq: int | None = None, to_seq: int | None = None) -> Iterator[dict[str, Any]]:
        """Stream the tenant's audit chain (events and signed checkpoints) as parsed JSONL records."""
        call, kwargs = self._prepare(_Call("GET", "/v1/audit/export", lambda x: x,
                                           params={"from_seq": from_seq, "to_seq": to_seq},
                                           headers={"accept": "application/x-ndjson"}))
        response = self._send(call, kwargs, stream=True)
        try:
            if not response.is_success:
                response.read()
                raise _error(response)
            for line in response.iter_lines():
                if line.strip():
                    yield json.loads(line)
        finally:
            response.close()


class AsyncClient(_Base):
    """The same calls as `Client`, as coroutines: `async with AsyncClient(...) as mw: await mw.recall(...)`."""

    def __init__(self, base_url: str | None = None, api_key: str | None = None, *, timeout: float = 30.0,
                 retry: RetryPolicy | None = None, transport: httpx.AsyncBaseTransport | None = None,
                 http: httpx.AsyncClient | None = None):
        super().__init__(base_url, api_key, retry)
        self._owns_http = http is None
        self._http = http or httpx.AsyncClient(base_url=self.base_url, timeout=timeout, transport=transport)
        self._sleep = asyncio.sleep

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def _send(self, call: _Call, kwargs: dict[str, Any], stream: bool = False) -> httpx.Response:
        for attempt in itertools.count():
            try:
                response = await self._http.send(
                    self._http.build_request(call.method, self.base_url + call.path, **kwargs), stream=stream)
            except httpx.TransportError as exc:
                wait = self._retry_wait(attempt)
                if wait is None:
                    raise _connection_error(exc) from exc
            else:
                wait = self._retry_wait(attempt, response)
                if wait is None:
                    return response
                await response.aclose()
            await self._sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _run(self, call: _Call[T]) -> T:  # type: ignore[override]
        call, kwargs = self._prepare(call)
        return self._parse(call, await self._send(call, kwargs))

    def iter_memories(self, *, agent_id: str, page_size: int = 100, **filters: Any) -> AsyncIterator[Memory]:
        """Every memory of an agent, newest first, fetching pages as needed (`async for`)."""
        return _async_pages(lambda cursor: self.list(agent_id=agent_id, limit=page_size, cursor=cursor, **filters))

    def iter_changes(self, *, page_size: int = 50, **filters: Any) -> AsyncIterator[Change]:
        """Every change matching the filters (default: pending), page by page (`async for`)."""
        return _async_pages(lambda cursor: self.list_changes(limit=page_size, cursor=cursor, **filters))

    async def export_audit(self, *, from_seq: int | None = None,
                           to_seq: int | None = None) -> AsyncIterator[dict[str, Any]]:
        """Stream the tenant's audit chain as parsed JSONL records."""
        call, kwargs = self._prepare(_Call("GET", "/v1/audit/export", lambda x: x,
                                           params={"from_seq": from_seq, "to_seq": to_seq},
                                           headers={"accept": "application/x-ndjson"}))
        response = await self._send(call, kwargs, stream=True)
        try:
            if not response.is_success:
                await response.aread()
                raise _error(response)
            async for line in response.aiter_lines():
                if line.strip():
                    yield json.loads(line)
        finally:
            await response.aclose()
