"""Pick and build the transport for a target URL."""

from __future__ import annotations

from zqbench.transport._common import parse_base_url
from zqbench.transport.base import PoolLimits, Transport


def make_transport(
    base_url: str, *, http2: bool, limits: PoolLimits, insecure: bool = False
) -> Transport:
    """HTTP/2 (h2c prior knowledge or TLS+ALPN) or HTTP/1.1 (aiohttp) to `base_url`.

    `base_url` is scheme://host[:port][/prefix]; the prefix goes before every request path.
    A bad URL raises `zqbench.errors.UsageError` with a one-line message. Imports are lazy so
    building one transport does not load the other's library.
    """
    parse_base_url(base_url)  # validate before importing anything
    if http2:
        from zqbench.transport.h2_client import H2Transport

        return H2Transport(base_url, limits, insecure=insecure)
    from zqbench.transport.aiohttp_h1 import AiohttpTransport

    return AiohttpTransport(base_url, limits, insecure=insecure)
