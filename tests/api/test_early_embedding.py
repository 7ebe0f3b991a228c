"""The embedding started before the key's check (`app.services.memory.early_embedding`): only for a
token this process verified lately and left under its rate limit, and used only for the very text
the service embeds."""

from __future__ import annotations

import json

import numpy as np

from app.core import access
from app.services.memory import early_embedding
from app.services.tenancy.apikeys import authenticate_and_take_token, recently_verified, revoke_key

ACTOR = {"kind": "test", "id": "early"}


def _body(**fields) -> bytes:
    return json.dumps({"agent_id": "a", "type": "semantic", **fields}).encode()


def test_only_a_recently_verified_token_starts_an_embedding(ctx, make_key):
    token = make_key()
    key_id = access.parse_token(token)
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")  # the key's id, not its secret
    assert early_embedding.start(ctx, token, _body(query="where?"), "query") is None  # never verified here
    assert authenticate_and_take_token(ctx, forged, per_minute=0) == (None, None)
    assert early_embedding.start(ctx, forged, _body(query="where?"), "query") is None

    principal, _ = authenticate_and_take_token(ctx, token, per_minute=0)
    assert principal is not None and recently_verified(token) is not None
    early = early_embedding.start(ctx, token, _body(query="where is the key?"), "query")
    assert early is not None
    vector = early_embedding.embed(ctx, "where is the key?", early)
    assert np.allclose(vector, ctx.embedder.embed(["where is the key?"])[0], atol=1e-4)
    assert early_embedding.start(ctx, forged, _body(query="where?"), "query") is None  # still not the forger

    revoke_key(ctx, tenant_id=principal.tenant_id, key_id=key_id, actor=ACTOR)
    assert authenticate_and_take_token(ctx, token, per_minute=0) == (None, None)  # refused: loses its place
    assert recently_verified(token) is None
    assert early_embedding.start(ctx, token, _body(query="where?"), "query") is None


def test_a_key_at_its_rate_limit_starts_nothing_early(ctx, make_key):
    token = make_key()
    assert authenticate_and_take_token(ctx, token, per_minute=2)[1] is None  # 1 token left: may start early
    assert recently_verified(token) is not None
    assert authenticate_and_take_token(ctx, token, per_minute=2)[1] is None  # the last one: none to spare
    assert recently_verified(token) is None
    assert authenticate_and_take_token(ctx, token, per_minute=2)[1] is not None  # 429
    assert early_embedding.start(ctx, token, _body(query="where?"), "query") is None


def test_an_early_vector_is_used_only_for_the_text_it_embedded(ctx, make_key):
    token = make_key()
    authenticate_and_take_token(ctx, token, per_minute=0)
    early = early_embedding.start(ctx, token, _body(query="the first text"), "query")
    assert early is not None
    used = early_embedding.embed(ctx, "another text", early)
    assert np.allclose(used, ctx.embedder.embed(["another text"])[0], atol=1e-4)
    # A body that names no text, or is not JSON, embeds nothing early; the service embeds as always.
    for raw in (b"not json", _body(), _body(query=7)):
        nothing = early_embedding.start(ctx, token, raw, "query")
        assert nothing is not None and nothing.vector_for("anything") is None


def test_remember_embeds_early_the_content_as_the_tenant_redacts_it(ctx, client, make_key):
    token = make_key()
    headers = {"Authorization": f"Bearer {token}"}
    first = client.post("/v1/memories/remember", headers=headers,
                        json={"agent_id": "a", "type": "semantic", "content": "Warm-up fact."})
    assert first.status_code == 201, first.text  # the key is now verified, the tenant's rules cached
    content = "The deploy key is AKIAABCDEFGHIJKLMNOP and the user likes tea."
    early = early_embedding.start(ctx, token, _body(content=content), "content")
    assert early is not None
    text, vector = early.future.result()
    assert "AKIAABCDEFGHIJKLMNOP" not in text  # redacted before it was embedded
    response = client.post("/v1/memories/remember", headers=headers,
                           json={"agent_id": "a", "type": "semantic", "content": content})
    assert response.status_code == 201, response.text
    assert response.json()["memory"]["content"] == text
