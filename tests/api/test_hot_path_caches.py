"""What the hot path keeps between requests never outlives a change: the per-tenant rules cache
(redactor, redaction mode, policy) follows settings and secrets changed after it was filled, and
recall counts batched off the request reach the rows."""

from sqlalchemy import text

from app.core.access import Principal
from app.db import prepared
from app.repos.memory import search_sizes
from app.repos.memory.memories import Scope
from app.services.memory import recall as recall_service
from app.services.memory import recall_tracking
from app.services.tenancy.apikeys import authenticate, create_key
from app.services.memory.remembering import remember
from app.services.tenancy.tenant_config import register_secret, set_policy, set_redaction_mode
from tests.harness import bearer, unique

ADMIN = {"kind": "test", "id": "pytest"}
SECRET = "plum-4471-harbour-lantern"


def _remember(client, headers, content):
    return client.post("/v1/memories/remember", json={"agent_id": "agent-a", "type": "semantic",
                                                      "content": content}, headers=headers)


def test_rules_cache_follows_secrets_mode_and_policy_changed_after_it_was_filled(client, ctx, tenant, make_key):
    set_policy(ctx, tenant_id=tenant.id, doc={"rules": []}, actor=ADMIN)
    headers = bearer(make_key())
    first = _remember(client, headers, "The garden gate code is kept by Ana.")
    assert first.status_code == 201, first.text  # the tenant's rules are cached now

    register_secret(ctx, tenant_id=tenant.id, label="gate", value=SECRET, actor=ADMIN)
    redacted = _remember(client, headers, f"Ana says the vault phrase is {SECRET} today.")
    assert redacted.status_code == 201, redacted.text
    assert SECRET not in redacted.json()["memory"]["content"]
    assert redacted.json()["redactions"], "a secret registered after the cache filled is still redacted"

    set_redaction_mode(ctx, tenant_id=tenant.id, mode="reject", actor=ADMIN)
    rejected = _remember(client, headers, f"Once more: {SECRET}.")
    assert rejected.status_code == 422 and rejected.json()["error"]["code"] == "secret_leakage", rejected.text

    set_policy(ctx, tenant_id=tenant.id, actor=ADMIN,
               doc={"rules": [{"id": "all-staged", "match": {"operations": ["remember"]},
                               "action": "require_approval"}]})
    staged = _remember(client, headers, "Ana waters the tomatoes on Tuesdays.")
    assert staged.status_code == 202, staged.text


def test_config_version_changes_with_every_settings_or_secret_change(ctx, tenant, make_key):
    token = make_key()
    versions = [authenticate(ctx, token).config_version]
    set_redaction_mode(ctx, tenant_id=tenant.id, mode="reject", actor=ADMIN)
    versions.append(authenticate(ctx, token).config_version)
    register_secret(ctx, tenant_id=tenant.id, label="x", value=SECRET, actor=ADMIN)
    versions.append(authenticate(ctx, token).config_version)
    assert None not in versions and len(set(versions)) == 3


def test_recall_counts_are_batched_and_reach_the_rows(committed_ctx):
    from app.services.tenancy.tenants import create_tenant

    tenant = create_tenant(committed_ctx, name=unique("rc"), actor=ADMIN)
    set_policy(committed_ctx, tenant_id=tenant.id, doc={"rules": []}, actor=ADMIN)
    key = create_key(committed_ctx, tenant_id=tenant.id, scopes="memory:read,memory:write", actor=ADMIN).key
    principal = Principal(tenant.id, key.id, frozenset({"memory:read", "memory:write"}), ("*",))
    stored = remember(committed_ctx, principal, {"agent_id": "a", "type": "semantic",
                                                 "content": "Bruno keeps bees on the roof of the library."})
    memory_id = stored.body["id"]
    for _ in range(3):
        hits = recall_service.recall(committed_ctx, principal, {"agent_id": "a", "query": "Who keeps bees?",
                                                                "min_score": -1})["hits"]
        assert [h["id"] for h in hits] == [memory_id]
    recall_tracking.flush(committed_ctx.db.engine)
    with committed_ctx.db.engine.connect() as conn:
        count, last = conn.execute(text("SELECT recall_count, last_recalled_at FROM memories WHERE id = :id"),
                                   {"id": memory_id}).one()
    assert count == 3 and last is not None


def test_a_stale_scope_size_only_changes_the_plan_never_the_answer(client, ctx, tenant, make_key, monkeypatch):
    set_policy(ctx, tenant_id=tenant.id, doc={"rules": []}, actor=ADMIN)
    headers = bearer(make_key())
    assert _remember(client, headers, "Carla's bicycle is a green Brompton.").status_code == 201
    body = {"agent_id": "agent-a", "query": "What bicycle does Carla ride?", "min_score": -1}
    exact = client.post("/v1/memories/recall", json=body, headers=headers).json()["hits"]
    key = search_sizes.ScopeSizes.key(Scope(tenant.id, "agent-a", None), {
        "types": None, "tags": None, "metadata": None, "fresher_than_days": None})
    search_sizes.scope_sizes.put(key, search_sizes.EXACT_SCAN_MAX + 5)  # as if another process had grown it
    stale = client.post("/v1/memories/recall", json=body, headers=headers).json()["hits"]  # the HNSW path
    assert [h["id"] for h in stale] == [h["id"] for h in exact]
    monkeypatch.setattr(search_sizes, "LARGE_SCOPE_RECOUNT_S", 0.0)  # a large size is trusted only so long
    recounted = client.post("/v1/memories/recall", json=body, headers=headers).json()["hits"]
    assert [h["id"] for h in recounted] == [h["id"] for h in exact]
    assert search_sizes.scope_sizes.get(key) == 1


def test_large_scopes_take_the_hnsw_path_and_fetch_the_same_rows(client, ctx, tenant, make_key, monkeypatch):
    set_policy(ctx, tenant_id=tenant.id, doc={"rules": []}, actor=ADMIN)
    headers = bearer(make_key())
    for fact in ("Dora's car is a red Fiat.", "Dora's cat is called Miso.", "Dora lives in Porto."):
        assert _remember(client, headers, fact).status_code == 201
    body = {"agent_id": "agent-a", "query": "What is Dora's cat called?", "min_score": -1, "k": 3}
    exact = client.post("/v1/memories/recall", json=body, headers=headers).json()["hits"]
    monkeypatch.setattr(search_sizes, "EXACT_SCAN_MAX", 1)  # every scope is "large" now
    approximate = client.post("/v1/memories/recall", json=body, headers=headers).json()["hits"]
    assert [h["id"] for h in approximate] == [h["id"] for h in exact]
    assert [h["content"] for h in approximate] == [h["content"] for h in exact]
    assert exact[0]["content"] == "Dora's cat is called Miso."


def test_both_legs_sent_in_one_pipeline_answer_as_the_two_statements_one_after_the_other(
        client, ctx, tenant, make_key, monkeypatch):
    """Once the scope is known small, recall's vector and keyword statements go out together
    (`search.recall_candidates`); the answer is the one the two statements gave in turn."""
    set_policy(ctx, tenant_id=tenant.id, doc={"rules": []}, actor=ADMIN)
    headers = bearer(make_key())
    for fact in ("Ines keeps bees on her roof.", "Ines's bees make lavender honey.", "Ines cycles to work."):
        assert _remember(client, headers, fact).status_code == 201
    together = []
    real = prepared.fetch_rows_together
    monkeypatch.setattr(prepared, "fetch_rows_together", lambda *a, **kw: together.append(1) or real(*a, **kw))
    body = {"agent_id": "agent-a", "query": "What do Ines's bees make?", "k": 3}
    in_turn = client.post("/v1/memories/recall", json=body, headers=headers).json()["hits"]  # counts the scope
    assert together == []
    piped = client.post("/v1/memories/recall", json=body, headers=headers).json()["hits"]
    assert together == [1]
    assert [(h["id"], h["score"], h["similarity"]) for h in piped] == [
        (h["id"], h["score"], h["similarity"]) for h in in_turn]
    assert piped[0]["content"] == "Ines's bees make lavender honey."


def test_one_statement_key_check_takes_no_token_for_a_wrong_secret(ctx, make_key):
    from starlette.testclient import TestClient

    from app.main import create_app

    token = make_key()
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")  # right key id, wrong secret
    app = create_app(ctx.settings.with_changes(rate_limit_per_minute=2), ctx=ctx)
    with TestClient(app) as limited:
        assert [limited.get("/v1/whoami", headers=bearer(forged)).status_code for _ in range(5)] == [401] * 5
        assert [limited.get("/v1/whoami", headers=bearer(token)).status_code for _ in range(3)] == [200, 200, 429]


def test_closing_the_context_writes_pending_recall_counts(settings, committed_ctx):
    from app.db.database import make_database, make_engine
    from app.services.runtime.context import AppContext
    from app.services.tenancy.tenants import create_tenant

    own = AppContext(settings, make_database(make_engine(settings.database_url, pool_size=1)))
    tenant = create_tenant(own, name=unique("rc"), actor=ADMIN)
    set_policy(own, tenant_id=tenant.id, doc={"rules": []}, actor=ADMIN)
    key = create_key(own, tenant_id=tenant.id, scopes="memory:read,memory:write", actor=ADMIN).key
    principal = Principal(tenant.id, key.id, frozenset({"memory:read", "memory:write"}), ("*",))
    memory_id = remember(own, principal, {"agent_id": "a", "type": "semantic",
                                          "content": "Greta repairs clocks on Saturdays."}).body["id"]
    recall_tracking.FLUSH_SECONDS, before = 3600.0, recall_tracking.FLUSH_SECONDS  # no timed flush
    try:
        recall_service.recall(own, principal, {"agent_id": "a", "query": "Who repairs clocks?", "min_score": -1})
        own.close()
    finally:
        recall_tracking.FLUSH_SECONDS = before
    with committed_ctx.db.engine.connect() as conn:
        count = conn.execute(text("SELECT recall_count FROM memories WHERE id = :id"), {"id": memory_id}).scalar()
    assert count == 1
