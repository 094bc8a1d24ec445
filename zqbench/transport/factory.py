"""Pick and build the transport for a target URL."""

from __future__ import annotations

from zqbench.errors import OptionError
from zqbench.transport.base import PoolLimits, Transport
from zqbench.transport.origin import parse_base_url

H1_CLIENTS = ("raw", "aiohttp")


def make_transport(
    base_url: str,
    *,
    http2: bool,
    limits: PoolLimits,
    insecure: bool = False,
    h1_client: str = "raw",
) -> Transport:
    """HTTP/2 (h2c prior knowledge or TLS+ALPN) or HTTP/1.1 to `base_url`.

    HTTP/1.1 goes through our own asyncio protocol (`raw`) by default: measured side by
    side (benchmarks/h1_clients.py) it holds the open-loop schedule to about 11,000 req/s
    on one core where aiohttp falls behind near 5,000, at half the CPU per request.
    `aiohttp` stays selectable as the reference implementation.

    `base_url` is scheme://host[:port][/prefix]; the prefix goes before every request path.
    A bad URL raises `zqbench.errors.UsageError` with a one-line message. Imports are lazy so
    building one transport does not load the other's library.
    """
    parse_base_url(base_url)  # validate before importing anything
    if http2:
        from zqbench.transport.h2_client import H2Transport

        return H2Transport(base_url, limits, insecure=insecure)
    if h1_client == "raw":
        from zqbench.transport.raw_h1 import RawH1Transport

        return RawH1Transport(base_url, limits, insecure=insecure)
    if h1_client == "aiohttp":
        from zqbench.transport.aiohttp_h1 import AiohttpTransport

        return AiohttpTransport(base_url, limits, insecure=insecure)
    raise OptionError("h1_client", f"choose one of {', '.join(H1_CLIENTS)}", value=repr(h1_client))
