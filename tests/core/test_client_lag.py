"""A client that cannot keep up with its streams says so (#43 item 3): its event loop runs
what is ready late, so its token stamps are late, and the run ends INVALID with the reason.

The token-tick server (benchmarks/tickserver.c, one thread of C) writes a token to each of
300 open streams every millisecond: 300,000 token events a second, several times what one
zqbench process parses on this machine. The same server at 20 streams every 20 ms (1,000 a
second) leaves the loop idle: the run records its client lag and keeps its verdict.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from tickserver import TickServer

from zqbench.pipeline.run import RunOptions, run_scenario

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc"),
]

SCENARIO = """
name = "streams"
api = "openai"
[load]
executor = "constant-vus"
vus = {vus}
duration = "3s"
[request]
prompt_tokens = 8
max_tokens = 100
[validity]
min_samples = 10
"""


def _run(tmp_path: Path, name: str, vus: int, interval_us: int, limit: str = "") -> dict:
    folder = tmp_path / name
    folder.mkdir()
    with TickServer(
        interval_us=interval_us, tokens=100, cpu=1, realtime=False, folder=folder
    ) as srv:
        scenario = folder / "streams.toml"
        limit = f'max_client_lag = "{limit}"\n' if limit else ""  # else the default
        scenario.write_text(SCENARIO.format(vus=vus) + limit)
        run_scenario(
            RunOptions.of(
                scenario=str(scenario),
                target=srv.url,
                model="tick",
                out=folder / "run",
                calibration="off",
                server_metrics=False,
                html=False,  # nothing here reads report.html (~3 s of CPU a run)
            )
        )
    return json.loads((folder / "run" / "summary.json").read_text())


def test_a_client_behind_its_streams_is_invalid_and_an_idle_one_is_not(tmp_path: Path) -> None:
    flood = _run(tmp_path, "flood", vus=300, interval_us=1000)
    lag = flood["load"]["client_lag_p99_s"]
    assert lag is not None and lag > 0.1, flood["load"]
    assert flood["validity"]["thresholds"]["max_client_lag_p99_s"] == 0.05  # the default
    reasons = flood["validity"]["reasons"]
    assert not flood["validity"]["ok"] and any(
        r.startswith("the client fell behind its streams: client_lag p99 = ") for r in reasons
    ), reasons
    # Few streams: the loop waits for the server; judged against a limit a busy machine's
    # descheduling cannot reach, the run keeps its verdict and records what it saw.
    calm = _run(tmp_path, "calm", vus=20, interval_us=20_000, limit="500ms")
    calm_lag = calm["load"]["client_lag_p99_s"]
    assert calm_lag is not None and calm_lag < lag / 5, (calm_lag, lag)
    assert not any("client fell behind" in r for r in calm["validity"]["reasons"])
