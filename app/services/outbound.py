"""The SSRF guard for requests Memwarden sends to URLs others chose: webhook deliveries and the
audit witness URL.

A URL is first checked by its syntax alone (`url_refusal`, cheap enough for the request path:
no DNS); each request then resolves the host, refuses it if any address is non-public (a tenant's
key must not reach into the operator's network) unless private targets are allowed, and connects
to the very address it checked (`checked_target`), so a second look-up cannot rebind the name.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from typing import Any

import httpx


def _refuse_address(host: str) -> str:
    return (f"{host!r} is or resolves to a non-public address; set MEMWARDEN_WEBHOOK_ALLOW_PRIVATE=1 "
            "to allow internal receivers")


# A DNS name as httpx leaves it (IDNA names arrive as xn-- labels); `_` is tolerated, as resolvers do.
_HOSTNAME = re.compile(r"(?=.{1,253}\.?$)[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
                       r"(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?")


def _ip_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """`host` as an IP address (an IPv6 zone id ignored), or None when it is a name."""
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None


def url_refusal(url: str, allow_private: bool) -> tuple[str, str | None]:
    """Check an outbound URL by its syntax alone — no DNS look-up on the request path: (host, why the
    URL is refused or None). http(s) with a host, no user:password part, and unless private
    targets are allowed, no literal non-public IP address and no `localhost` name. Names are
    resolved and checked at each request (`resolve_target`)."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, UnicodeError):
        return "", "not an absolute http(s) URL with a host"
    host = parsed.host
    if parsed.scheme not in ("http", "https") or not host:
        return host, "not an absolute http(s) URL with a host"
    address = _ip_address(host)
    if not (_HOSTNAME.fullmatch(parsed.raw_host.decode("ascii")) or address is not None):
        return host, "the host is not a valid DNS name or IP address"
    if parsed.port is not None and not 0 < parsed.port < 65536:
        return host, "the port must be between 1 and 65535"
    if parsed.userinfo:
        return host, "credentials in the URL are not allowed; authenticate with the signature header instead"
    if allow_private:
        return host, None
    if address is None:
        hostname = host.rstrip(".").lower()
        if hostname == "localhost" or hostname.endswith(".localhost"):
            return host, _refuse_address(host)
        return host, None
    return host, None if address.is_global else _refuse_address(host)


def resolve_target(host: str, allowed: bool) -> tuple[str | None, str | None]:
    """Resolve `host` for one delivery: (the address to connect to, None), or (None, why not) when it
    does not resolve or any of its addresses is loopback, private, link-local or otherwise
    non-public (a tenant's key must not reach into the operator's network). With private targets
    allowed, (None, None): connect by name."""
    if allowed:
        return None, None
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError):
        return None, f"cannot resolve {host!r}"
    addresses = [ipaddress.ip_address(info[4][0].split("%", 1)[0]) for info in infos]
    if not addresses or not all(address.is_global for address in addresses):
        return None, _refuse_address(host)
    return str(addresses[0]), None


@dataclass(frozen=True)
class Target:
    """Where to send one POST that passed the SSRF rule: the URL to connect to (the checked address
    in place of the name), and the headers and httpx extensions that keep the name for the receiver
    (Host) and for TLS (SNI and certificate check)."""

    url: httpx.URL
    headers: dict[str, str]
    extensions: dict[str, Any]


def checked_target(url: str, allowed: bool) -> tuple[Target | None, str | None]:
    """Resolve and check `url`'s host for one POST (see `resolve_target`): (the target, None), or
    (None, why not). The target connects to the address just checked, so a second look-up cannot
    rebind the name to an internal address."""
    parsed = httpx.URL(url)
    address, refusal = resolve_target(parsed.host, allowed)
    if refusal:
        return None, refusal
    if address is None:  # private targets allowed: connect by name
        return Target(parsed, {}, {}), None
    return Target(parsed.copy_with(host=address), {"Host": parsed.netloc.decode("ascii")},
                  {"sni_hostname": parsed.host}), None
