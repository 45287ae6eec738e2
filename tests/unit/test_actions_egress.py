"""Where hooks may connect: the address rules, the allow-list, and the client that enforces them.

The rules are checked on addresses; the client is checked with a stand-in resolver (names that
resolve to chosen addresses) and a stand-in connector that records where a connection would go
and refuses it, so no test opens a connection anywhere.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable, Sequence
from typing import Any

import httpcore
import httpx
import pytest

from mirror.actions.egress import (
    EgressPolicy,
    EgressRefusedError,
    GuardedBackend,
    IPAddress,
    address_kind,
    hook_client,
    system_resolver,
)
from mirror.actions.model import ActionHook
from mirror.actions.webhook import call_hook
from mirror.config import ActionsSettings, ConfigurationError, load_config


def ip(text: str) -> IPAddress:
    return ipaddress.ip_address(text)


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("127.255.0.9", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("64:ff9b::7f00:1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("172.31.255.255", "private"),
        ("192.168.1.1", "private"),
        ("::ffff:192.168.1.1", "private"),
        ("fd12:3456::1", "private"),
        ("100.64.0.1", "private (shared address space)"),
        ("169.254.169.254", "link-local"),
        ("::ffff:169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("255.255.255.255", "reserved"),
        ("8.8.8.8", None),
        ("172.32.0.1", None),
        ("2001:4860:4860::8888", None),
        ("::ffff:8.8.8.8", None),
    ],
)
def test_address_kinds(address: str, kind: str | None) -> None:
    assert address_kind(ip(address)) == kind


def refusal(policy: EgressPolicy, host: str, *addresses: str) -> str:
    with pytest.raises(EgressRefusedError) as caught:
        policy.check(host, [ip(a) for a in addresses])
    return str(caught.value)


def test_deny_private_names_the_host_the_address_and_the_rule() -> None:
    policy = EgressPolicy(deny_private=True)
    assert refusal(policy, "localhost", "127.0.0.1") == (
        "refused by actions.deny_private_networks: localhost (127.0.0.1) is a loopback address"
    )
    assert refusal(policy, "169.254.169.254", "169.254.169.254") == (
        "refused by actions.deny_private_networks: 169.254.169.254 is a link-local address"
    )
    # one internal address among public ones refuses the name
    assert "10.0.0.1" in refusal(policy, "mixed.example", "8.8.8.8", "10.0.0.1")
    policy.check("public.example", [ip("8.8.8.8"), ip("2001:4860:4860::8888")])


def test_the_allow_list_admits_names_subdomains_and_networks() -> None:
    policy = EgressPolicy.from_settings(
        ["Hooks.Example.com.", "*.corp.example", "10.1.0.0/16", "192.0.2.7", "[2001:db8::1]"],
        deny_private=False,
    )
    policy.check("hooks.example.com", [ip("8.8.8.8")])
    policy.check("a.b.corp.example", [ip("8.8.4.4")])
    policy.check("anything", [ip("10.1.9.9")])
    policy.check("192.0.2.7", [ip("192.0.2.7")])
    policy.check("::ffff:10.1.0.1", [ip("::ffff:10.1.0.1")])
    policy.check("v6", [ip("2001:db8::1")])
    assert refusal(policy, "corp.example", "8.8.8.8") == (
        "refused by actions.allowed_hosts: corp.example (8.8.8.8) is not in the allowed hosts"
    )
    assert "allowed_hosts" in refusal(policy, "other.example", "8.8.8.8")
    assert "allowed_hosts" in refusal(policy, "anything", "10.1.0.1", "10.2.0.1")


def test_listed_networks_are_exempt_from_deny_private_but_names_are_not() -> None:
    policy = EgressPolicy.from_settings(["10.1.0.0/16", "localhost"], deny_private=True)
    policy.check("receiver.internal", [ip("10.1.2.3")])
    assert refusal(policy, "localhost", "127.0.0.1") == (
        "refused by actions.deny_private_networks: localhost (127.0.0.1) is a loopback address"
    )
    assert "allowed_hosts" in refusal(policy, "public.example", "8.8.8.8")


def test_a_bad_entry_is_refused() -> None:
    with pytest.raises(ValueError, match="not a host name"):
        EgressPolicy.from_settings(["http://x.example/"], deny_private=False)
    assert not EgressPolicy.from_settings([], deny_private=False).active


def test_the_system_resolver_turns_every_spelling_of_loopback_into_its_address() -> None:
    policy = EgressPolicy(deny_private=True)
    # the C resolver reads decimal, octal and hexadecimal IPv4 forms as inet_aton does
    for name in ("localhost", "2130706433", "0177.0.0.1", "0x7f.1", "127.1"):
        addresses = policy_refused_addresses(policy, name)
        assert ip("127.0.0.1") in addresses, name
    assert policy_refused_addresses(policy, "[::ffff:127.0.0.1]") == [ip("::ffff:127.0.0.1")]


def policy_refused_addresses(policy: EgressPolicy, host: str) -> list[IPAddress]:
    with pytest.raises(EgressRefusedError) as caught:
        policy.resolve(host, 80, system_resolver)
    assert caught.value.address is not None
    return [caught.value.address]


class Resolver:
    """Resolves names to chosen addresses, possibly different at each call (DNS rebinding)."""

    def __init__(self, answers: dict[str, list[list[str]]]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    def __call__(self, host: str, port: int) -> Sequence[IPAddress]:
        self.asked.append(host)
        found = self.answers.get(host)
        if not found:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [ip(a) for a in (found.pop(0) if len(found) > 1 else found[0])]


class Connector(httpcore.NetworkBackend):
    """Records where a connection would go and refuses it, so nothing leaves the machine."""

    def __init__(self) -> None:
        self.dialled: list[tuple[str, int]] = []

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        self.dialled.append((host, port))
        raise httpcore.ConnectError("connection refused by the test's connector")


def test_the_connection_goes_to_the_checked_address_never_a_second_answer() -> None:
    # the name answers a public address first, then loopback: only the first is ever used
    resolver = Resolver({"rebind.example": [["203.0.113.5"], ["127.0.0.1"]]})
    connector = Connector()
    backend = GuardedBackend(EgressPolicy(deny_private=True), resolver, connector)
    with pytest.raises(httpcore.ConnectError):
        backend.connect_tcp("rebind.example", 443)
    assert connector.dialled == [("203.0.113.5", 443)]
    with pytest.raises(EgressRefusedError, match="loopback"):
        backend.connect_tcp("rebind.example", 443)
    assert connector.dialled == [("203.0.113.5", 443)]
    assert resolver.asked == ["rebind.example", "rebind.example"]


def test_a_name_that_does_not_resolve_is_a_connect_error() -> None:
    backend = GuardedBackend(EgressPolicy(deny_private=True), Resolver({}), Connector())
    with pytest.raises(httpcore.ConnectError, match=r"cannot resolve nowhere\.invalid"):
        backend.connect_tcp("nowhere.invalid", 80)


def hook(url: str) -> ActionHook:
    return ActionHook(id="tell", type="webhook", properties={"url": url, "timeout": "2s"})


def test_a_refused_webhook_fails_with_the_rule_in_its_error_and_log() -> None:
    policy = EgressPolicy.from_settings(["hooks.example.com"], deny_private=True)
    with hook_client(policy) as client:
        outcome = call_hook(
            hook("http://169.254.169.254/latest/meta-data/"),
            {"event_type": "pre-commit"},
            env_prefix="LAKEFSACTION_",
            environ={},
            client=client,
        )
    expected = (
        'action failed: Post "http://169.254.169.254/latest/meta-data/": refused by '
        "actions.deny_private_networks: 169.254.169.254 is a link-local address"
    )
    assert outcome.error == expected
    assert outcome.log.endswith(f"Error: {expected}\n")
    assert "POST http://169.254.169.254/latest/meta-data/" in outcome.log


def test_the_guarded_client_sends_through_the_backend_with_the_original_host() -> None:
    # a redirect is not followed, and the connection the client opens goes through the rules
    resolver = Resolver({"hooks.example.com": [["203.0.113.9"]]})
    connector = Connector()
    policy = EgressPolicy.from_settings(["hooks.example.com"], deny_private=True)
    with hook_client(policy, resolver, connector) as client:
        with pytest.raises(httpx.ConnectError):
            client.post("https://hooks.example.com/x", content=b"{}")
        with pytest.raises(EgressRefusedError) as refused:
            client.post("http://other.example:8080/x", content=b"{}")
    assert str(refused.value) == (
        "refused by actions.allowed_hosts: other.example is not in the allowed hosts"
    )
    assert connector.dialled == [("203.0.113.9", 443)]
    assert resolver.asked == ["hooks.example.com"]
    assert not client.follow_redirects and not client.trust_env


def test_without_rules_the_client_is_plain() -> None:
    with hook_client(EgressPolicy()) as client:
        assert client.trust_env and not client.follow_redirects


def test_settings_read_lists_from_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAKEMIRROR_ACTIONS__ALLOWED_HOSTS", "hooks.example.com, 10.0.0.0/8")
    monkeypatch.setenv("LAKEMIRROR_ACTIONS__DENY_PRIVATE_NETWORKS", "true")
    actions = load_config().actions
    assert actions.allowed_hosts == ("hooks.example.com", "10.0.0.0/8")
    assert actions.deny_private_networks
    monkeypatch.setenv("LAKEMIRROR_ACTIONS__ALLOWED_HOSTS", '["*.corp.example", "[::1]"]')
    assert load_config().actions.allowed_hosts == ("*.corp.example", "[::1]")
    monkeypatch.setenv("LAKEMIRROR_ACTIONS__ALLOWED_HOSTS", "bad host")
    with pytest.raises(ConfigurationError, match=r"actions\.allowed_hosts: .*'bad host' is not"):
        load_config()
    assert ActionsSettings().allowed_hosts == () and not ActionsSettings().deny_private_networks


class TlsProbe(httpcore.NetworkBackend):
    """Connects to nothing: records the address dialled and the name TLS is started with."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str | None]] = []

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        probe = self

        class Stream(httpcore.NetworkStream):
            def start_tls(
                self, ssl_context: Any, server_hostname: str | None = None, timeout: Any = None
            ) -> httpcore.NetworkStream:
                probe.seen.append((host, server_hostname))
                raise httpcore.ConnectError("stopped before the handshake")

            def close(self) -> None:
                return None

        return Stream()


def test_tls_is_started_with_the_host_name_on_the_checked_address() -> None:
    resolver = Resolver({"hooks.example.com": [["203.0.113.9"]]})
    probe = TlsProbe()
    policy = EgressPolicy.from_settings(["hooks.example.com"], deny_private=True)
    with hook_client(policy, resolver, probe) as client, pytest.raises(httpx.ConnectError):
        client.post("https://hooks.example.com/x", content=b"{}")
    assert probe.seen == [("203.0.113.9", "hooks.example.com")]


@pytest.mark.parametrize(
    ("url", "where", "kind"),
    [
        ("http://2130706433:9/x", "2130706433 (127.0.0.1)", "a loopback"),
        ("http://0x7f.1:9/x", "0x7f.1 (127.0.0.1)", "a loopback"),
        ("http://[::ffff:127.0.0.1]:9/x", "::ffff:127.0.0.1 (::ffff:7f00:1)", "a loopback"),
        ("http://[::1]:9/x", "::1", "a loopback"),
        ("http://0:9/", "0 (0.0.0.0)", "an unspecified"),
        ("http://169.254.169.254/latest/", "169.254.169.254", "a link-local"),
    ],
)
def test_every_spelling_of_an_internal_address_is_refused(url: str, where: str, kind: str) -> None:
    with hook_client(EgressPolicy(deny_private=True)) as client:
        outcome = call_hook(hook(url), {}, env_prefix="X", environ={}, client=client)
    assert outcome.error == (
        f'action failed: Post "{url}": refused by actions.deny_private_networks: '
        f"{where} is {kind} address"
    )


def test_a_dotted_octal_address_is_refused_as_an_invalid_url() -> None:
    # httpx refuses dotted forms with leading zeros before anything resolves or connects
    with hook_client(EgressPolicy(deny_private=True)) as client:
        outcome = call_hook(
            hook("http://0177.0.0.1:9/x"), {}, env_prefix="X", environ={}, client=client
        )
    assert outcome.error == "action failed: invalid url: Invalid IPv4 address: '0177.0.0.1'"
