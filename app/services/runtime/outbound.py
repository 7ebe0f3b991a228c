"""The outbound rule for every connection Memwarden opens to a URL someone configured: webhook
deliveries, memory backends (another Memwarden), the OIDC provider's endpoints and the audit
witness URL. Resolve, check, pin.

* At configuration time `url_refusal` checks the URL by its syntax alone (no DNS on the request
  path): http(s), a valid host, no credentials, and no host that is itself a denied address, in
  any of the numeric forms the C library's resolver accepts (`app.core.addresses`).
* At each connection `OutboundTransport` resolves the name, refuses the request when any address
  it resolves to is denied, and connects to the very address it checked, with the name kept in
  the Host header and for TLS (SNI and the certificate check), so a second look-up cannot rebind
  the name to an internal address. Every request goes through it, a redirect's too; the clients
  built by `outbound_client` do not follow redirects at all.

Each kind of target has an operator switch (an environment variable, never a tenant setting) that
allows private targets, for receivers and stores on the operator's own network. With it on, the
name is still resolved, checked and pinned, against the shorter list of addresses that are never
reachable (link-local, where cloud metadata services answer; unspecified; multicast; reserved).

A failure is recorded and shown as a fixed word (`failure_reason`), never as what the other end
answered: an internal service's error page must not reach a tenant, nor tell it which ports are open.
"""

from __future__ import annotations

import re
import socket
import threading
from dataclasses import dataclass
from typing import Any

import httpx

from app.config import Settings
from app.core.addresses import host_address, is_denied, is_never_reachable

# A DNS name as httpx leaves it (IDNA names arrive as xn-- labels); `_` is tolerated, as resolvers do.
_HOSTNAME = re.compile(r"(?=.{1,253}\.?$)[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
                       r"(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?")

REFUSED_ADDRESS = "refused_address"
CONNECT_FAILED = "connect_failed"
TIMEOUT = "timeout"
# The fixed words a delivery log or a recall may show: this module's, the stores' (`staged_remotely`,
# `store_error`: app.services.router.backend_stores; `still_held`: app.services.audit.erasure) and webhooks'
# `webhook_inactive`. A stored error that is none of them (written before failures were words, so it
# may quote another server) shows as `failed`.
UNSPECIFIED_FAILURE = "failed"
_SHOWN = re.compile(r"refused_address|connect_failed|timeout|http_[1-5][0-9]{2}|staged_remotely|store_error"
                    r"|webhook_inactive|still_held")


@dataclass(frozen=True)
class OutboundRule:
    """Whether one kind of target may be a private address, and the switch that says so."""

    allow_private: bool
    switch: str  # the environment variable an operator sets to allow private targets

    @classmethod
    def for_webhooks(cls, settings: Settings) -> OutboundRule:
        return cls(settings.webhook_allow_private, "MEMWARDEN_WEBHOOK_ALLOW_PRIVATE")

    @classmethod
    def for_audit_witness(cls, settings: Settings) -> OutboundRule:
        return cls(settings.webhook_allow_private, "MEMWARDEN_WEBHOOK_ALLOW_PRIVATE")

    @classmethod
    def for_backends(cls, settings: Settings) -> OutboundRule:
        return cls(settings.backend_allow_private, "MEMWARDEN_BACKEND_ALLOW_PRIVATE")

    @classmethod
    def for_oidc(cls, settings: Settings) -> OutboundRule:
        return cls(settings.oidc_allow_private, "MEMWARDEN_OIDC_ALLOW_PRIVATE")

    def refusal(self, host: str) -> str:
        if self.allow_private:
            return (f"{host!r} is or resolves to a link-local, unspecified, multicast or reserved address, "
                    "which no target may be")
        return (f"{host!r} is or resolves to a non-public address; the operator sets {self.switch}=1 "
                "to allow targets on their own network")


def url_refusal(url: str, rule: OutboundRule) -> tuple[str, str | None]:
    """Check an outbound URL by its syntax alone — no DNS look-up on the request path: (host, why the
    URL is refused or None). http(s) with a host, no user:password part, and unless the rule
    allows private targets, no host that is a denied address (in any numeric form) and no
    `localhost` name. Names are resolved and checked at each connection (`OutboundTransport`)."""
    try:
        parsed = httpx.URL(url)
        host = parsed.host  # decodes IDNA labels, which may fail (`xn--`)
    except (httpx.InvalidURL, UnicodeError):
        return "", "not an absolute http(s) URL with a host"
    if parsed.scheme not in ("http", "https") or not host:
        return host, "not an absolute http(s) URL with a host"
    address = host_address(host)
    if not (_HOSTNAME.fullmatch(parsed.raw_host.decode("ascii")) or address is not None):
        return host, "the host is not a valid DNS name or IP address"
    if parsed.port is not None and not 0 < parsed.port < 65536:
        return host, "the port must be between 1 and 65535"
    if parsed.userinfo:
        return host, "credentials in the URL are not allowed; authenticate with the signature header instead"
    if rule.allow_private:
        return host, rule.refusal(host) if address is not None and is_never_reachable(address) else None
    if address is None:
        hostname = host.rstrip(".").lower()
        if hostname == "localhost" or hostname.endswith(".localhost"):
            return host, rule.refusal(host)
        return host, None
    return host, rule.refusal(host) if is_denied(address) else None


class RefusedAddress(httpx.ConnectError):
    """The outbound rule refused the address a request's host is or resolves to."""


def checked_address(host: str, port: int, rule: OutboundRule) -> str:
    """The address to connect to for one request to `host`: its numeric form when it is one, else
    the first address it resolves to, once every address it resolves to passed the rule.
    RefusedAddress when one did not; httpx.ConnectError when the name does not resolve."""
    refused = is_never_reachable if rule.allow_private else is_denied
    literal = host_address(host)
    if literal is not None:
        if refused(literal):
            raise RefusedAddress(rule.refusal(host))
        return str(literal)  # the normalised form: no resolver reads `0x7f.1` again
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError, ValueError):  # gaierror is an OSError; ValueError: an embedded NUL
        raise httpx.ConnectError(f"cannot resolve {host!r}") from None
    addresses = [host_address(str(info[4][0])) for info in infos]
    if not addresses or any(a is None or refused(a) for a in addresses):
        raise RefusedAddress(rule.refusal(host))
    return str(addresses[0])


class OutboundTransport(httpx.BaseTransport):
    """An httpx transport that applies the outbound rule to each request (see the module docstring).
    `inner` replaces the network (tests); otherwise each host name gets its own connection pool,
    so a TLS connection checked for one name is never reused for another name on the same address."""

    def __init__(self, rule: OutboundRule, inner: httpx.BaseTransport | None = None, **options: Any):
        self.rule = rule
        self._inner = inner
        self._options = options
        self._pools: dict[str, httpx.BaseTransport] = {}
        self._lock = threading.Lock()

    def _pool(self, host: str) -> httpx.BaseTransport:
        if self._inner is not None:
            return self._inner
        with self._lock:
            pool = self._pools.get(host)
            if pool is None:
                pool = self._pools[host] = httpx.HTTPTransport(**self._options)
            return pool

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        host = request.url.raw_host.decode("ascii")  # as resolvers and TLS see it (IDNA as xn--)
        try:
            address = checked_address(host, request.url.port or (443 if request.url.scheme == "https" else 80),
                                      self.rule)
        except httpx.ConnectError as exc:
            exc.request = request
            raise
        pinned = httpx.Request(request.method, request.url.copy_with(host=address), headers=request.headers,
                               stream=request.stream, extensions={**request.extensions, "sni_hostname": host})
        return self._pool(host).handle_request(pinned)

    def close(self) -> None:
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()
        if self._inner is not None:
            self._inner.close()


def outbound_client(rule: OutboundRule, *, timeout: float, inner: httpx.BaseTransport | None = None,
                    **options: Any) -> httpx.Client:
    """An httpx client under the outbound rule that never follows a redirect: a 3xx is the answer."""
    return httpx.Client(timeout=timeout, follow_redirects=False, transport=OutboundTransport(rule, inner),
                        **options)


def failure_reason(exc: BaseException) -> str:
    """The fixed word for an outbound request that raised `exc` (or an exception caused by one)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, RefusedAddress):
            return REFUSED_ADDRESS
        if isinstance(seen, httpx.TimeoutException):
            return TIMEOUT
        if isinstance(seen, httpx.TransportError):
            return CONNECT_FAILED
        seen = seen.__cause__ or seen.__context__
    return CONNECT_FAILED


def status_reason(status_code: int) -> str:
    return f"http_{status_code}"


def shown_reason(error: str | None) -> str | None:
    """What an API or page shows of a stored failure: one of the fixed words, or `failed` for a
    row written before failures were recorded as words (it may hold another server's answer)."""
    if error is None:
        return None
    return error if _SHOWN.fullmatch(error) else UNSPECIFIED_FAILURE
