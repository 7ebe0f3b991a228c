"""mem0 2.x as a memory backend, end to end, as docs/operators/backends.md tells an operator to run
it: `memwarden backend add` with the offline factory `app.stores.mem0_local:memory` (the bundled
embedder, pgvector in Memwarden's own database), a staged write approved, delivered by the live
server, read back from mem0 itself (with mem0's own `Memory`, and with `memwarden backend show`),
`backend drift` clean, then forgotten and gone from mem0.

Also what `backend add` refuses (a factory serve cannot import, a config that is not there) and
what `drift` and `show` say of a store that lives inside one process: an error naming why, exit 2,
never a traceback and never a fresh store's "everything is missing"."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from app.services.tenancy.apikeys import create_key
from app.services.tenancy.tenants import create_tenant
from memwarden.client import Client
from tests.harness import PROJECT_ROOT, server_env, unique

pytest.importorskip("mem0")

ACTOR = {"kind": "test", "id": "pytest"}


def cli(settings, *args: str, cwd=PROJECT_ROOT, **env: str) -> subprocess.CompletedProcess:
    """`memwarden ARGS` beside the live server, on its database."""
    return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=cwd, env=server_env(settings, **env),
                          capture_output=True, text=True, timeout=300)


def _wait_delivered(mw: Client, memory_id: str, action: str) -> str | None:
    for _ in range(300):
        rows = mw.deliveries(memory_id)
        if rows and rows[0].status == "delivered" and rows[0].action == action:
            return rows[0].backend_ref
        assert not rows or rows[0].status != "failed", rows
        time.sleep(0.1)
    raise AssertionError(f"{memory_id}: no {action} delivered: {rows}")


def _mem0(settings, collection: str):
    """mem0's own `Memory` on the store the server delivers to (what an operator's mem0 code sees)."""
    from app.stores.mem0_local import memory

    return memory(dsn=settings.migration_database_url.replace("postgresql+psycopg://", "postgresql://"),
                  collection=collection)


def test_approve_deliver_read_back_forget_gone(settings, committed_ctx, live_server):
    tenant = create_tenant(committed_ctx, name=unique("mem0"), actor=ACTOR)
    agent = create_key(committed_ctx, tenant_id=tenant.id, scopes="memory:read,memory:write", agents="*", actor=ACTOR)
    reviewer = create_key(committed_ctx, tenant_id=tenant.id, scopes="review:decide,memory:read", agents="*",
                          actor=ACTOR)
    collection = unique("mem0").replace("-", "_")
    added = cli(settings, "backend", "add", "--tenant", tenant.name, "--name", "team-mem0", "--kind", "mem0",
                "--factory", "app.stores.mem0_local:memory", "--factory-arg", f"collection={collection}")
    assert added.returncode == 0, added.stderr

    with Client(live_server, agent.token) as mw, Client(live_server, reviewer.token) as rv:
        staged = mw.remember(agent_id="support-1", user_id="ada", content="Ada prefers email.", approval_required=True)
        assert staged.pending and mw.deliveries(staged.id) == []  # nothing reaches mem0 before review
        rv.approve(staged.change_id)
        memory_id = staged.id
        ref = _wait_delivered(mw, memory_id, "put")

        store = _mem0(settings, collection)
        item = store.get(ref)
        assert item["memory"] == "Ada prefers email." and item["metadata"]["memwarden_id"] == memory_id

        shown = cli(settings, "backend", "show", memory_id, "--tenant", tenant.name, "--name", "team-mem0")
        assert shown.returncode == 0, shown.stderr
        report = json.loads(shown.stdout)
        assert report["backend_ref"] == ref and report["delivery"]["status"] == "delivered"
        assert report["store"]["by_ref"] == {"present": True, "content": "Ada prefers email.",
                                             "matches_memwarden": True}
        assert report["store"]["items"] == [{"ref": ref, "content": "Ada prefers email."}]

        drift = cli(settings, "backend", "drift", "--tenant", tenant.name, "--name", "team-mem0")
        assert drift.returncode == 0, drift.stdout + drift.stderr
        assert json.loads(drift.stdout)["problems"] == [] and json.loads(drift.stdout)["store_checked"] == 1

        mw.forget(agent_id="support-1", ids=[memory_id], reason="the user asked")
        _wait_delivered(mw, memory_id, "delete")
    assert store.get(ref) is None
    assert store.get_all(filters={"agent_id": "support-1", "memwarden_id": memory_id})["results"] == []
    gone = json.loads(cli(settings, "backend", "show", memory_id, "--tenant", tenant.name, "--name",
                          "team-mem0").stdout)
    assert gone["memwarden"]["status"] != "live" and gone["backend_ref"] is None and gone["store"]["items"] == []


def test_add_refuses_a_factory_serve_cannot_import(settings, committed_ctx, tmp_path):
    tenant = create_tenant(committed_ctx, name=unique("mem0"), actor=ACTOR)
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "__init__.py").write_text("")
    (tmp_path / "ops" / "stores.py").write_text("def mem0_memory():\n    raise AssertionError('never called')\n")
    common = ["backend", "add", "--tenant", tenant.name, "--name", "team-mem0", "--kind", "mem0"]
    # beside the shell's directory only: a server started elsewhere would not find it
    missing = cli(settings, *common, "--factory", "ops.stores:mem0_memory", cwd=tmp_path)
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert "cannot import the factory ops.stores:mem0_memory" in missing.stderr
    assert "ModuleNotFoundError: No module named 'ops'" in missing.stderr and "PYTHONPATH" in missing.stderr
    wrong = cli(settings, *common, "--factory", "app.stores.mem0_local:nothing_here")
    assert wrong.returncode == 2 and "AttributeError" in wrong.stderr
    shape = cli(settings, *common, "--factory", "app.stores.mem0_local")
    assert shape.returncode == 2 and "a factory is module:callable" in shape.stderr
    config = cli(settings, *common, "--config", str(tmp_path / "absent.json"))
    assert config.returncode == 2 and "cannot read the mem0 config" in config.stderr
    listed = cli(settings, "backend", "list", "--tenant", tenant.name, "--json")
    assert json.loads(listed.stdout) == []  # nothing was added
    on_path = cli(settings, *common, "--factory", "ops.stores:mem0_memory", PYTHONPATH=str(tmp_path))
    assert on_path.returncode == 0, on_path.stderr  # importable (and not called) once on serve's path
    # drift from a shell without that path: the error names the factory, no traceback
    lost = cli(settings, "backend", "drift", "--tenant", tenant.name, "--name", "team-mem0")
    assert lost.returncode == 2 and "Traceback" not in lost.stderr, lost.stderr
    assert "cannot build its store" in lost.stderr and "ops.stores:mem0_memory" in lost.stderr
    cli(settings, "backend", "remove", "--tenant", tenant.name, "--name", "team-mem0")


def test_drift_and_show_refuse_a_store_held_inside_one_process(settings, committed_ctx, live_server):
    tenant = create_tenant(committed_ctx, name=unique("mem0"), actor=ACTOR)
    agent = create_key(committed_ctx, tenant_id=tenant.id, scopes="memory:read,memory:write", agents="*", actor=ACTOR)
    added = cli(settings, "backend", "add", "--tenant", tenant.name, "--name", "local", "--kind", "mem0",
                "--factory", "tests.process_local_stores:embedded_qdrant_mem0", PYTHONPATH=str(PROJECT_ROOT))
    assert added.returncode == 0, added.stderr
    with Client(live_server, agent.token) as mw:
        saved = mw.remember(agent_id="support-1", content="Grace prefers phone calls.")
        _wait_delivered(mw, saved.id, "put")  # the live server holds it, in its own process
    for args in (["drift"], ["show", saved.id]):
        done = cli(settings, "backend", *args, "--tenant", tenant.name, "--name", "local", PYTHONPATH=str(PROJECT_ROOT))
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert "embedded Qdrant" in done.stderr and "app.stores.mem0_local:memory" in done.stderr
        assert "missing_in_store" not in done.stdout
