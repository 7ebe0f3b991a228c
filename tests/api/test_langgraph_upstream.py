"""LangGraph's own store test module, run against `MemwardenStore` on a live `memwarden serve`.

The module is `tests/test_store.py` of the `langgraph-checkpoint` source distribution on PyPI, for
the version installed here, fetched with pip at collection time (cached) and executed unchanged. The
one adaptation is how a store is constructed: its `InMemoryStore(...)` builds a `MemwardenStore`
(a fresh agent per store) on the live server. The `index` config's `fields` carry over; its fake
character-frequency embedder cannot, since the server embeds with its own model.

Every upstream test that fails against Memwarden is listed in DIFFERENCES with the reason, and is
a strict xfail: should it start passing, the suite fails until the list (and docs/agents/langgraph.md's
compatibility table) is corrected.
"""

from __future__ import annotations

import linecache
import sys
import types
import uuid
from importlib.metadata import version

import pytest

pytest.importorskip("langgraph.store.base")
pytest.importorskip("pytest_mock")

from memwarden.client import Client  # noqa: E402
from memwarden.langgraph import MemwardenStore  # noqa: E402
from tests.upstream import sdist_files  # noqa: E402

DISTRIBUTION = "langgraph-checkpoint"
VERSION = version(DISTRIBUTION)

# Upstream tests that fail against MemwardenStore, and why (keep the table in docs/agents/langgraph.md in step).
DIFFERENCES = {
    "test_vector_store_initialization":
        "checks InMemoryStore's own index_config (dims, embed); Memwarden embeds on the server, so a "
        "client-side embedder is refused, not stored",
    "test_embed_with_path":
        "InMemoryStore keeps one vector per indexed field and scores an item by its best field; a "
        "memory has one embedding, of the named fields' text joined, so its per-field score "
        "equalities cannot hold",
}


_FILES = sdist_files(DISTRIBUTION, VERSION, "tests/")
_UPSTREAM = _FILES["tests/test_store.py"]
_EMBED_UTILS = _FILES["tests/embed_test_utils.py"]

for _file, _text in (("embed_test_utils.py", _EMBED_UTILS), ("test_store.py", _UPSTREAM)):  # readable tracebacks
    linecache.cache[f"langgraph-checkpoint/tests/{_file}"] = (len(_text), None, _text.splitlines(True), _file)

# The module imports `tests.embed_test_utils`; our `tests` package is another, so give it that submodule.
_utils = types.ModuleType("tests.embed_test_utils")
exec(compile(_EMBED_UTILS, "langgraph-checkpoint/tests/embed_test_utils.py", "exec"), _utils.__dict__)
sys.modules["tests.embed_test_utils"] = _utils

exec(compile(_UPSTREAM, "langgraph-checkpoint/tests/test_store.py", "exec"), globals())


# --- the adaptation: how a store is constructed ------------------------------------------------

_live: dict[str, Client] = {}


class InMemoryStore(MemwardenStore):  # noqa: F811 - replaces the upstream module's store, by design
    """What the upstream module's `InMemoryStore(index=...)` now builds."""

    def __init__(self, *, index: dict | None = None) -> None:
        fields = (index or {}).get("fields")
        super().__init__(_live["client"], agent_id=f"lg-{uuid.uuid4().hex[:12]}",
                         index={"fields": fields} if fields else None)


for _name, _reason in DIFFERENCES.items():
    globals()[_name] = pytest.mark.xfail(strict=True, reason=_reason)(globals()[_name])

pytestmark = pytest.mark.anyio  # the upstream module's async tests (it runs them with pytest-asyncio's auto mode)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module", autouse=True)
def live_client(live_server, committed_ctx):
    """One tenant and key for the module; every store is a fresh agent in it."""
    from app.services.tenancy.apikeys import create_key
    from app.services.tenancy.tenants import create_tenant

    actor = {"kind": "test", "id": "pytest"}
    tenant = create_tenant(committed_ctx, name=f"lg-upstream-{uuid.uuid4().hex[:8]}", actor=actor)
    key = create_key(committed_ctx, tenant_id=tenant.id, scopes="memory:read,memory:write", agents="*", actor=actor)
    with Client(live_server, key.token) as client:
        _live["client"] = client
        yield client
        _live.clear()
