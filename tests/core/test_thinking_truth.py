"""Time to first answer against the server's own stamps (#42's first acceptance line): the
reference server thinking 32 tokens before each answer stamps, in `zq_timing`, when the
write carrying its first token and its first answer token began. zqbench's transport and
parser, as a run uses them, time the same two moments on arrival; the thinking phase
between them must agree within 1 ms, and the counts exactly.

Sequential requests, so each is alone on the server and the client: the 1 ms is what the
measurement adds, not what a busy event loop adds (tests/core/accuracy.py for load). TTFT
itself is not compared here: from the client's send to the server's read of the request is
the request's trip, 0.56-1.0 ms on a quiet machine and 5-11 ms on a busy CI one (the
server's read waits for its core), a figure of the machine, not of zqbench.
"""

from __future__ import annotations

import asyncio
import json
import statistics
from collections.abc import Iterator

import pytest

from tests.core.conftest import MODEL
from zqbench.dialects import get_dialect
from zqbench.dialects.base import TEXT, THINKING, DialectConfig, RequestSpec
from zqbench.dialects.sse import SSEEvent
from zqbench.target.embedded import EmbeddedServer
from zqbench.transport.base import Exchange, PoolLimits
from zqbench.transport.factory import make_transport

pytestmark = pytest.mark.slow

THINKING_TOKENS = 32
N = 20


@pytest.fixture(scope="module")
def thinking_server() -> Iterator[EmbeddedServer]:
    args = ("--thinking-tokens", str(THINKING_TOKENS))
    with EmbeddedServer(engine="sim", max_batch_size=4, extra_args=args) as server:
        yield server


async def _requests(url: str, api: str) -> list[tuple[object, dict, Exchange]]:
    dialect = get_dialect(api, DialectConfig(model=MODEL))
    transport = make_transport(url, http2=False, limits=PoolLimits(warm_connections=1))
    await transport.open()
    out = []
    try:
        for i in range(N):
            spec = RequestSpec("truth", f"think about {i}", 48)
            timing: dict = {}

            def keep(event: SSEEvent, t_ns: int, timing: dict = timing) -> None:
                if "zq_timing" in event.data:
                    timing.update(json.loads(event.data)["zq_timing"])

            parser = dialect.parser(spec, on_event=keep)
            ex = Exchange()
            await transport.send(dialect.build(spec), parser, 30.0, ex)
            out.append((parser.summary, timing, ex))
    finally:
        await transport.close()
    return out


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_the_thinking_phase_is_timed_within_a_millisecond_of_the_servers_stamps(
    thinking_server: EmbeddedServer, api: str
) -> None:
    errors_ms = []
    for s, timing, _ in asyncio.run(_requests(thinking_server.base_url, api)):
        assert s.error is None and s.carried == THINKING | TEXT, s  # type: ignore[attr-defined]
        assert s.reasoning_events == THINKING_TOKENS  # type: ignore[attr-defined]
        if api == "openai":
            assert s.reasoning_tokens == THINKING_TOKENS  # type: ignore[attr-defined]
        client_ms = (s.t_first_answer - s.t_first_token) / 1e6  # type: ignore[attr-defined]
        server_ms = (timing["first_answer"] - timing["first_token"]) * 1e3
        errors_ms.append(client_ms - server_ms)
    # A stamp is taken just before its write, so the client can only be later, never
    # earlier, for each moment; their difference has either sign, within the 1 ms.
    # The median: a busy machine may deschedule a read or two by tens of ms.
    assert statistics.median(abs(e) for e in errors_ms) < 1.0, errors_ms
