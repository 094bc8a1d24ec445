"""A server that closes after every streamed response despite keep-alive (llama.cpp's): the
request written as the FIN lands is sent once more on a new connection, its sample says
`resent`, it is no error, and summary.json, summary.md and report.html say so in one
sentence, with the count."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.core.conftest import write_scenario
from tests.servers import ProgrammedServer
from zqbench.option_values import H1Client
from zqbench.pipeline.run import RunOptions, run_scenario

pytestmark = pytest.mark.slow

SCENARIO = """
name = "resent"
api = "anthropic"
[load]
executor = "constant-vus"
vus = 1
duration = "1s"
[request]
max_tokens = 2
prompt_tokens = 8
[validity]
min_samples = 5
[outcomes]
at_rest_probes = 0
"""

PROGRAM = "x-program: /anthropic?n=2&every=0&first=0&close_after=1"


@pytest.mark.parametrize("client", [H1Client.aiohttp, H1Client.raw])
def test_resent_requests_are_no_errors_and_the_summary_says_so(
    tmp_path: Path, client: H1Client
) -> None:
    path = write_scenario(tmp_path, SCENARIO)
    with ProgrammedServer() as server:
        result = run_scenario(
            RunOptions.of(
                scenario=str(path),
                target=server.url,
                model="m",
                headers=(PROGRAM,),
                out=tmp_path / "run",
                calibration="off",
                h1_client=client,
            )
        )
        truth = server.all_truth()
    table = pq.read_table(result.out_dir / "samples.parquet").to_pandas()
    assert len(table) >= 5
    assert table["error"].isna().all(), table["error"].value_counts()  # no transport:reset
    assert table["resent"].dtype == bool
    resent = int(table["resent"].sum())
    assert resent >= 1
    # Every request the server read it answered in full (a resent one was never read on
    # the closed connection; tests/transport/test_resend.py counts them one by one).
    assert {t["outcome"] for t in truth["truth"].values()} == {"ok"}
    assert truth["requests"] >= len(table)
    summary = result.summary
    assert summary.resent is not None and summary.resent.count == resent
    assert "zqbench stopped reusing connections" in summary.resent.why
    sentence = (
        f"{resent:,} request{'s were' if resent != 1 else ' was'} sent again on a new connection"
    )
    md = (result.out_dir / "summary.md").read_text()
    assert sentence in md and "never counted as the server's error" in md
    assert sentence in (result.out_dir / "report.html").read_text()
