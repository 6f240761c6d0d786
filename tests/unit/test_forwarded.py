"""The client address behind trusted proxies (api/forwarded.py): the socket peer unless it is
trusted, then the right-most untrusted hop of the one forwarding header the setting names."""

from __future__ import annotations

import ipaddress

import pytest
from pydantic import ValidationError

from api.forwarded import forwarded_for, parse_address, resolve, x_forwarded_for
from infra.settings import Settings

PROXIES = Settings(trusted_proxies="10.0.0.0/8, 2001:db8:ffff::/48").trusted_proxies
XFF = "x-forwarded-for"
FWD = "forwarded"


def test_the_setting_is_a_comma_separated_list_of_networks_parsed_once() -> None:
    parsed = Settings(trusted_proxies=" 10.0.0.0/8 ,127.0.0.1,, ::1 ").trusted_proxies
    assert parsed == (
        ipaddress.ip_network("10.0.0.0/8"),
        ipaddress.ip_network("127.0.0.1/32"),
        ipaddress.ip_network("::1/128"),
    )
    assert Settings().trusted_proxies == ()
    with pytest.raises(ValidationError):
        Settings(trusted_proxies="10.0.0.0/33")
    with pytest.raises(ValidationError):
        Settings(trusted_proxies="10.0.0.1/8")  # host bits set: a typo, not a network


def test_the_peer_is_the_client_when_it_is_not_a_trusted_proxy() -> None:
    forged = ["203.0.113.9"]
    assert resolve("198.51.100.7", forged, PROXIES, XFF) == "198.51.100.7"
    assert resolve("198.51.100.7", forged, (), XFF) == "198.51.100.7"


def test_the_right_most_untrusted_hop_is_the_client() -> None:
    # the client forged the first hop; the proxies appended the rest
    lines = ["1.2.3.4, 198.51.100.7, 10.1.1.1"]
    assert resolve("10.2.2.2", lines, PROXIES, XFF) == "198.51.100.7"


def test_every_line_of_the_header_counts_in_order() -> None:
    lines = ["1.2.3.4", "198.51.100.7,10.1.1.1"]
    assert resolve("10.2.2.2", lines, PROXIES, XFF) == "198.51.100.7"


def test_no_header_from_a_trusted_peer_means_the_peer() -> None:
    assert resolve("10.2.2.2", [], PROXIES, XFF) == "10.2.2.2"


def test_only_trusted_hops_mean_the_furthest_one() -> None:
    assert resolve("10.2.2.2", ["10.9.9.9, 10.1.1.1"], PROXIES, XFF) == "10.9.9.9"


def test_a_hop_that_is_no_address_stops_at_the_nearest_trusted_proxy() -> None:
    assert resolve("10.2.2.2", ["198.51.100.7, unknown, 10.1.1.1"], PROXIES, XFF) == "10.1.1.1"
    assert resolve("10.2.2.2", ["garbage"], PROXIES, XFF) == "10.2.2.2"


def test_the_other_header_is_not_read() -> None:
    """A proxy writing X-Forwarded-For passes a client's own `Forwarded` through untouched."""
    assert resolve("10.2.2.2", ["for=1.2.3.4"], PROXIES, XFF) == "10.2.2.2"


def test_x_forwarded_for_with_ports_and_ipv6() -> None:
    assert resolve("10.2.2.2", ["198.51.100.7:4711"], PROXIES, XFF) == "198.51.100.7"
    assert resolve("10.2.2.2", ["2001:db8::17"], PROXIES, XFF) == "2001:db8::17"
    assert resolve("10.2.2.2", ["[2001:db8::17]:4711"], PROXIES, XFF) == "2001:db8::17"
    ipv6_proxy = "2001:db8:ffff::1"
    assert resolve(ipv6_proxy, ["198.51.100.7, 2001:db8:ffff::2"], PROXIES, XFF) == "198.51.100.7"


def test_forwarded_elements_quotes_ports_and_brackets() -> None:
    lines = [
        'for=1.2.3.4;proto=https, For="[2001:db8:cafe::17]:4711";by=10.1.1.1',
        'for="198.51.100.7:80", proto=http;for=10.1.1.1',
    ]
    assert list(forwarded_for(lines)) == [
        "1.2.3.4",
        "[2001:db8:cafe::17]:4711",
        "198.51.100.7:80",
        "10.1.1.1",
    ]
    assert resolve("10.2.2.2", lines, PROXIES, FWD) == "198.51.100.7"
    assert resolve("10.2.2.2", lines[:1], PROXIES, FWD) == "2001:db8:cafe::17"


def test_forwarded_separators_inside_a_quoted_string_do_not_split() -> None:
    lines = ['for="_a,b;c=\\"d\\"";proto=https, for=198.51.100.7']
    assert list(forwarded_for(lines)) == ['_a,b;c="d"', "198.51.100.7"]


def test_forwarded_elements_without_for_and_obfuscated_names_are_unknown_hops() -> None:
    assert list(forwarded_for(["proto=https;by=10.1.1.1, for=_hidden"])) == ["unknown", "_hidden"]
    lines = ["for=198.51.100.7, for=_hidden, for=10.1.1.1"]
    assert resolve("10.2.2.2", lines, PROXIES, FWD) == "10.1.1.1"


def test_x_forwarded_for_splits_and_trims() -> None:
    assert list(x_forwarded_for([" 1.2.3.4 ,5.6.7.8", "9.9.9.9"])) == [
        "1.2.3.4",
        "5.6.7.8",
        "9.9.9.9",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("192.0.2.1", "192.0.2.1"),
        ("192.0.2.1:4711", "192.0.2.1"),
        ("2001:db8::1", "2001:db8::1"),
        ("[2001:db8::1]", "2001:db8::1"),
        ("[2001:db8::1]:4711", "2001:db8::1"),
        ("::ffff:192.0.2.1", "192.0.2.1"),  # a dual-stack socket's IPv4 peer
        ("2001:DB8:0::1", "2001:db8::1"),
    ],
)
def test_addresses_a_hop_may_name(text: str, expected: str) -> None:
    assert str(parse_address(text)) == expected


@pytest.mark.parametrize(
    "text", ["", "unknown", "_hidden", "192.0.2.1:port", "[2001:db8::1", "[2001:db8::1]x", "1.2.3"]
)
def test_what_is_no_address(text: str) -> None:
    assert parse_address(text) is None


def test_a_mapped_ipv4_peer_is_matched_against_ipv4_networks() -> None:
    assert resolve("::ffff:10.2.2.2", ["198.51.100.7"], PROXIES, XFF) == "198.51.100.7"
