"""Real packet loss end to end: reference server in one namespace, zqbench in another.

The nftables rules go into the client namespace only (never the host's ruleset), and both
namespaces are deleted afterwards, rules and all, even when a test fails.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from tests.impair.netns import (
    NetnsPair,
    netns_pair,
    reference_server,
    require_root_and_nft,
    stop_process,
)
from zqbench.impair import packet_loss_analysis
from zqbench.load.spans import StageInfo

pytestmark = [pytest.mark.root, pytest.mark.slow]

SCALE = 0.25  # 5 s per stage at 20 req/s: 100 requests each
RTO_MIN_S = 0.2  # Linux's minimum TCP retransmission timeout


@pytest.fixture
def netns() -> Iterator[NetnsPair]:
    require_root_and_nft()
    with netns_pair() as pair:
        yield pair


def _driver(pair: NetnsPair, url: str, out: Path, log: Path):
    args = [sys.executable, "-m", "tests.impair.driver", "packet-loss", url, str(out), str(SCALE)]
    return pair.popen(pair.client, args, log)


def _wait(proc, log: Path, timeout: float = 90) -> int:
    try:
        return proc.wait(timeout)
    except Exception:
        stop_process(proc)
        raise AssertionError(f"zqbench did not finish: {log.read_text()[-2000:]}") from None


def test_loss_stage_shows_retransmission_delays_then_recovers(
    netns: NetnsPair, tmp_path: Path
) -> None:
    """P99 rises by at least the minimum RTO under 10 % loss, recovers, and no rule is left;
    the run's summary.json, summary.md and report.html carry that analysis."""
    out, log = tmp_path / "run", tmp_path / "zqbench.log"
    with reference_server(netns, tmp_path / "server.log") as url:
        code = _wait(_driver(netns, url, out, log), log)
    assert code in (0, 1), log.read_text()[-3000:]
    assert "zqbench" not in netns.ruleset()

    summary = json.loads((out / "summary.json").read_text())
    env = summary["environment"]["packet-loss"]
    assert env["dropped_packets"] > 0
    [window] = env["windows"]
    assert window["applied_s"] == pytest.approx(5.0, abs=0.3)
    assert window["removed_s"] == pytest.approx(10.0, abs=0.3)

    # The run's own analysis, in summary.json: the hook's windows, the same numbers as the
    # analysis of the saved samples.
    result = summary["packet_loss"]
    print(json.dumps(result, indent=1))
    assert result["windows"] == env["windows"]
    assert result["dropped_packets"] == env["dropped_packets"]
    assert result["loss"] == 0.1 and result["impaired_stages"] == [1]
    samples = pd.read_parquet(out / "samples.parquet")
    stages = [StageInfo(s["name"], s["start"], s["end"]) for s in summary["stages"]]
    again = packet_loss_analysis(samples, stages, [1])
    assert {k: result[k] for k in again} == again
    assert result["loss_p99_s"] - result["baseline_p99_s"] >= RTO_MIN_S
    assert result["recovery"]["recovered"] is True
    assert 0.0 <= result["recovery"]["recovery_s"] < 3.0

    page = (out / "report.html").read_text()
    assert '<section id="packet-loss">' in page and 'id="plot-packet_loss"' in page
    assert f"<tr><td>dropped packets</td><td>{env['dropped_packets']:,}</td></tr>" in page
    assert (out / "plots" / "packet_loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "### Packet loss" in (out / "summary.md").read_text()


def test_sigterm_during_the_loss_stage_leaves_no_rules(netns: NetnsPair, tmp_path: Path) -> None:
    """SIGTERM while the rules are in place: the run stops gracefully and removes them."""
    out, log = tmp_path / "run", tmp_path / "zqbench.log"
    with reference_server(netns, tmp_path / "server.log") as url:
        proc = _driver(netns, url, out, log)
        try:
            deadline = time.monotonic() + 30
            while "zqbench run=" not in netns.ruleset():  # bounded: 30 s
                assert proc.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, "the loss rules never appeared"
                time.sleep(0.2)
            proc.send_signal(signal.SIGTERM)
            code = _wait(proc, log, timeout=60)
        finally:
            stop_process(proc)
    assert code == 130, log.read_text()[-3000:]
    assert "zqbench" not in netns.ruleset()
