"""A request's embedding started as soon as its body is read, beside the key's check.

remember and recall each embed one text, the largest part of their time. Started on the event
loop right after the body is read, the embedding runs while the request waits for its thread,
the key's check and rate-limit token (a database round trip), the scope check and the body's
validation, instead of after them.

Who may start one: only a caller whose bearer token hashes to that of a key this process
verified within `RECENT_SECONDS`, still active and with a rate-limit token to spare at that check
(`apikeys.recently_verified`). A caller without a key's secret cannot make the server embed
anything before its key is checked (the forged-key concern: ~7 ms of CPU per request before any
limit), and a key refused since (revoked, over its limit) lost its place at that refusal: at most
the requests already in flight then embed early once more.

What is embedded: the text the service will embed if the tenant's settings are still those cached
for the version the key was last checked with (recall: the query; remember: the content redacted
by that tenant's rules). The service uses the vector only when the text it embeds is exactly the
same (`vector_for`), and embeds again otherwise; a refused request's early embedding is dropped.
An embedding that has not started by the time the service needs it is cancelled and done inline.
"""

from __future__ import annotations

import contextvars
import json
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from app.services.tenancy import apikeys
from app.services.tenancy.tenant_config import cached_rules

if TYPE_CHECKING:
    from app.services.runtime.context import AppContext

_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="early-embed")


class Early:
    """An embedding started before its request was authenticated: (text, vector) when done, or
    None when the body named no text to embed."""

    __slots__ = ("future",)

    def __init__(self, future: Future):
        self.future = future

    def vector_for(self, text: str) -> np.ndarray | None:
        """The vector of `text` if that is what was embedded early, else None (embed it yourself)."""
        if self.future.cancel():  # not started yet: quicker to embed on the caller's thread
            return None
        done = self.future.result()
        if done is None or done[0] != text:
            return None
        return done[1]

    def drop(self) -> None:
        """The request will not use it (refused): cancel it if it has not started."""
        self.future.cancel()


def start(ctx: AppContext, token: str | None, raw: bytes, field: str) -> Early | None:
    """Start embedding the body's `field` (`query` for recall, `content` for remember) when the
    token is one recently verified here (see the module docstring); None otherwise."""
    if token is None:
        return None
    recent = apikeys.recently_verified(token)
    if recent is None:
        return None
    # In the request's context (its trace span): the embedding's span is the request's child, not
    # a lone root span in the pool's thread.
    return Early(_pool.submit(contextvars.copy_context().run, _embed_field, ctx, recent, raw, field))


def _embed_field(ctx: AppContext, recent: apikeys.RecentKey, raw: bytes, field: str) -> tuple[str, Any] | None:
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    text = body.get(field) if isinstance(body, dict) else None
    if not isinstance(text, str) or not text or len(text) > ctx.settings.max_entry_size_bytes:
        return None
    if field == "content":  # remember embeds the content as the tenant's rules redact it
        rules = cached_rules(ctx, recent.tenant_id, recent.config_version)
        if rules is None:
            return None
        text = rules.redactor.redact_payload(text, [], {}).content
    return text, ctx.embedder.embed([text])[0]


def embed(ctx: AppContext, text: str, early: Early | None) -> np.ndarray:
    """The embedding of `text`: the one started early when it is of this very text, else made now."""
    if early is not None:
        vector = early.vector_for(text)
        if vector is not None:
            return vector
    return ctx.embedder.embed([text])[0]
