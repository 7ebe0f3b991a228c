"""Secrets Memwarden must send on (webhook signing secrets, a backend's API key) stored sealed:
AES-GCM under a key derived from the server secret key for one purpose, bound to the owning
row's id (so a sealed value copied onto another row does not open). Rotating the server secret
key orphans every sealed value: recreate the webhooks and backends."""

from __future__ import annotations

import hashlib
import hmac
import os

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from app.services.runtime.context import AppContext

_NONCE = 12


def _cipher(ctx: AppContext, purpose: bytes) -> AESGCM:
    root = ctx.settings.resolved_secret_key().encode()
    return AESGCM(hmac.new(root, purpose, hashlib.sha256).digest())


def seal(ctx: AppContext, purpose: bytes, owner_id: str, secret: str) -> bytes:
    """nonce ‖ ciphertext of `secret` for the row `owner_id`."""
    nonce = os.urandom(_NONCE)
    return nonce + _cipher(ctx, purpose).encrypt(nonce, secret.encode(), owner_id.encode())


def unseal(ctx: AppContext, purpose: bytes, owner_id: str, blob: bytes) -> str:
    """The secret `seal` sealed for `owner_id` (raises `cryptography`'s InvalidTag otherwise)."""
    return _cipher(ctx, purpose).decrypt(blob[:_NONCE], blob[_NONCE:], owner_id.encode()).decode()
