"""A real llama.cpp server (llama-server built from source, the tiny random Llama) as a target.

    reason = llamacpp_available()      # None, or why there is no target here
    server = start_llama_server(port, log_path)
    try:
        ... server.base_url, server.model ...
    finally:
        server.stop()

Standard library only, so that it imports from the repository's own venv. setup.sh builds the
binary and the GGUF into a cache outside the repository; serve.sh runs them, pinned to core 0.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from tests.servers.process_group import GroupServer, free_port, start_in_group

__all__ = ["LlamaServer", "free_port", "llamacpp_available", "start_llama_server"]

HERE = Path(__file__).resolve().parent
SERVE_SH = HERE / "serve.sh"
MODEL_NAME = "tiny"  # --alias in serve.sh
SLOTS = 4  # --parallel in serve.sh


def cache_dir() -> Path:
    return Path(os.environ.get("ZQ_LLAMACPP_DIR", "~/.cache/zqbench/llama-server")).expanduser()


def llamacpp_available() -> str | None:
    """None when start_llama_server() can run here, else the reason it cannot (for a skip)."""
    if not hasattr(os, "sched_getaffinity"):
        return "the llama.cpp target needs Linux (taskset, process groups)"
    cache = cache_dir()
    for need in ("bin/llama-server", "tiny-llama.gguf"):
        if not (cache / need).is_file():
            return f"no {cache / need}: run tests/llamacpp/setup.sh"
    for tool in ("bash", "taskset"):
        if not any((Path(d) / tool).exists() for d in os.get_exec_path()):
            return f"{tool} is not on PATH"
    return None


class LlamaServer(GroupServer):
    """A running llama-server with SLOTS slots; its /health is 200 once the model is loaded."""


def start_llama_server(
    port: int,
    log_path: str | os.PathLike[str],
    *,
    extra_args: Sequence[str] = (),
    deadline_s: float = 60.0,
) -> LlamaServer:
    """Start serve.sh on 127.0.0.1:port and return once /health answers 200 (about 1 s)."""
    reason = llamacpp_available()
    if reason is not None:
        raise RuntimeError(reason)
    server = start_in_group(
        ["bash", str(SERVE_SH), str(port), *extra_args],
        port,
        log_path,
        name="llama-server",
        model=MODEL_NAME,
        deadline_s=deadline_s,
        server_class=LlamaServer,
    )
    assert isinstance(server, LlamaServer)
    return server
