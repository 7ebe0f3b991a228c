"""memorywire's own conformance scenarios, run against `MemwardenStore` on a live `memwarden serve`.

The scenarios are `tests/conformance/scenarios.py` and its runner `tests/conformance/test_conformance.py`
from the `memorywire` source distribution on PyPI, for the version installed here (and for 0.3.0, the
oldest claimed, whenever its files differ), fetched with pip at collection time (cached,
`tests/upstream.py`) and executed unchanged. What memorywire's own
`conftest.py` does per adapter is done here for one adapter, `memwarden`: build a fresh store per
scenario (a fresh tenant, so nothing of another scenario is in scope) and honour the scenarios'
backdating marker (`metadata._conformance_backdate_ms`), as memorywire's fixtures do for its
reference sqlite-vec adapter: by an operator's import of the record with its `created_at`, never
by editing rows.

Every scenario runs; none is skipped or expected to fail (SKIP_OVERRIDES is empty). Should one
ever need to be skipped, it goes in SKIP_OVERRIDES with its reason, as memorywire's conftest does
for its own adapters, and in docs/agents/memorywire.md's table.
"""

from __future__ import annotations

import asyncio
import json
import linecache
import sys
import time
import types
import uuid
from importlib.metadata import version

import httpx
import pytest

pytest.importorskip("memorywire")

from memorywire.models import RememberRequest, RememberResponse  # noqa: E402

from memwarden.client import AsyncClient  # noqa: E402
from memwarden.memorywire import MemwardenStore  # noqa: E402
from tests.upstream import sdist_files  # noqa: E402

DISTRIBUTION = "memorywire"
VERSION = version(DISTRIBUTION)
ADAPTER = "memwarden"

# Scenarios MemwardenStore cannot satisfy, and why (keep the table in docs/agents/memorywire.md in step). None.
SKIP_OVERRIDES: dict[str, dict[str, str]] = {ADAPTER: {}}

OLDEST = "0.3.0"  # the oldest memorywire claimed; its scenarios run too whenever they differ from these

# The runner imports `tests.conformance.scenarios` and `.conftest`; our `tests` package has no such
# subpackage, so give it one: the upstream scenarios, and a conftest holding our SKIP_OVERRIDES
# (memorywire's own conformance conftest builds its adapters, mostly mocked, which are not under test here).
_package = types.ModuleType("tests.conformance")
_package.__path__ = []
_conftest = types.ModuleType("tests.conformance.conftest")
_conftest.SKIP_OVERRIDES = SKIP_OVERRIDES
sys.modules.update({"tests.conformance": _package, "tests.conformance.conftest": _conftest})
_SCENARIOS: dict[str, list] = {}


def _load_runner(release: str, files: dict[str, str]) -> dict:
    """Execute one release's scenarios and runner; returns the runner's namespace (its tests)."""
    for path, body in files.items():  # readable tracebacks
        linecache.cache[f"memorywire-{release}/{path}"] = (len(body), None, body.splitlines(True), path)
    scenarios = types.ModuleType("tests.conformance.scenarios")
    sys.modules["tests.conformance.scenarios"] = scenarios
    exec(compile(files["tests/conformance/scenarios.py"], f"memorywire-{release}/tests/conformance/scenarios.py",
                 "exec"), scenarios.__dict__)
    _SCENARIOS[release] = scenarios.SCENARIOS
    runner: dict = {"__name__": "tests.conformance.test_conformance", "__package__": "tests.conformance"}
    exec(compile(files["tests/conformance/test_conformance.py"],
                 f"memorywire-{release}/tests/conformance/test_conformance.py", "exec"), runner)
    return runner


_FILES = sdist_files(DISTRIBUTION, VERSION, "tests/conformance/")
globals().update({name: value for name, value in _load_runner(VERSION, _FILES).items() if name.startswith("test_")})
_OLDEST_FILES = sdist_files(DISTRIBUTION, OLDEST, "tests/conformance/")
if _OLDEST_FILES != _FILES:  # identical for 0.3.0 and 0.5.0; should they part, the older suite runs as well
    _oldest = _load_runner(OLDEST, _OLDEST_FILES)
    globals()["test_conformance_" + OLDEST.replace(".", "_")] = _oldest["test_conformance"]

pytestmark = pytest.mark.anyio  # the runner's tests are coroutines (memorywire runs them with pytest-asyncio)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class BackdatingStore(MemwardenStore):
    """`MemwardenStore`, plus what memorywire's fixtures add to each adapter: a remember carrying the
    `_conformance_backdate_ms` marker stores a memory that old. A client cannot write the past, and
    no row is edited by hand: such a write is an operator's import of one memorywire record with its
    `created_at` (`memwarden import --format memorywire`, the same service), which keeps the
    timestamp and goes through redaction, screening and the policy like any write. Every other
    operation is the wire surface's."""

    def __init__(self, client: AsyncClient, ctx, tenant_id: str, routed: bool = False) -> None:
        super().__init__(client)
        self._ctx = ctx
        self._tenant_id = tenant_id
        self._client = client
        self._routed = routed

    async def _delivered(self, memory_id: str) -> None:
        """Routed: wait until the backend holds the new memory, so the scenario's recalls fuse both stores."""
        for _ in range(150):
            rows = await self._client.deliveries(memory_id)
            if rows and all(row.status == "delivered" for row in rows):
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"{memory_id} was not delivered to the backend: {rows}")

    def _import_aged(self, req: RememberRequest, age_ms: int) -> RememberResponse:
        from app.core.ids import new_id
        from app.services.transfer.importer import import_bytes

        stored_at = int(time.time() * 1000) - age_ms
        record = {"id": new_id("mem"), "created_at": stored_at,
                  **req.model_dump(mode="json", exclude_none=True, exclude={"approval_required"})}
        report = import_bytes(self._ctx, tenant_id=self._tenant_id, data=json.dumps([record]).encode(),
                              fmt="memorywire", actor={"kind": "test", "id": "conformance-backdate"})
        assert report.ok and report.imported == 1, (report.problems, report.staged)
        return RememberResponse(id=record["id"], stored_at=stored_at, stores=["memwarden"], pending_approval=False,
                                approval_url=None)

    async def remember(self, req: RememberRequest) -> RememberResponse:
        offset = (req.metadata or {}).get("_conformance_backdate_ms")
        if isinstance(offset, int) and not req.approval_required:
            saved = await asyncio.to_thread(self._import_aged, req, offset)
        else:
            saved = await super().remember(req)
        if self._routed and not saved.pending_approval:
            await self._delivered(saved.id)
        return saved


@pytest.fixture
def adapter_id() -> str:
    return ADAPTER


@pytest.fixture(params=["built-in", "routed-to-mem0", "routed-to-memwarden"])
def routing(request) -> str:
    """Where the tenant's memories live besides Memwarden's own store: nowhere, a mem0 backend, or a
    second Memwarden (another tenant of the live server, over HTTP): the router must keep every
    scenario's answers as the built-in store gives them."""
    if request.param == "routed-to-mem0":
        pytest.importorskip("mem0")
    return request.param


@pytest.fixture
def store(live_server, committed_ctx, routing):
    """A fresh store per scenario: a new tenant and key, on the live server. Synchronous, since two
    of the runner's tests are; its HTTP client keeps no connection between requests, so each
    scenario's event loop owns only what it opens and nothing is left to close."""
    from app.services.router import backends
    from app.services.tenancy.apikeys import create_key
    from app.services.tenancy.tenants import create_tenant

    actor = {"kind": "test", "id": "pytest"}
    tenant = create_tenant(committed_ctx, name=f"mw-conformance-{uuid.uuid4().hex[:8]}", actor=actor)
    key = create_key(committed_ctx, tenant_id=tenant.id, scopes="memory:read,memory:write", agents="*", actor=actor)
    if routing == "routed-to-mem0":
        # mem0's vectors in the test's PostgreSQL: every serving process that may deliver sees them.
        dsn = (committed_ctx.settings.migration_database_url or committed_ctx.settings.database_url).replace(
            "postgresql+psycopg://", "postgresql://")
        backends.add_backend(committed_ctx, tenant_name=tenant.name, name="mem0", kind="mem0",
                             options={"factory": "app.stores.mem0_local:memory",
                                      "factory_args": {"dsn": dsn, "collection": f"mem0_{uuid.uuid4().hex[:8]}"}},
                             actor=actor)
    elif routing == "routed-to-memwarden":
        other = create_tenant(committed_ctx, name=f"mw-conformance-far-{uuid.uuid4().hex[:8]}", actor=actor)
        far_key = create_key(committed_ctx, tenant_id=other.id, scopes="memory:read,memory:write", agents="*",
                             actor=actor)
        backends.add_backend(committed_ctx, tenant_name=tenant.name, name="far", kind="memwarden",
                             options={"url": live_server}, secret=far_key.token, actor=actor)
    http = httpx.AsyncClient(timeout=30.0, limits=httpx.Limits(max_keepalive_connections=0))
    return BackdatingStore(AsyncClient(live_server, key.token, http=http), committed_ctx, tenant.id,
                           routed=routing != "built-in")


def test_every_upstream_scenario_is_collected():
    """The runner parametrizes over the published scenario list; it must not come back empty."""
    assert len(_SCENARIOS[VERSION]) >= 16 and "test_conformance" in globals()


async def test_memorywires_router_fans_out_to_memwarden(store, live_server):
    """memorywire's own MemoryRouter over MemwardenStore: writes, governance and recall arrive as
    memorywire reports them; the router's k * 4 over-fetch is asked as the server's maximum."""
    from memorywire.models import RecallRequest
    from memorywire.router import MemoryRouter

    router = MemoryRouter([store])
    saved = await router.remember(RememberRequest(agent_id="agent-a", type="semantic",
                                                  content="Mallory keeps bees on her roof."))
    assert saved.stores == ["memwarden"] and not saved.pending_approval
    staged = await router.remember(RememberRequest(agent_id="agent-a", type="semantic", approval_required=True,
                                                   content="Mallory's hive key is under the mat."))
    assert staged.pending_approval and staged.approval_url.startswith("/review/chg_")  # no public URL: the path
    found = await router.recall(RecallRequest(agent_id="agent-a", query="Who keeps bees?", k=300, hops=1))
    assert found.stores_queried == ["memwarden"]
    assert [hit.id for hit in found.results] == [saved.id] and found.results[0].source_store == "memwarden"
    assert (await router.health())["status"] == "ok"
