"""Load engines: they turn a schedule into requests and requests into Samples.

`native` is the asyncio engine (one process, or several through `workers`).
A Locust-based engine for many machines will sit beside it behind the same
`WorkerSpec` -> samples-on-disk contract.
"""
