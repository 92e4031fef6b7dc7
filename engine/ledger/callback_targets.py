"""Where a callback may go: http(s) to a public address, or to what the operator allows.

A callback URL is the client's, and the engine POSTs to it from inside the farm's network, so
a URL naming an internal address (a cloud's metadata service, a database, the engine's own
ports) must never be reached. The rule is checked twice:

* at submission (engine.ledger.submission.callback_url_of), without asking a resolver: an
  address written in the URL, in any form a resolver takes (``0x7f000001``, ``127.1``,
  ``[::ffff:169.254.169.254]``), must be public; a name must not be a local one (``localhost``,
  ``*.local``, a name without a dot that a resolver's search list would complete);
* at delivery (engine.pipeline.notify): the name is resolved once, every address it resolves to
  must be public, and the connection goes to that address (pinned), so a second lookup cannot
  turn the name into another address between the check and the POST.

PROVINGSITE_CALLBACK_ALLOW names the exceptions, the operator's own receivers: addresses or
networks (CIDR), whose addresses are let through however they are reached, and host names,
let through by name to whatever they resolve to.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

from django.conf import settings

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# Names that a resolver answers from the host itself or from the local network.
LOCAL_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")
LOCAL_SUFFIXES = (".localhost", ".local", ".localdomain", ".internal", ".lan", ".home.arpa", ".arpa")
# IPv6 prefixes that carry an IPv4 address in their low 32 bits (NAT64, IPv4-compatible).
_CARRY_IPV4 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"),
               ipaddress.IPv6Network("::/96"))


@dataclass(frozen=True)
class Target:
    """Where a callback URL points: its host as written, the port it means, the request's path."""

    host: str
    port: int
    https: bool
    path: str


def target_of(url: str) -> Target:
    """The URL's target: http or https, a host, a port in 1..65535 (its scheme's by default).
    TargetRefused says what is wrong with a URL that has none. Asks no resolver."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
        if host is not None:
            host.encode("idna")  # a name no resolver can be asked for
    except ValueError as exc:  # "http://[::1", a port of 70000 or of letters
        raise TargetRefused(f"is not a URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not host:
        raise TargetRefused("must be an http or https URL with a host")
    if port is not None and not 1 <= port <= 65535:
        raise TargetRefused("has a port outside 1..65535")
    https = parts.scheme == "https"
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(host, port or (443 if https else 80), https, path)


class TargetRefused(Exception):
    """The target is not one a callback may reach; the message says why, for the client."""


class TargetUnresolved(Exception):
    """The name did not resolve (a lookup can fail for a while; the delivery is tried again)."""


@dataclass(frozen=True)
class Allowed:
    networks: tuple[Network, ...] = ()
    hosts: frozenset[str] = frozenset()

    @classmethod
    def of(cls, entries: Iterable[str]) -> Allowed:
        networks, hosts = [], set()
        for entry in entries:
            entry = entry.strip().lower().rstrip(".")
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                hosts.add(entry)
        return cls(tuple(networks), frozenset(hosts))

    def admits(self, address: Address) -> bool:
        return any(address in network for network in self.networks if network.version == address.version)


@lru_cache(maxsize=4)
def _allowed(entries: tuple[str, ...]) -> Allowed:
    return Allowed.of(entries)


def allowed() -> Allowed:
    """The operator's exceptions, PROVINGSITE_CALLBACK_ALLOW (engine.env checked them at start)."""
    return _allowed(tuple(settings.PROVINGSITE.get("CALLBACK_ALLOW", ())))


def is_public(address: Address) -> bool:
    """An address on the public internet: not private, loopback, link-local, shared (CGNAT),
    documentation, multicast or reserved, including an IPv4 address carried inside IPv6."""
    if isinstance(address, ipaddress.IPv6Address):
        carried = address.ipv4_mapped or address.sixtofour or (address.teredo[1] if address.teredo else None)
        if carried is None and any(address in prefix for prefix in _CARRY_IPV4):
            carried = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if carried is not None:
            return is_public(carried)
    return address.is_global and not (address.is_multicast or address.is_reserved or address.is_unspecified
                                      or address.is_loopback or address.is_link_local)


def written_address(host: str) -> Address | None:
    """The address a URL's host names by itself, in any form a resolver reads as one (dotted,
    ``127.1``, ``0x7f000001``, ``2130706433``, an IPv6 literal with its zone), else None for a name."""
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))  # the legacy forms: what getaddrinfo would do
    except (OSError, ValueError):
        return None


def _name(host: str) -> str:
    return host.strip().lower().rstrip(".")


def check_host(host: str, allow: Allowed | None = None) -> None:
    """TargetRefused unless ``host`` (a URL's host, as urlsplit reads it) may be a callback's
    target as written: an allowed name, an address that is public or allowed, or a name that is
    not a local one. Asks no resolver."""
    allow = allow or allowed()
    name = _name(host)
    if name in allow.hosts:
        return
    address = written_address(name)
    if address is not None:
        if not (allow.admits(address) or is_public(address)):
            raise TargetRefused(f"{host} is not a public address")
        return
    if name in LOCAL_NAMES or name.endswith(LOCAL_SUFFIXES) or "." not in name:
        raise TargetRefused(f"{host} names a local host, not a public one")


def pinned_address(host: str, port: int, allow: Allowed | None = None) -> str:
    """The one address a delivery to ``host`` connects to: resolved once here, each address it
    resolves to checked (TargetRefused when any is not public, unless allowed);
    TargetUnresolved when the name does not resolve."""
    allow = allow or allowed()
    check_host(host, allow)
    name = _name(host)
    try:
        found = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise TargetUnresolved(host) from exc
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in found]
    if not addresses:
        raise TargetUnresolved(host)
    if name not in allow.hosts:
        for address in addresses:
            if not (allow.admits(address) or is_public(address)):
                raise TargetRefused(f"{host} resolves to an address that is not public")
    return str(found[0][4][0])


__all__ = ["Allowed", "Target", "TargetRefused", "TargetUnresolved", "allowed", "check_host", "is_public",
           "pinned_address", "target_of", "written_address"]
