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
import glob
import importlib.util
import logging
import os
import resource
import signal
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from reference_server import silent_reaper
from reference_server.api import App
from reference_server.backend import ComputeBackend
from reference_server.config import ServerConfig
from reference_server.model.sim import SimBackend

log = logging.getLogger("reference_server")

# File descriptors kept free beside the connections: the listener, logs, torch's libraries.
_FD_RESERVE = 128
# After the drain timeout, the time the HTTP layer gets to close its connections.
_CLOSE_GRACE_S = 1.5


def torch_importable() -> bool:
    return (
        importlib.util.find_spec("torch") is not None
        and importlib.util.find_spec("reference_server.model.torch_runner") is not None
    )


def cuda_usable() -> bool:
    """Whether torch sees a CUDA device (torch importable). Without a GPU device node on
    Linux the answer is no, and the sim engine is spared a 1-2 s import of torch."""
    if sys.platform.startswith("linux") and not (
        glob.glob("/dev/nvidia[0-9]*") or os.path.exists("/dev/kfd")
    ):
        return False
    import torch

    return bool(torch.cuda.is_available())


def resolve_engine(config: ServerConfig) -> tuple[str, str]:
    """(engine, why). `auto` runs the model with torch on a GPU only: on a CPU the model's
    steps share the front end's cores, so refusing a flood slows every admitted request's
    steps (15-20% on 2 cores), which no GPU server does. The sim engine's steps take time
    without taking the front end's CPU, so it models a GPU server where there is none."""
    if config.engine != "auto":
        return config.engine, ""
    if not torch_importable():
        return "sim", "torch is not installed"
    if config.device == "cpu":
        return "torch", "--device cpu"
    if config.device == "cuda" or cuda_usable():
        return "torch", "a CUDA device"
    return "sim", "no CUDA device, so the sim engine models a GPU server's steps"


def build_backend(config: ServerConfig, engine: str) -> ComputeBackend:
    if engine == "sim":
        return SimBackend(
            config.max_batch_size,
            config.max_context,
            config.seed,
            config.sim,
            prefix_cache_blocks=config.prefix_cache_blocks,
            prefix_cache_block_size=config.prefix_cache_block_size,
            step_shape=config.step_shape,
        )
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
        prefix_cache_blocks=config.prefix_cache_blocks,
        prefix_cache_block_size=config.prefix_cache_block_size,
        step_shape=config.step_shape,
    )


def banner(config: ServerConfig, backend: ComputeBackend, engine_why: str = "") -> str:
    scheme = "https" if config.ssl_cert else "http"
    why = f"; engine: {engine_why}" if engine_why else ""
    return (
        f"reference_server listening on {scheme}://{config.host}:{config.port} "
        f"(engine={backend.name}, device={backend.device}, scheduler={config.scheduler}, "
        f"slots={min(config.max_batch_size, backend.max_slots)}, steps={config.step_shape}{why})"
    )


def connection_cap(wanted: int) -> int:
    """The connection cap the process's file-descriptor limit allows: raises the soft
    limit as far as the hard one if needed, else lowers the cap (with a warning), so
    that accept() never fails with EMFILE and stalls everyone."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = wanted + _FD_RESERVE
    if soft != resource.RLIM_INFINITY and soft < need:
        soft = need if hard == resource.RLIM_INFINITY else min(need, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    if soft == resource.RLIM_INFINITY or soft >= need:
        return wanted
    cap = max(1, soft - _FD_RESERVE)
    log.warning("max_connections %d lowered to %d by the fd limit (ulimit -n)", wanted, cap)
    return cap


def build_server(config: ServerConfig, app: App) -> Any:
    """The embedded granian server, with the connection limits from the config."""
    from granian.constants import HTTPModes, Interfaces
    from granian.http import HTTP1Settings
    from granian.log import LogLevels
    from granian.server.embed import Server

    return Server(
        app,
        address=config.host,
        port=config.port,
        interface=Interfaces.ASGI,
        http=HTTPModes(config.http),
        backlog=4096,
        # Granian's backpressure is a semaphore held per open connection: the connection
        # cap. Connections over it wait in the listen backlog, not in front of the scheduler.
        backpressure=connection_cap(config.max_connections),
        # The header-read timer also runs while a kept-alive connection waits for its next
        # request, so it is the idle timeout too (silent_reaper covers a first request).
        http1_settings=HTTP1Settings(header_read_timeout=round(config.idle_timeout_s * 1000)),
        log_level=LogLevels.error,
        ssl_cert=Path(config.ssl_cert) if config.ssl_cert else None,
        ssl_key=Path(config.ssl_key) if config.ssl_key else None,
    )


async def serve_async(config: ServerConfig, backend: ComputeBackend, engine_why: str = "") -> int:
    app = App(config, backend, engine_why=engine_why)
    server = build_server(config, app)
    loop = asyncio.get_running_loop()
    serving = loop.create_task(server.serve())
    stopping: list[asyncio.Task[None]] = []

    async def shutdown() -> None:
        drained = await app.drain(config.drain_timeout_s)
        if not drained:
            log.warning("drain timeout: %d requests still in flight", app.in_flight)
            app.abort_in_flight()
        server.stop()
        # Granian waits for every connection to close; do not let a stuck one keep us.
        await asyncio.wait({serving}, timeout=_CLOSE_GRACE_S)
        serving.cancel()

    def on_signal() -> None:
        if not stopping:
            stopping.append(loop.create_task(shutdown()))

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    app.start_engine()  # before the socket opens: the first request finds it running
    reaper = (
        loop.create_task(silent_reaper.run(config.port, config.idle_timeout_s))
        if silent_reaper.supported()
        else None
    )
    print(banner(config, backend, engine_why), flush=True)
    try:
        await serving
    except asyncio.CancelledError:
        if not stopping:  # cancelled from outside, not by our shutdown's deadline
            raise
    finally:
        if reaper is not None:
            reaper.cancel()
        app.stop_engine()
    return 0


def serve(config: ServerConfig) -> int:
    engine, why = resolve_engine(config)
    backend = build_backend(config, engine)
    try:
        return _run(serve_async(config, backend, why))
    finally:
        sys.stdout.flush()


def _run(main: Coroutine[Any, Any, int]) -> int:
    try:
        import uvloop  # a faster event loop, when installed
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)
