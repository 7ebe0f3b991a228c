"""Read replicas against a real hot standby of the suite's embedded PostgreSQL (made with its own
`pg_basebackup`, streaming on its own port): reads are served by the replica, a key reads its own
writes (the replica's replay is paused to make it lag), and a replica that dies is passed over."""

from __future__ import annotations

import io
import json
import time
from typing import Iterator

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from prometheus_client import REGISTRY
from sqlalchemy import create_engine, text
from starlette.testclient import TestClient

from app.db.database import make_database, make_engine
from app.db.replicas import Replica, ReplicaSet, lsn_int
from app.db.standby import Standby, make_standby
from app.local_server import free_port
from app.main import create_app
from app.services.tenancy.apikeys import create_key
from app.services.runtime.context import AppContext
from app.services.transfer.exporter import export_tenant
from app.services.tenancy.tenants import create_tenant
from tests.harness import bearer, start_server, stop_server, unique

pytestmark = pytest.mark.slow

AGENT = "agent-r"
MAX_WAIT_SECONDS = 0.3


@pytest.fixture(scope="module")
def standby(db_urls, tmp_path_factory) -> Iterator[Standby]:
    if db_urls.embedded is None:
        pytest.skip("needs the embedded PostgreSQL (its binaries make the standby)")
    made = make_standby(db_urls.embedded, tmp_path_factory.mktemp("replica") / "pg", free_port())
    yield made
    made.remove()


@pytest.fixture(scope="module")
def replica_ctx(settings, standby) -> Iterator[AppContext]:
    """Services whose reads are routed to the standby (a `Database` with one replica)."""
    primary = make_engine(settings.database_url, pool_size=3)
    replicas = ReplicaSet(primary, [Replica("replica1", make_engine(standby.url(), pool_size=3, connect_timeout=2))],
                          max_wait_seconds=MAX_WAIT_SECONDS)
    ctx = AppContext(settings, make_database(primary, replicas=replicas))
    yield ctx
    ctx.db.dispose()


@pytest.fixture
def rep_tenant(committed_ctx):
    return create_tenant(committed_ctx, name=unique("rep"), actor={"kind": "test", "id": "pytest"})


@pytest.fixture
def keys(committed_ctx, rep_tenant):
    """The fresh tenant's writing key (A) and a read-only key (B), as bearer headers."""
    tenant = rep_tenant

    def key(scopes: str) -> dict[str, str]:
        return bearer(create_key(committed_ctx, tenant_id=tenant.id, scopes=scopes, agents="*",
                                 actor={"kind": "test", "id": "pytest"}).token)

    return key("memory:read,memory:write"), key("memory:read")


def _superuser(standby: Standby):
    return create_engine(standby.url("postgres"), isolation_level="AUTOCOMMIT")


def _caught_up(settings, standby: Standby) -> None:
    """Wait until the standby has replayed everything the primary has committed."""
    with create_engine(settings.database_url).connect() as primary:
        target = lsn_int(primary.scalar(text("SELECT pg_current_wal_insert_lsn()::text")))
    engine = _superuser(standby)
    try:
        deadline = time.monotonic() + 30
        with engine.connect() as conn:
            while lsn_int(conn.scalar(text("SELECT pg_last_wal_replay_lsn()::text"))) < target:
                assert time.monotonic() < deadline, "the standby did not catch up"
                time.sleep(0.05)
    finally:
        engine.dispose()


def _set_replay(standby: Standby, paused: bool) -> None:
    engine = _superuser(standby)
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_wal_replay_pause()" if paused else "SELECT pg_wal_replay_resume()"))
            if paused:
                deadline = time.monotonic() + 10
                while conn.scalar(text("SELECT pg_get_wal_replay_pause_state()")) != "paused":
                    assert time.monotonic() < deadline
                    time.sleep(0.02)
    finally:
        engine.dispose()


def _count(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def _remember(client, headers, content: str) -> str:
    response = client.post("/v1/memories/remember", headers=headers, json={"agent_id": AGENT, "type": "semantic", "content": content})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def _listed(client, headers) -> set[str]:
    response = client.get("/v1/memories", headers=headers, params={"agent_id": AGENT})
    assert response.status_code == 200, response.text
    return {item["id"] for item in response.json()["items"]}


def _recalled(client, headers, query: str) -> set[str]:
    response = client.post("/v1/memories/recall", headers=headers,
                           json={"agent_id": AGENT, "query": query, "min_score": -1, "k": 10})
    assert response.status_code == 200, response.text
    return {hit["id"] for hit in response.json()["hits"]}


def _mcp_remember(base_url: str, headers: dict[str, str], content: str) -> str:
    """Remember through the MCP endpoint (the tool call path, not a `/v1` route)."""
    async def run():
        http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30))
        async with http, Client(streamable_http_client(f"{base_url}/mcp", http_client=http)) as client:
            return await client.call_tool("remember", {"agent_id": AGENT, "type": "semantic", "content": content})

    result = anyio.run(run)
    assert not result.is_error, result.content
    return result.structured_content["id"]


def test_reads_are_served_by_the_replica_and_a_key_reads_its_own_writes(settings, standby, replica_ctx, keys):
    writer, reader = keys
    with TestClient(create_app(settings, ctx=replica_ctx)) as client:
        old = _remember(client, writer, "Ada keeps the spare fuses on the top shelf")
        _caught_up(settings, standby)
        _set_replay(standby, paused=True)
        try:
            new = _remember(client, writer, "Ada moved the spare fuses to the garage")

            # Another key is served by the replica, which has not replayed the write: it sees the
            # old state. That it is stale proves the read did not touch the primary.
            served = _count("memwarden_replica_reads_total", served_by="replica1")
            assert _listed(client, reader) == {old}
            assert _recalled(client, reader, "where are the spare fuses?") == {old}
            # Recall is a POST but a read: it did not make the reader's key wait for anything.
            assert _listed(client, reader) == {old}
            assert _count("memwarden_replica_reads_total", served_by="replica1") == served + 3

            # The writing key waits for the replica, up to the bound, then the primary serves it.
            lagging = _count("memwarden_replica_fallbacks_total", reason="lagging")
            started = time.monotonic()
            assert _listed(client, writer) == {old, new}
            assert time.monotonic() - started >= MAX_WAIT_SECONDS
            assert _recalled(client, writer, "where are the spare fuses?") == {old, new}
            assert client.get(f"/v1/memories/{new}", headers=writer).status_code == 200
            assert _count("memwarden_replica_fallbacks_total", reason="lagging") == lagging + 3
        finally:
            _set_replay(standby, paused=False)

        # Once replayed, the replica serves the writer too, and the wait it took is recorded.
        _caught_up(settings, standby)
        served = _count("memwarden_replica_reads_total", served_by="replica1")
        assert _listed(client, writer) == {old, new}
        assert client.get(f"/v1/memories/{new}", headers=writer).json()["id"] == new
        assert _count("memwarden_replica_reads_total", served_by="replica1") == served + 2
        ready = client.get("/readyz").json()
        assert ready["status"] == "ready"
        assert ready["replicas"][0]["name"] == "replica1" and ready["replicas"][0]["up"] is True


def test_read_your_writes_holds_across_server_processes(settings, standby, replica_ctx, keys):
    """The key's last write position is kept in PostgreSQL: a write through one server process
    makes the key's reads through another wait for (or fall back from) the lagging replica."""
    writer, reader = keys
    proc, base_url = start_server(settings, MEMWARDEN_READ_REPLICA_URLS=standby.url(),
                                  MEMWARDEN_REPLICA_MAX_WAIT_MS="100")
    try:
        with httpx.Client(base_url=base_url, timeout=60) as other:
            old = _remember(other, writer, "Grace's favourite editor is vim")
            _caught_up(settings, standby)
            _set_replay(standby, paused=True)
            try:
                new = _remember(other, writer, "Grace switched to emacs")
                with TestClient(create_app(settings, ctx=replica_ctx)) as here:
                    assert _listed(here, writer) == {old, new}
                    assert _listed(here, reader) == {old}
                assert _listed(other, reader) == {old}  # the other process routes to the replica too
                assert _listed(other, writer) == {old, new}
            finally:
                _set_replay(standby, paused=False)

            # A write through an MCP tool is noted the same way (the replica has replayed the
            # writer's earlier writes: only this one can make its read wait).
            _caught_up(settings, standby)
            _set_replay(standby, paused=True)
            try:
                by_mcp = _mcp_remember(base_url, writer, "Grace uses the emacs keybindings everywhere")
                with TestClient(create_app(settings, ctx=replica_ctx)) as here:
                    assert _listed(here, writer) == {old, new, by_mcp}
                    assert _listed(here, reader) == {old, new}
            finally:
                _set_replay(standby, paused=False)
    finally:
        stop_server(proc)


def test_an_export_reads_a_replica_that_has_replayed_everything(settings, standby, replica_ctx, keys, rep_tenant):
    """`memwarden export` has no key: it needs everything committed so far, so it is served by a
    replica that has replayed it all, and by the primary while the replica lags."""
    writer, _ = keys

    def exported() -> set[str]:
        out = io.StringIO()
        export_tenant(replica_ctx, tenant_id=rep_tenant.id, out=out, actor={"kind": "test", "id": "pytest"})
        return {json.loads(line)["id"] for line in out.getvalue().splitlines()[1:]}

    with TestClient(create_app(settings, ctx=replica_ctx)) as client:
        old = _remember(client, writer, "Margaret keeps the flight logs in a blue binder")
        _caught_up(settings, standby)
        served = _count("memwarden_replica_reads_total", served_by="replica1")
        assert exported() == {old}
        assert _count("memwarden_replica_reads_total", served_by="replica1") == served + 1

        _set_replay(standby, paused=True)
        try:
            new = _remember(client, writer, "Margaret moved the flight logs to a red binder")
            lagging = _count("memwarden_replica_fallbacks_total", reason="lagging")
            assert exported() == {old, new}
            assert _count("memwarden_replica_fallbacks_total", reason="lagging") == lagging + 1
        finally:
            _set_replay(standby, paused=False)


def test_a_dead_replica_is_passed_over_and_the_primary_serves(settings, standby, replica_ctx, keys):
    writer, reader = keys
    with TestClient(create_app(settings, ctx=replica_ctx)) as client:
        memory = _remember(client, writer, "Linus prefers tabs")
        _caught_up(settings, standby)
        assert _listed(client, reader) == {memory}  # pools a connection to the replica

        standby.stop(immediate=True)
        try:
            down = _count("memwarden_replica_fallbacks_total", reason="down")
            primary = _count("memwarden_replica_reads_total", served_by="primary")
            assert _listed(client, reader) == {memory}
            assert _listed(client, writer) == {memory}
            assert _recalled(client, reader, "tabs or spaces?") == {memory}
            assert _count("memwarden_replica_fallbacks_total", reason="down") == down + 3
            assert _count("memwarden_replica_reads_total", served_by="primary") == primary + 3
            ready = client.get("/readyz")
            assert ready.status_code == 200  # the primary serves: still ready
            assert ready.json()["replicas"][0]["up"] is False
        finally:
            standby.start()
