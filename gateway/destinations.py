"""Where a client-supplied MCP server may be: the address rules against SSRF.

A request may name its own MCP server (`server_url`, a `server_label` the operator did
not configure) only when `client_tools.allow_unconfigured_mcp_servers` is set, and
even then never one that is not on the public internet: loopback, private (RFC 1918,
IPv6 ULA), link-local, CGNAT, multicast, unspecified, reserved or cloud-metadata
addresses are refused, in IPv4 and IPv6, an IPv4 address embedded in an IPv6 one
(IPv4-mapped, IPv4-compatible, NAT64, 6to4) judged as that IPv4 address. The operator
lets chosen destinations in with `client_tools.allowed_mcp_destinations`: CIDRs (an
address inside one is allowed) and host names (a URL naming one exactly may reach
whatever it resolves to).

The rules are judged on addresses, never on names alone: a name is resolved once and
every address it resolves to must pass (then the connection goes to a checked
address: see `engine/mcp_connect.py`), so DNS rebinding and names such as `localhost`
or `2130706433` gain nothing. This module is pure apart from `resolve()`.

The same rules judge engine mode's `input_image` URLs, which the upstream fetches
(`engine/images.py`; `https` only, exceptions in `client_tools.allowed_image_destinations`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from typing import Iterable
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# How long a request-time resolution may take (forward mode).
RESOLVE_TIMEOUT = 5.0

# Checked in this order; the first that contains an address names why it is refused.
# `ipaddress`'s own flags cover most of these; the table says exactly what is refused,
# whatever the Python version's idea of "global".
_RULES: tuple[tuple[str, tuple[Network, ...]], ...] = tuple(
    (reason, tuple(ipaddress.ip_network(net) for net in nets)) for reason, nets in (
        ("metadata", ("169.254.169.254/32", "fd00:ec2::254/128", "100.100.100.200/32", "168.63.129.16/32",
                      "192.0.0.192/32")),
        ("unspecified", ("0.0.0.0/8", "::/128")),
        ("loopback", ("127.0.0.0/8", "::1/128")),
        ("private", ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7", "fec0::/10")),
        ("link-local", ("169.254.0.0/16", "fe80::/10")),
        ("CGNAT", ("100.64.0.0/10",)),
        ("multicast", ("224.0.0.0/4", "ff00::/8")),
        ("reserved", ("192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24",
                      "240.0.0.0/4", "100::/64", "2001:db8::/32", "64:ff9b:1::/48", "2001::/23")),
    ))
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_COMPATIBLE = ipaddress.ip_network("::/96")


class ForbiddenDestination(Exception):
    """A client-supplied server's URL, or an address its name resolves to, is refused.
    The message is safe to show the client (it names the category, not the address)."""


def embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, compatible, NAT64, 6to4)."""
    if address.version == 4:
        return None
    assert isinstance(address, ipaddress.IPv6Address)
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64 or (address in _COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def refusal_reason(address: IPAddress) -> str | None:
    """Why the address is not public ("loopback", "private", ...), or None when it is."""
    inner = embedded_ipv4(address)
    if inner is not None:
        return refusal_reason(inner)
    for reason, networks in _RULES:
        if any(address in network for network in networks):
            return reason
    if address.is_multicast:
        return "multicast"
    if not address.is_global:
        return "reserved"
    return None


@dataclass(frozen=True, slots=True)
class DestinationPolicy:
    """The address rules plus the operator's exceptions."""

    networks: tuple[Network, ...] = ()
    hosts: frozenset[str] = frozenset()
    # What the URLs point at, as refusals name it; and the URL schemes taken.
    subject: str = "MCP server"
    schemes: tuple[str, ...] = ("http", "https")

    @classmethod
    def of(cls, allowed: Iterable[str], subject: str = "MCP server",
           schemes: tuple[str, ...] = ("http", "https")) -> "DestinationPolicy":
        """From `client_tools.allowed_mcp_destinations` (CIDRs and host names), or
        another list of the same shape."""
        networks, hosts = [], set()
        for entry in allowed:
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                hosts.add(_host_key(entry))
        return cls(tuple(networks), frozenset(hosts), subject, schemes)

    def host_allowed(self, host: str) -> bool:
        return _host_key(host) in self.hosts

    def check_address(self, host: str, address: IPAddress) -> None:
        """Raise ForbiddenDestination unless `host`'s address may be connected to."""
        if self.host_allowed(host):
            return
        inner = embedded_ipv4(address)
        if any(candidate in network for network in self.networks for candidate in (address, inner)
               if candidate is not None and candidate.version == network.version):
            return
        reason = refusal_reason(address)
        if reason is not None:
            raise ForbiddenDestination(f"{self.subject} host {host!r} is not allowed: it is a {reason} address")

    def check_url(self, url: str) -> tuple[str, int]:
        """What can be judged without a resolver: the scheme, and a host that is an IP
        address. Returns the host and port to resolve; raises ForbiddenDestination."""
        try:
            parts = urlsplit(url)
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise ForbiddenDestination(f"{self._url_name} is not a valid URL") from None
        if parts.scheme not in self.schemes or not parts.hostname:
            raise ForbiddenDestination(f"{self._url_name} must be an {' or '.join(self.schemes)} URL with a host")
        address = parse_address(parts.hostname)
        if address is not None:
            self.check_address(parts.hostname, address)
        return parts.hostname, port

    async def resolve(self, host: str, port: int) -> list[str]:
        """Resolve `host` once and check every address; the addresses to connect to."""
        literal = parse_address(host)
        if literal is not None:
            self.check_address(host, literal)
            return [str(literal)]
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError):
            raise ForbiddenDestination(f"{self.subject} host {host!r} cannot be resolved") from None
        addresses = list(dict.fromkeys(str(info[4][0]).partition("%")[0] for info in infos))
        for address in addresses:
            self.check_address(host, ipaddress.ip_address(address))
        return addresses

    @property
    def _url_name(self) -> str:
        return "MCP server_url" if self.subject == "MCP server" else f"{self.subject} URL"


def parse_address(host: str) -> IPAddress | None:
    """`host` as an IP address (a URL's `[::1]` included), or None for a name."""
    try:
        return ipaddress.ip_address(host.strip("[]").partition("%")[0])
    except ValueError:
        return None


def _host_key(host: str) -> str:
    return host.strip().rstrip(".").lower()
