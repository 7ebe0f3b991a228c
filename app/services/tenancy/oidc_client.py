"""The OpenID Connect relying party: authorization code flow with PKCE against the deployment's
provider (`MEMWARDEN_OIDC_*`). Authlib builds the authorization request and redeems the code;
joserfc (Authlib's JOSE library) checks the ID token's signature against the provider's JWKS and
its issuer, audience, expiry and nonce. The provider's metadata and keys are fetched on first use
and cached; an unknown signing key refetches the JWKS once (key rotation).

Every request to the provider obeys the outbound rule (`app.services.runtime.outbound`): the discovery
document names the other endpoints, so they are checked at each request like the issuer, and no
redirect is followed. A provider on the operator's own network needs MEMWARDEN_OIDC_ALLOW_PRIVATE.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

import httpx
from authlib.integrations.httpx_client import OAuth2Client
from authlib.integrations.httpx_client._compat import httpx2 as authlib_http
from authlib.oauth2 import OAuth2Error
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from app.config import Settings
from app.errors import Forbidden, Unavailable
from app.services.runtime.outbound import OutboundRule, outbound_client, url_refusal

CALLBACK_PATH = "/login/oidc/callback"
METADATA_TTL_SECONDS = 3600
HTTP_TIMEOUT_SECONDS = 10
# Asymmetric algorithms only: `none` and HMAC (keyed with the client secret) are never accepted.
ID_TOKEN_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
CLOCK_LEEWAY_SECONDS = 60


class OidcMisconfigured(ValueError):
    """The deployment's OIDC settings are incomplete (raised at startup)."""


@dataclass(frozen=True)
class PendingSignIn:
    """What the browser carries (signed, short-lived) between leaving for the provider and coming back."""

    state: str
    nonce: str
    verifier: str
    next_url: str

    def to_doc(self) -> dict[str, str]:
        return {"s": self.state, "n": self.nonce, "v": self.verifier, "u": self.next_url}

    @classmethod
    def from_doc(cls, doc: Any) -> PendingSignIn | None:
        if not isinstance(doc, dict) or not all(isinstance(doc.get(k), str) for k in "snvu"):
            return None
        return cls(doc["s"], doc["n"], doc["v"], doc["u"])


class _OutboundBridge(authlib_http.BaseTransport):
    """Authlib sends through its own HTTP package (httpx2 where installed, else httpx); this
    transport carries its requests over an outbound-rule client, so the token endpoint the
    discovery document named is resolved, checked and pinned like every other request."""

    # Describe the body as it was on the wire; the content handed on is already decoded.
    _ENCODING_HEADERS = {"content-encoding", "content-length", "transfer-encoding"}

    def __init__(self, rule: OutboundRule):
        self._client = outbound_client(rule, timeout=HTTP_TIMEOUT_SECONDS)

    def handle_request(self, request):
        try:
            response = self._client.request(request.method, str(request.url), headers=list(request.headers.raw),
                                            content=request.read())
        except httpx.TimeoutException as exc:
            raise authlib_http.TimeoutException(str(exc), request=request) from exc
        except httpx.HTTPError as exc:
            raise authlib_http.TransportError(str(exc), request=request) from exc
        headers = [(k, v) for k, v in response.headers.raw if k.decode("latin-1").lower() not in self._ENCODING_HEADERS]
        return authlib_http.Response(response.status_code, headers=headers, content=response.content, request=request)

    def close(self) -> None:
        self._client.close()


class OidcClient:
    """One per process, built from the settings when `MEMWARDEN_OIDC_ISSUER` is set. `issuer` is
    that setting without a trailing `/`: it names the provider in the accounts it provisions."""

    def __init__(self, settings: Settings):
        if not settings.oidc_client_id:
            raise OidcMisconfigured("MEMWARDEN_OIDC_ISSUER is set but MEMWARDEN_OIDC_CLIENT_ID is not")
        if not settings.public_url:
            raise OidcMisconfigured("MEMWARDEN_OIDC_ISSUER needs MEMWARDEN_PUBLIC_URL (the redirect URI is under it)")
        if "openid" not in settings.oidc_scopes.split():
            raise OidcMisconfigured("MEMWARDEN_OIDC_SCOPES must include `openid`")
        self.rule = OutboundRule.for_oidc(settings)
        _, refusal = url_refusal(settings.oidc_issuer or "", self.rule)
        if refusal:
            raise OidcMisconfigured(f"MEMWARDEN_OIDC_ISSUER: {refusal}")
        self.issuer = settings.oidc_issuer.rstrip("/")
        self.client_id = settings.oidc_client_id
        try:
            self.client_secret = (settings.oidc_client_secret_file.read_text().strip()
                                  if settings.oidc_client_secret_file else None)
        except OSError as exc:
            raise OidcMisconfigured(f"MEMWARDEN_OIDC_CLIENT_SECRET_FILE cannot be read: {exc.strerror}") from None
        self.scopes = settings.oidc_scopes
        self.provider_name = settings.oidc_provider_name
        self.public_url = settings.public_url.rstrip("/")
        self.redirect_uri = self.public_url + CALLBACK_PATH
        self._lock = threading.Lock()
        self._metadata: dict[str, Any] | None = None
        self._metadata_at = 0.0
        self._keys: KeySet | None = None

    # --- provider metadata -------------------------------------------------------------------

    def metadata(self) -> dict[str, Any]:
        """The provider's discovery document (cached for METADATA_TTL_SECONDS)."""
        with self._lock:
            if self._metadata is None or time.monotonic() - self._metadata_at > METADATA_TTL_SECONDS:
                doc = self._get_json(self.issuer + "/.well-known/openid-configuration")
                if str(doc.get("issuer", "")).rstrip("/") != self.issuer:
                    raise Unavailable("the identity provider's discovery document names another issuer")
                self._metadata, self._metadata_at, self._keys = doc, time.monotonic(), None
            return self._metadata

    def _key_set(self, refresh: bool = False) -> KeySet:
        metadata = self.metadata()
        with self._lock:
            if self._keys is None or refresh:
                self._keys = KeySet.import_key_set(self._get_json(metadata["jwks_uri"]))
            return self._keys

    def _get_json(self, url: str) -> dict[str, Any]:
        try:
            with outbound_client(self.rule, timeout=HTTP_TIMEOUT_SECONDS) as http:
                response = http.get(url, headers={"accept": "application/json"})
            response.raise_for_status()
            doc = response.json()
        except (httpx.HTTPError, ValueError):
            raise Unavailable("the identity provider cannot be reached; try again shortly") from None
        if not isinstance(doc, dict):
            raise Unavailable("the identity provider answered something unexpected")
        return doc

    def _oauth(self) -> OAuth2Client:
        return OAuth2Client(self.client_id, self.client_secret, scope=self.scopes, redirect_uri=self.redirect_uri,
                            code_challenge_method="S256", timeout=HTTP_TIMEOUT_SECONDS,
                            transport=_OutboundBridge(self.rule), follow_redirects=False,
                            token_endpoint_auth_method="client_secret_basic" if self.client_secret else "none")

    # --- the flow ------------------------------------------------------------------------------

    def begin(self, next_url: str) -> tuple[str, PendingSignIn]:
        """The provider's authorization URL to send the browser to, and what to remember meanwhile."""
        pending = PendingSignIn(secrets.token_urlsafe(32), secrets.token_urlsafe(32), secrets.token_urlsafe(48),
                                next_url)
        with self._oauth() as oauth:
            url, _ = oauth.create_authorization_url(self.metadata()["authorization_endpoint"], state=pending.state,
                                                    nonce=pending.nonce, code_verifier=pending.verifier)
        return url, pending

    def finish(self, pending: PendingSignIn, *, state: str, code: str) -> dict[str, Any]:
        """Redeem the code (with the PKCE verifier) and return the person's verified claims: the ID
        token's, completed by the userinfo endpoint's for the same subject. Forbidden when the
        answer does not belong to this sign-in or does not verify."""
        if not hmac.compare_digest(state.encode(), pending.state.encode()):
            raise Forbidden("this sign-in did not start here, or has expired; start again")
        metadata = self.metadata()
        try:
            with self._oauth() as oauth:
                token = oauth.fetch_token(metadata["token_endpoint"], grant_type="authorization_code", code=code,
                                          code_verifier=pending.verifier)
        except OAuth2Error as exc:
            raise Forbidden(f"the identity provider refused the sign-in ({exc.error})") from None
        except (httpx.HTTPError, authlib_http.HTTPError):
            raise Unavailable("the identity provider cannot be reached; try again shortly") from None
        claims = self._verify_id_token(str(token.get("id_token") or ""), pending.nonce)
        if metadata.get("userinfo_endpoint") and token.get("access_token"):
            info = self._userinfo(metadata["userinfo_endpoint"], token["access_token"])
            if info.get("sub") == claims["sub"]:  # another subject's answer is ignored (OIDC Core 5.3.2)
                claims = {**info, **claims}
        return claims

    def _verify_id_token(self, id_token: str, nonce: str) -> dict[str, Any]:
        if not id_token:
            raise Forbidden("the identity provider sent no ID token")
        allowed = [alg for alg in self.metadata().get("id_token_signing_alg_values_supported", ["RS256"])
                   if alg in ID_TOKEN_ALGORITHMS]
        try:
            try:
                decoded = jwt.decode(id_token, self._key_set(), algorithms=allowed)
            except JoseError:  # perhaps a key rotated in since the JWKS was fetched: once more, fresh
                decoded = jwt.decode(id_token, self._key_set(refresh=True), algorithms=allowed)
            jwt.JWTClaimsRegistry(  # `iss` exactly as discovery gave it (some providers end it with a `/`)
                leeway=CLOCK_LEEWAY_SECONDS, iss={"essential": True, "value": self.metadata()["issuer"]},
                aud={"essential": True, "value": self.client_id}, sub={"essential": True},
                exp={"essential": True}, nonce={"essential": True, "value": nonce},
            ).validate(decoded.claims)
        except (JoseError, ValueError):
            raise Forbidden("the identity provider's ID token did not verify") from None
        claims = dict(decoded.claims)
        audience = claims.get("aud")
        if isinstance(audience, list) and len(audience) > 1 and claims.get("azp") != self.client_id:
            raise Forbidden("the identity provider's ID token was issued to another client")
        if not isinstance(claims.get("sub"), str) or not claims["sub"]:
            raise Forbidden("the identity provider's ID token names no subject")
        return claims

    def _userinfo(self, url: str, access_token: str) -> dict[str, Any]:
        try:
            with outbound_client(self.rule, timeout=HTTP_TIMEOUT_SECONDS) as http:
                response = http.get(url, headers={"authorization": f"Bearer {access_token}"})
            response.raise_for_status()
            doc = response.json()
        except (httpx.HTTPError, ValueError):
            raise Unavailable("the identity provider's userinfo endpoint cannot be reached") from None
        return doc if isinstance(doc, dict) else {}

    def end_session_url(self) -> str | None:
        """Where to send a browser to sign out at the provider too (RP-initiated logout), or None
        when the provider offers no `end_session_endpoint` (or cannot be reached)."""
        try:
            endpoint = self.metadata().get("end_session_endpoint")
        except Unavailable:
            return None
        if not endpoint:
            return None
        query = httpx.QueryParams({"client_id": self.client_id, "post_logout_redirect_uri": self.public_url + "/login"})
        return f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"
