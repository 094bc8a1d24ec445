"""`cold_connections = true`: every request pays for a connection of its own."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.core.conftest import write_scenario
from tests.servers import ProgrammedServer
from zqbench.errors import OptionError
from zqbench.pipeline.run import RunOptions, run_scenario

SCENARIO = """
name = "cold"
api = "anthropic"
[load]
executor = "constant-arrival-rate"
rate = 20
duration = "1s"
[request]
max_tokens = 4
prompt_tokens = 8
cold_connections = {cold}
"""


def _load_conns(server: ProgrammedServer) -> list[int]:
    """The connection of each load request (set-up requests, such as /health, left out)."""
    truth = server.all_truth()["truth"]
    return [t["conn"] for key, t in truth.items() if key.startswith("zq-")]


def _run(tmp_path: Path, server: ProgrammedServer, *, cold: bool, h1_client: str) -> list:
    scenario = write_scenario(tmp_path, SCENARIO.format(cold=str(cold).lower()))
    result = run_scenario(
        RunOptions.of(
            scenario=str(scenario),
            target=server.url,
            model="m",
            headers=("x-program: /anthropic?n=4&every=1&first=2&head=1",),
            out=tmp_path / f"run-{cold}-{h1_client}",
            calibration="off",
            h1_client=h1_client,
            html=False,  # nothing here reads report.html (~3 s of CPU a run)
        )
    )
    return pq.read_table(result.out_dir / "samples.parquet").to_pylist()


@pytest.mark.slow
@pytest.mark.parametrize("h1_client", ["raw", "aiohttp"])
def test_each_request_opens_its_own_connection(tmp_path: Path, h1_client: str) -> None:
    with ProgrammedServer() as server:
        rows = _run(tmp_path, server, cold=True, h1_client=h1_client)
        conns = _load_conns(server)
    assert len(rows) == 20 and all(r["error"] is None for r in rows)
    assert len(conns) == 20
    assert len(set(conns)) == 20  # none reused


@pytest.mark.slow
def test_warm_connections_are_reused_by_default(tmp_path: Path) -> None:
    with ProgrammedServer() as server:
        rows = _run(tmp_path, server, cold=False, h1_client="raw")
        conns = _load_conns(server)
    assert len(rows) == 20 and len(conns) == 20
    assert len(set(conns)) < 20


def test_cold_connections_refuse_http2(tmp_path: Path) -> None:
    scenario = write_scenario(tmp_path, SCENARIO.format(cold="true"))
    with pytest.raises(OptionError) as err:
        run_scenario(
            RunOptions.of(
                scenario=str(scenario), target="http://127.0.0.1:9", model="m", http2=True
            )
        )
    assert str(err.value) == (
        "http2: the scenario sets cold_connections = true, a new connection per request; "
        "HTTP/2 shares one: drop --http2"
    )
    assert not list(tmp_path.glob("run*"))
