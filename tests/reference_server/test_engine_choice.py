"""`--engine auto`: the torch model on a GPU, the sim engine where there is none (#41)."""

from __future__ import annotations

import pytest

from reference_server import server
from reference_server.config import ServerConfig

NO_CUDA = "no CUDA device, so the sim engine models a GPU server's steps"


@pytest.mark.parametrize(
    ("engine", "device", "torch", "cuda", "chosen"),
    [
        ("auto", "auto", True, True, ("torch", "a CUDA device")),
        ("auto", "auto", True, False, ("sim", NO_CUDA)),
        ("auto", "auto", False, False, ("sim", "torch is not installed")),
        ("auto", "cpu", True, False, ("torch", "--device cpu")),  # asked for the CPU model
        ("auto", "cuda", True, False, ("torch", "a CUDA device")),  # fails at start: no CUDA
        ("torch", "auto", True, False, ("torch", "")),
        ("sim", "auto", True, True, ("sim", "")),
    ],
)  # fmt: skip
def test_auto_runs_the_model_only_on_a_gpu(
    monkeypatch: pytest.MonkeyPatch,
    engine: str,
    device: str,
    torch: bool,
    cuda: bool,
    chosen: tuple[str, str],
) -> None:
    monkeypatch.setattr(server, "torch_importable", lambda: torch)
    monkeypatch.setattr(server, "cuda_usable", lambda: cuda)
    assert server.resolve_engine(ServerConfig(engine=engine, device=device)) == chosen


def test_this_machine_without_a_gpu_device_needs_no_torch_import() -> None:
    """No /dev/nvidia* and no /dev/kfd (this project's CI machines): no CUDA, answered
    without importing torch; a machine with one asks torch."""
    import glob
    import os
    import sys

    if glob.glob("/dev/nvidia[0-9]*") or os.path.exists("/dev/kfd"):
        pytest.skip("this machine has a GPU device node: torch is asked")
    had_torch = "torch" in sys.modules
    assert server.cuda_usable() is False
    assert ("torch" in sys.modules) == had_torch
