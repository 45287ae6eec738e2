"""Where hooks may send requests: ``actions.allowed_hosts`` and ``actions.deny_private_networks``.

A webhook's URL is written by whoever may write the repository's ``_lakefs_actions/``; without
limits it can point the server at anything the server reaches (a metadata service, an admin
port on loopback, the internal network): server-side request forgery. Both settings are off by
default, as lakeFS has neither.

The rules, for the host of every connection a hook's client opens:

- The host name is resolved, and every address it resolves to is checked; one refused address
  refuses the host. The connection then goes to a checked address, never to a second
  resolution, so a name that changes its answer between the check and the connection (DNS
  rebinding) cannot slip through. The request keeps the host name in its ``Host`` header, and
  TLS sends and verifies the name.
- ``deny_private_networks`` refuses loopback, private (RFC 1918, RFC 4193, and the shared
  address space of RFC 6598), link-local (with the cloud metadata address 169.254.169.254),
  multicast, unspecified and reserved addresses; an IPv4 address inside IPv6 (``::ffff:a.b.c.d``
  and NAT64's ``64:ff9b::/96``) is judged as the IPv4 address.
- ``allowed_hosts``, when not empty, admits only hosts named in it (exactly, or under a
  ``*.example.com`` entry) and addresses inside an address or network entry (``10.0.0.5``,
  ``10.1.0.0/16``). An address or network entry also exempts its addresses from
  ``deny_private_networks``, which is how an internal hook receiver stays reachable; a name
  entry does not, since whoever controls the name's DNS records would choose the address.

Redirects are never followed by the hooks' client, and each connection is checked anyway.
Environment proxy variables are ignored while a rule is on: a proxy would resolve and connect
on its own.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx

__all__ = [
    "EgressPolicy",
    "EgressRefusedError",
    "GuardedBackend",
    "IPAddress",
    "Resolver",
    "address_kind",
    "hook_client",
    "system_resolver",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Sequence[IPAddress]]
"""Returns the addresses a host name resolves to (raises ``OSError`` when it does not)."""

_V4 = ipaddress.IPv4Network
_V6 = ipaddress.IPv6Network

# what deny_private_networks refuses, by the name a refusal gives
_DENIED: tuple[tuple[IPNetwork, str], ...] = (
    (_V4("0.0.0.0/8"), "unspecified"),
    (_V4("127.0.0.0/8"), "loopback"),
    (_V4("10.0.0.0/8"), "private"),
    (_V4("172.16.0.0/12"), "private"),
    (_V4("192.168.0.0/16"), "private"),
    (_V4("100.64.0.0/10"), "private (shared address space)"),
    (_V4("169.254.0.0/16"), "link-local"),
    (_V4("224.0.0.0/4"), "multicast"),
    (_V4("240.0.0.0/4"), "reserved"),
    (_V6("::/128"), "unspecified"),
    (_V6("::1/128"), "loopback"),
    (_V6("fc00::/7"), "private"),
    (_V6("fec0::/10"), "private"),
    (_V6("fe80::/10"), "link-local"),
    (_V6("ff00::/8"), "multicast"),
)
_NAT64 = _V6("64:ff9b::/96")


def _as_v4(address: IPAddress) -> IPAddress:
    """Return the IPv4 address an IPv6 one carries (mapped, NAT64), else ``address``."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def _within(address: IPAddress, network: IPNetwork) -> bool:
    if isinstance(address, ipaddress.IPv4Address):
        return isinstance(network, ipaddress.IPv4Network) and address in network
    return isinstance(network, ipaddress.IPv6Network) and address in network


def address_kind(address: IPAddress) -> str | None:
    """Return what ``deny_private_networks`` calls ``address`` (``loopback``, ...), or ``None``."""
    judged = _as_v4(address)
    return next((kind for network, kind in _DENIED if _within(judged, network)), None)


class EgressRefusedError(Exception):
    """A hook's request went to a host the settings refuse; the message names host and rule.

    Attributes:
        host: The host name (or address) the hook named.
        address: The refused address, ``None`` when the name itself is not allowed.
        rule: The setting that refused it.
    """

    def __init__(self, host: str, address: IPAddress | None, rule: str, reason: str) -> None:
        where = host if address is None or str(address) == host else f"{host} ({address})"
        super().__init__(f"refused by {rule}: {where} {reason}")
        self.host = host
        self.address = address
        self.rule = rule


def system_resolver(host: str, port: int) -> list[IPAddress]:
    """Return every address ``host`` resolves to, through the system's resolver."""
    found: list[IPAddress] = []
    for *_, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in found:
            found.append(address)
    return found


@dataclass(frozen=True)
class EgressPolicy:
    """The rules a hook's connections follow (see the module's docstring).

    Attributes:
        names: Host names allowed (lower case; ``*.example.com`` admits its subdomains).
        networks: Addresses and networks allowed, exempt from ``deny_private``.
        deny_private: Refuse loopback, private, link-local, multicast and unspecified addresses.
    """

    names: frozenset[str] = frozenset()
    networks: tuple[IPNetwork, ...] = ()
    deny_private: bool = False

    @classmethod
    def from_settings(cls, allowed_hosts: Iterable[str], deny_private: bool) -> EgressPolicy:
        """Return the policy of ``actions.allowed_hosts`` and ``actions.deny_private_networks``.

        Raises:
            ValueError: an entry is neither a host name nor an address or network.
        """
        names: set[str] = set()
        networks: list[IPNetwork] = []
        for raw in allowed_hosts:
            entry = raw.strip().lower().rstrip(".")
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
                continue
            except ValueError:
                pass
            label = entry.removeprefix("*.")
            if not label or any(c in label for c in "/:@ *"):
                raise ValueError(f"not a host name, address or network: {raw!r}")
            names.add(entry)
        return cls(frozenset(names), tuple(networks), deny_private)

    @property
    def active(self) -> bool:
        """Return whether any rule applies (otherwise hooks connect anywhere, as in lakeFS)."""
        return bool(self.deny_private or self.names or self.networks)

    def _named(self, host: str) -> bool:
        name = host.lower().rstrip(".")
        if name in self.names:
            return True
        return any(name.endswith(e[1:]) for e in self.names if e.startswith("*."))

    def _listed(self, address: IPAddress) -> bool:
        candidates = (address, _as_v4(address))
        return any(_within(c, n) for n in self.networks for c in candidates)

    def check(self, host: str, addresses: Sequence[IPAddress]) -> None:
        """Refuse ``host`` unless every one of its ``addresses`` passes the rules.

        Raises:
            EgressRefusedError: the first refused address, naming the rule.
        """
        named = self._named(host)
        restricted = bool(self.names or self.networks)
        for address in addresses:
            listed = self._listed(address)
            if self.deny_private and not listed:
                kind = address_kind(address)
                if kind is not None:
                    article = "an" if kind[0] in "aeiou" else "a"
                    raise EgressRefusedError(
                        host,
                        address,
                        "actions.deny_private_networks",
                        f"is {article} {kind} address",
                    )
            if restricted and not (named or listed):
                raise EgressRefusedError(
                    host, address, "actions.allowed_hosts", "is not in the allowed hosts"
                )

    def resolve(self, host: str, port: int, resolver: Resolver) -> Sequence[IPAddress]:
        """Return the addresses of ``host`` that may be connected to (all of them, or none).

        Raises:
            EgressRefusedError: an address is refused.
            OSError: the name does not resolve.
        """
        try:
            literal: IPAddress | None = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            literal = None
        if literal is None and self.names and not self.networks and not self._named(host):
            # no address could be listed: refused without asking the resolver
            raise EgressRefusedError(
                host, None, "actions.allowed_hosts", "is not in the allowed hosts"
            )
        addresses = [literal] if literal is not None else list(resolver(host, port))
        self.check(host, addresses)
        return addresses


class GuardedBackend(httpcore.NetworkBackend):
    """httpcore's network backend that resolves, checks, then connects to a checked address.

    TLS happens on the returned stream with the original host name (httpcore passes it as the
    server name), so certificates are verified against the name, not the address.

    Args:
        policy: The rules.
        resolver: Resolves host names (the system's by default).
        inner: Opens the TCP connection to an address (httpcore's own by default).
    """

    def __init__(
        self,
        policy: EgressPolicy,
        resolver: Resolver = system_resolver,
        inner: httpcore.NetworkBackend | None = None,
    ) -> None:
        self.policy = policy
        self.resolver = resolver
        self.inner = inner if inner is not None else httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        """Open a connection to ``host`` if the rules allow every one of its addresses.

        Raises:
            EgressRefusedError: the rules refuse the host.
            httpcore.ConnectError: it does not resolve, or no checked address answers.
        """
        try:
            addresses = self.policy.resolve(host, port, self.resolver)
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        error: Exception | None = None
        for address in addresses:
            try:
                return self.inner.connect_tcp(
                    str(address),
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
        assert error is not None  # a resolution gives an address or raises
        raise error

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        """Refuse: a hook never reaches a Unix socket while a rule is on."""
        raise EgressRefusedError(path, None, "actions.allowed_hosts", "is a Unix socket")

    def sleep(self, seconds: float) -> None:
        """Sleep as the inner backend does (httpcore's retries)."""
        self.inner.sleep(seconds)


class _GuardedTransport(httpx.HTTPTransport):
    """httpx's transport over a connection pool whose connections :class:`GuardedBackend` opens."""

    def __init__(self, backend: GuardedBackend) -> None:
        super().__init__(trust_env=False)
        limits = httpx.Limits()
        self._pool = httpcore.ConnectionPool(
            # SSL_CERT_FILE and SSL_CERT_DIR still apply (an internal receiver's CA)
            ssl_context=httpx.create_ssl_context(),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=backend,
        )


def hook_client(
    policy: EgressPolicy,
    resolver: Resolver = system_resolver,
    connector: httpcore.NetworkBackend | None = None,
) -> httpx.Client:
    """Return the HTTP client hooks send with: never following redirects, checked by ``policy``.

    With no rule on, it is a plain client (environment proxies honoured, as before).

    Args:
        policy: The rules.
        resolver: Resolves host names (the system's by default).
        connector: Opens TCP connections to checked addresses (httpcore's by default).
    """
    if not policy.active:
        return httpx.Client(follow_redirects=False)
    transport = _GuardedTransport(GuardedBackend(policy, resolver, connector))
    return httpx.Client(transport=transport, follow_redirects=False, trust_env=False)
