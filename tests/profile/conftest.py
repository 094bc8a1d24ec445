"""Profile runs: a short three-stage scenario, fake nsys/ncu executables on PATH."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# baseline, pulse, recovery: the pulse is the window the tests capture.
SCENARIO = """\
name = "pulse3"
api = "anthropic"

[load]
executor = "ramping-arrival-rate"
start_rate = 10
stages = [
  { duration = "1.5s", target = 10, name = "baseline" },
  { duration = "1.5s", target = 20, name = "pulse" },
  { duration = "1.5s", target = 10, name = "recovery" },
]
arrivals = "uniform"
graceful_stop = "20s"

[request]
max_tokens = 8
stream = true
timeout = "30s"
prompt_tokens = 16
"""

# A stand-in for nsys / ncu: records its argv, runs the server command after its options,
# forwards SIGTERM, and writes a placeholder report where the real tool would; `nsys stats`
# writes the two CSV summaries.
FAKE = """\
import json, os, signal, subprocess, sys
from pathlib import Path

TOOL = Path(sys.argv[0]).name
args = sys.argv[1:]
with open(os.environ["FAKE_PROFILER_LOG"], "a") as f:
    f.write(json.dumps([TOOL, *args]) + "\\n")

def value(prefix):
    return next(a[len(prefix):] for a in args if a.startswith(prefix))

if TOOL == "nsys" and args[0] == "stats":
    base = value("--output=")
    Path(base + "_cuda_gpu_kern_sum.csv").write_text(
        '"Time (%)","Total Time (ns)","Instances","Avg (ns)","Name"\\n'
        '60.0,3000000,30,100000,"ampere_sgemm_128x64_tn"\\n'
        '40.0,2000000,10,200000,"flash_fwd_kernel"\\n'
    )
    Path(base + "_nvtx_sum.csv").write_text(
        '"Time (%)","Total Time (ns)","Instances","Avg (ns)","Style","Range"\\n'
        '70.0,7000000,1,7000000,"StartEnd","refserver:request zq-3"\\n'
        '30.0,3000000,12,250000,"PushPop","refserver:decode_step"\\n'
    )
    sys.exit(0)
if TOOL == "nsys":
    args = args[1:]  # "profile"
    report = value("--output=") + ".nsys-rep"
else:
    report = value("--export=") + ".ncu-rep"
server = args[next(i for i, a in enumerate(args) if not a.startswith("--")):]
child = subprocess.Popen(server)
signal.signal(signal.SIGTERM, lambda *_: child.send_signal(signal.SIGTERM))
child.wait()
Path(report).write_bytes(b"placeholder " + TOOL.encode())
"""


@pytest.fixture
def scenario_file(tmp_path: Path) -> Path:
    path = tmp_path / "pulse3.toml"
    path.write_text(SCENARIO)
    return path


@pytest.fixture
def fake_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """nsys and ncu on PATH; their calls, one JSON argv a line, in the returned file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("nsys", "ncu"):
        exe = bin_dir / tool
        exe.write_text(f"#!{sys.executable}\n{FAKE}")
        exe.chmod(0o755)
    log = tmp_path / "profiler-calls.jsonl"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_PROFILER_LOG", str(log))
    return log


@pytest.fixture(autouse=True)
def calibration_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZQBENCH_CALIBRATION", str(tmp_path / "calibration.json"))
