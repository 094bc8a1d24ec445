"""Process wiring: pick the backend, build the app, run granian embedded, drain on SIGTERM.

Granian runs embedded in this process's event loop (`granian.server.embed`), so
the app object, its engine thread and the signal handling all live in one
process that zqbench can start and stop by PID. Granian was chosen because it
serves HTTP/1.1 and h2c prior knowledge on one port (`--http auto`), TLS with
ALPN, and had the lowest per-request overhead measured here (about 65 us,
against 80-100 us for uvicorn+httptools, which cannot speak h2c).
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import signal
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from reference_server.api import App
from reference_server.backend import ComputeBackend
from reference_server.config import ServerConfig
from reference_server.model.sim import SimBackend

log = logging.getLogger("reference_server")


def torch_importable() -> bool:
    return (
        importlib.util.find_spec("torch") is not None
        and importlib.util.find_spec("reference_server.model.torch_runner") is not None
    )


def resolve_engine(config: ServerConfig) -> str:
    if config.engine != "auto":
        return config.engine
    return "torch" if torch_importable() else "sim"


def build_backend(config: ServerConfig) -> ComputeBackend:
    engine = resolve_engine(config)
    if engine == "sim":
        return SimBackend(config.max_batch_size, config.max_context, config.seed, config.sim)
    import torch  # the torch engine is an optional extra

    from reference_server.model.torch_runner import TorchBackend

    device = config.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: torch sees no CUDA device")
    if device == "cpu" and config.max_concurrent_kernels:
        torch.set_num_threads(config.max_concurrent_kernels)
    # model_path: a preset name, or a saved checkpoint (its shape must match a preset's).
    is_file = Path(config.preset).is_file()
    return TorchBackend(
        preset=config.checkpoint_preset if is_file else config.preset,
        checkpoint=config.preset if is_file else None,
        device=device,
        max_slots=config.max_batch_size,
        max_seq_len=config.max_context,
        seed=config.seed,
        use_cuda_graphs=config.use_cuda_graphs,
        kv_cache_dtype=config.kv_cache_dtype,
    )


def banner(config: ServerConfig, backend: ComputeBackend) -> str:
    scheme = "https" if config.ssl_cert else "http"
    return (
        f"reference_server listening on {scheme}://{config.host}:{config.port} "
        f"(engine={backend.name}, device={backend.device}, scheduler={config.scheduler}, "
        f"slots={min(config.max_batch_size, backend.max_slots)})"
    )


async def serve_async(config: ServerConfig, backend: ComputeBackend) -> int:
    from granian.constants import HTTPModes, Interfaces
    from granian.log import LogLevels
    from granian.server.embed import Server

    app = App(config, backend)
    server = Server(
        app,
        address=config.host,
        port=config.port,
        interface=Interfaces.ASGI,
        http=HTTPModes(config.http),
        # Granian's own concurrency limit would be a hidden queue in front of the
        # scheduler: make it large, so admission is decided by our scheduler alone.
        backlog=4096,
        backpressure=4096,
        log_level=LogLevels.error,
        ssl_cert=Path(config.ssl_cert) if config.ssl_cert else None,
        ssl_key=Path(config.ssl_key) if config.ssl_key else None,
    )
    loop = asyncio.get_running_loop()
    stopping: list[asyncio.Task[None]] = []

    async def shutdown() -> None:
        drained = await app.drain(config.drain_timeout_s)
        if not drained:
            log.warning("drain timeout: %d requests still in flight", app.in_flight)
        server.stop()

    def on_signal() -> None:
        if not stopping:
            stopping.append(loop.create_task(shutdown()))

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    app.start_engine()  # before the socket opens: the first request finds it running
    print(banner(config, backend), flush=True)
    try:
        await server.serve()
    finally:
        app.stop_engine()
    return 0


def serve(config: ServerConfig) -> int:
    backend = build_backend(config)
    try:
        return _run(serve_async(config, backend))
    finally:
        sys.stdout.flush()


def _run(main: Coroutine[Any, Any, int]) -> int:
    try:
        import uvloop  # a faster event loop, when installed
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)
