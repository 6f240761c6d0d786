"""The client address of a request, behind trusted reverse proxies or none.

The socket peer is the client unless it is one of `SERVICE_TRUSTED_PROXIES`. A trusted proxy
appends the address it saw to its forwarding header (`SERVICE_TRUSTED_PROXY_HEADER`:
`X-Forwarded-For`, or RFC 7239 `Forwarded: for=`), so the hops of that header are read from the
right: every trusted proxy is skipped, and the first hop that is not one is the client. Hops
further left were written by that client and prove nothing. A header sent by a peer that is not
trusted is never read (DECISIONS "Production beyond one machine": nothing else trusts a header).

A hop that is no address (`unknown`, an obfuscated `_name`, garbage) cannot be keyed on: the
answer is then the nearest trusted proxy, the last address that is known to be true.

The rate limiter's anonymous key, the access log and the request span all read
`client_address(request)`; nothing else reads `request.remote`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Iterator, Sequence

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from aiohttp.web_request import BaseRequest
from aiohttp.web_response import StreamResponse

from api import keys

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
UNKNOWN = "unknown"  # no socket peer (a request that did not come over TCP)
_ESCAPED = re.compile(r"\\(.)")


def client_address(request: BaseRequest) -> str:
    """The address of the client that sent `request` (worked out once per request)."""
    known = request.get(keys.CLIENT_ADDRESS)
    if known is None:
        known = request.remote or UNKNOWN
        if isinstance(request, web.Request):  # not a request the parser refused
            settings = request.app[keys.SETTINGS]
            if settings.trusted_proxies:
                header = settings.trusted_proxy_header
                lines = request.headers.getall(header, [])
                known = resolve(request.remote, lines, settings.trusted_proxies, header)
        request[keys.CLIENT_ADDRESS] = known
    return known


def resolve(peer: str | None, lines: Sequence[str], trusted: Sequence[Network], header: str) -> str:
    """The client address given the socket `peer`, every line of the forwarding `header`
    (`x-forwarded-for` or `forwarded`) in the order received, and the trusted networks."""
    peer_address = parse_address(peer or "")
    if peer_address is None:
        return peer or UNKNOWN
    if not _is_trusted(peer_address, trusted):
        return str(peer_address)
    hops = forwarded_for(lines) if header == "forwarded" else x_forwarded_for(lines)
    nearest = peer_address
    for hop in reversed(list(hops)):
        address = parse_address(hop)
        if address is None:
            return str(nearest)
        if not _is_trusted(address, trusted):
            return str(address)
        nearest = address
    return str(nearest)  # every hop is a trusted proxy: the furthest one is the client


def _is_trusted(address: Address, trusted: Iterable[Network]) -> bool:
    return any(address in network for network in trusted)


def parse_address(text: str) -> Address | None:
    """An address as a hop names it: `192.0.2.1`, `192.0.2.1:4711`, `2001:db8::1`,
    `[2001:db8::1]`, `[2001:db8::1]:4711`; an IPv4-mapped IPv6 address is its IPv4 address
    (a dual-stack socket reports IPv4 peers that way). None for anything else."""
    text = text.strip()
    if text.startswith("["):
        inside, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not _is_port(rest)):
            return None
        text = inside
    elif text.count(":") == 1:  # IPv4 with a port; a bare IPv6 address has several colons
        text, _, port = text.partition(":")
        if not port.isdigit():
            return None
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _is_port(text: str) -> bool:
    return text.startswith(":") and text[1:].isdigit()


def x_forwarded_for(lines: Iterable[str]) -> Iterator[str]:
    """The hops of `X-Forwarded-For`, left to right, over every line of the header."""
    for line in lines:
        yield from (hop.strip() for hop in line.split(","))


def forwarded_for(lines: Iterable[str]) -> Iterator[str]:
    """The `for=` value of each element of RFC 7239 `Forwarded`, left to right, over every line
    (an element without one is an `unknown` hop). Values are tokens or quoted strings; a quoted
    string may hold the `,` and `;` that separate elements and pairs elsewhere."""
    for line in lines:
        for element in _split(line, ","):
            found = UNKNOWN
            for pair in _split(element, ";"):
                name, equals, value = pair.partition("=")
                if equals and name.strip().lower() == "for":
                    found = _unquoted(value.strip())
            yield found


def _split(text: str, separator: str) -> Iterator[str]:
    """`text` split at `separator`, except inside a quoted string."""
    start, quoted, escaped = 0, False, False
    for index, char in enumerate(text):
        if escaped:
            escaped = False
        elif quoted and char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == separator and not quoted:
            yield text[start:index]
            start = index + 1
    yield text[start:]


def _unquoted(value: str) -> str:
    """A quoted string's content, its `\\x` escapes undone; a token as it is."""
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return _ESCAPED.sub(r"\1", value[1:-1])
    return value


class ClientAddressLogger(AbstractAccessLogger):
    """The access log, one line a request, naming the client address (aiohttp's own `%a` is
    the socket peer, and its format's atoms cannot be replaced)."""

    def log(self, request: BaseRequest, response: StreamResponse, time: float) -> None:
        address = client_address(request)
        self.logger.info(
            '%s "%s %s HTTP/%d.%d" %d %d %.3f',
            address,
            request.method,
            request.path_qs,
            *request.version,
            response.status,
            response.body_length,
            time,
            extra={"client_address": address, "status": response.status, "duration_s": time},
        )
