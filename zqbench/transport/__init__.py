"""HTTP transports behind one interface (`Transport`), chosen by measurement.

Only this package opens connections. `raw_h1` is the HTTP/1.1 hot path (an
asyncio Protocol; `aiohttp_h1` is the selectable reference), `h2_client` speaks
HTTP/2 on h2's state machine, `probe` uses httpx where throughput does not matter.
"""
