"""The address rules for clients' own MCP servers (gateway/destinations.py)."""

from __future__ import annotations

import ipaddress

import pytest

from gateway.destinations import DestinationPolicy, ForbiddenDestination, embedded_ipv4, refusal_reason


@pytest.mark.parametrize("address, reason", [
    ("127.0.0.1", "loopback"), ("127.255.0.9", "loopback"), ("::1", "loopback"),
    ("10.1.2.3", "private"), ("172.16.0.1", "private"), ("172.31.255.255", "private"), ("192.168.1.1", "private"),
    ("fd12:3456::1", "private"), ("fc00::1", "private"),
    ("169.254.1.1", "link-local"), ("fe80::1", "link-local"),
    ("169.254.169.254", "metadata"), ("fd00:ec2::254", "metadata"), ("100.100.100.200", "metadata"),
    ("168.63.129.16", "metadata"),
    ("100.64.0.1", "CGNAT"), ("100.127.255.254", "CGNAT"),
    ("224.0.0.1", "multicast"), ("239.255.255.250", "multicast"), ("ff02::1", "multicast"),
    ("0.0.0.0", "unspecified"), ("::", "unspecified"),
    ("240.0.0.1", "reserved"), ("255.255.255.255", "reserved"), ("192.0.2.1", "reserved"), ("2001:db8::1", "reserved"),
    # An IPv4 address inside an IPv6 one is judged as itself.
    ("::ffff:127.0.0.1", "loopback"), ("::ffff:169.254.169.254", "metadata"), ("::ffff:10.0.0.1", "private"),
    ("::127.0.0.1", "loopback"), ("64:ff9b::7f00:1", "loopback"), ("64:ff9b::a9fe:a9fe", "metadata"),
    ("2002:7f00:1::1", "loopback"), ("2002:c0a8:101::1", "private"),
])
def test_addresses_that_are_not_public(address, reason):
    assert refusal_reason(ipaddress.ip_address(address)) == reason


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "100.63.255.255", "100.128.0.1", "172.32.0.1",
                                     "2001:4860:4860::8888", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"])
def test_public_addresses(address):
    assert refusal_reason(ipaddress.ip_address(address)) is None


def test_embedded_ipv4():
    assert embedded_ipv4(ipaddress.ip_address("::ffff:1.2.3.4")) == ipaddress.ip_address("1.2.3.4")
    assert embedded_ipv4(ipaddress.ip_address("2001:4860::1")) is None
    assert embedded_ipv4(ipaddress.ip_address("1.2.3.4")) is None


def test_the_allow_list_takes_cidrs_and_host_names():
    policy = DestinationPolicy.of(["10.20.0.0/16", "127.0.0.1", "MCP.Internal.Example."])
    policy.check_address("x", ipaddress.ip_address("10.20.3.4"))
    policy.check_address("x", ipaddress.ip_address("127.0.0.1"))
    policy.check_address("x", ipaddress.ip_address("::ffff:127.0.0.1"))  # the same address, mapped
    policy.check_address("mcp.internal.example", ipaddress.ip_address("192.168.9.9"))
    with pytest.raises(ForbiddenDestination, match="private"):
        policy.check_address("x", ipaddress.ip_address("10.21.0.1"))
    with pytest.raises(ForbiddenDestination, match="loopback"):
        policy.check_address("x", ipaddress.ip_address("127.0.0.2"))


@pytest.mark.parametrize("url, message", [
    ("http://127.0.0.1:9/mcp", "loopback"), ("http://[::1]/mcp", "loopback"),
    ("http://[::ffff:7f00:1]/mcp", "loopback"), ("http://169.254.169.254/latest", "metadata"),
    ("https://user@10.0.0.1/mcp", "private"), ("ftp://example.com/mcp", "http or https"),
    ("file:///etc/passwd", "http or https"), ("http:///mcp", "http or https"), ("http://x:99999/", "not a valid"),
])
def test_urls_refused_before_any_lookup(url, message):
    with pytest.raises(ForbiddenDestination, match=message):
        DestinationPolicy().check_url(url)


def test_urls_with_names_or_public_addresses_wait_for_the_resolver():
    assert DestinationPolicy().check_url("https://mcp.example.com/mcp") == ("mcp.example.com", 443)
    assert DestinationPolicy().check_url("http://8.8.8.8:8080/mcp") == ("8.8.8.8", 8080)


async def test_a_name_is_judged_on_every_address_it_resolves_to():
    with pytest.raises(ForbiddenDestination, match="'localhost' is not allowed: it is a loopback address"):
        await DestinationPolicy().resolve("localhost", 80)
    with pytest.raises(ForbiddenDestination, match="loopback"):
        await DestinationPolicy().resolve("2130706433", 80)  # 127.0.0.1 as one number
    assert await DestinationPolicy.of(["127.0.0.0/8", "::1/128"]).resolve("127.0.0.1", 80) == ["127.0.0.1"]
    assert "127.0.0.1" in await DestinationPolicy.of(["localhost"]).resolve("localhost", 80)
    with pytest.raises(ForbiddenDestination, match="cannot be resolved"):
        await DestinationPolicy().resolve("no-such-host.invalid", 80)
