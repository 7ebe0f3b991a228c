"""Which IP addresses an outbound connection may reach, and what a URL's host means as an address.

`host_address` reads a host the way the C library's resolver would before it ever asks DNS:
besides the dotted quad, `inet_aton` accepts one to four parts, each decimal, octal (leading 0)
or hex (0x), the last filling the remaining bytes, so `127.1`, `2130706433`, `0x7f000001`,
`0177.0.0.1` and `0` are all addresses, not names. A check that read them as names would let them
through to a resolver that then connects to loopback.

`is_denied` is the deny list: anything not globally routable (loopback, private, link-local,
CGNAT, multicast, reserved, documentation, unspecified) and any IPv6 address that carries an IPv4
address the network may translate to (IPv4-mapped, IPv4-compatible, SIIT, NAT64, 6to4, Teredo)
when the IPv4 inside is denied.

`is_never_reachable` is what stays denied when an operator allows private targets: link-local
(where cloud metadata services answer, 169.254.169.254 and fd00:ec2::254's fe80 kin), unspecified,
multicast and reserved addresses. A store or receiver on the operator's own network lives on
loopback or a private range, never there, so allowing private targets never opens the metadata
service to a tenant's URL.
"""

from __future__ import annotations

import ipaddress
import re
import socket

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Named explicitly rather than left to `is_global`, whose tables change between Python releases.
_DENIED_V4 = tuple(ipaddress.IPv4Network(n) for n in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
    "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15",
    "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4"))
_DENIED_V6 = tuple(ipaddress.IPv6Network(n) for n in (
    "::/96",  # unspecified, loopback and the deprecated IPv4-compatible ::a.b.c.d
    "64:ff9b:1::/48",  # local-use NAT64: its translator sits in the operator's network
    "100::/64", "2001::/23", "2001:db8::/32", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8"))
_NEVER_V4 = tuple(ipaddress.IPv4Network(n) for n in (
    "0.0.0.0/8", "169.254.0.0/16", "224.0.0.0/4", "240.0.0.0/4"))
_NEVER_V6 = tuple(ipaddress.IPv6Network(n) for n in ("::/128", "fe80::/10", "fec0::/10", "ff00::/8"))
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_SIIT = ipaddress.IPv6Network("::ffff:0:0:0/96")

_DECIMAL = re.compile(r"[1-9][0-9]*")
_OCTAL = re.compile(r"0[0-7]*")
_HEX = re.compile(r"0[xX][0-9a-fA-F]*")


def _inet_aton(host: str) -> ipaddress.IPv4Address | None:
    """`host` as inet_aton reads it, or None when it is not one of its numeric forms."""
    parts = host.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    values = []
    for part in parts:
        if _HEX.fullmatch(part):
            values.append(int(part[2:] or "0", 16))
        elif _OCTAL.fullmatch(part):
            values.append(int(part, 8))
        elif _DECIMAL.fullmatch(part):
            values.append(int(part))
        else:
            return None
    *leading, last = values
    if any(value > 255 for value in leading) or last >= 256 ** (4 - len(leading)):
        return None
    number = 0
    for value in leading:
        number = number << 8 | value
    return ipaddress.IPv4Address(number << 8 * (4 - len(leading)) | last)


def host_address(host: str) -> IPAddress | None:
    """The address a URL host denotes (IPv6 without brackets; a zone id is ignored), or None when
    the host is a name that only DNS can turn into addresses."""
    bare = host.strip("[]").split("%", 1)[0]
    try:
        return ipaddress.ip_address(bare)
    except ValueError:
        pass
    bare = bare[:-1] if bare.endswith(".") else bare
    address = _inet_aton(bare)
    if address is None and bare and bare.isascii():
        try:  # the platform's own reading too, in case its libc accepts a form the above does not
            address = ipaddress.IPv4Address(socket.inet_aton(bare))
        except (OSError, ValueError):  # ValueError: an embedded NUL
            return None
    return address


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses a translator, tunnel or dual stack would turn this IPv6 address into."""
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped]
    low32 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _NAT64 or address in _SIIT:
        return [low32]
    if address.sixtofour is not None:
        return [address.sixtofour]
    if address.teredo is not None:
        return list(address.teredo)
    return []


def is_denied(address: IPAddress) -> bool:
    """Whether an outbound connection must not reach `address` (see the module's docstring)."""
    if isinstance(address, ipaddress.IPv4Address):
        return any(address in network for network in _DENIED_V4) or not address.is_global
    inner = embedded_ipv4(address)
    if any(is_denied(v4) for v4 in inner):
        return True
    if any(address in network for network in _DENIED_V6):
        return True
    # A translated address stands or falls by the IPv4 inside; anything else must be global.
    return not inner and not address.is_global


def is_never_reachable(address: IPAddress) -> bool:
    """Whether `address` stays denied even where private targets are allowed (see the docstring)."""
    if isinstance(address, ipaddress.IPv4Address):
        return any(address in network for network in _NEVER_V4)
    if any(is_never_reachable(v4) for v4 in embedded_ipv4(address)):
        return True
    return any(address in network for network in _NEVER_V6)
