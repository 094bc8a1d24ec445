"""zqbench against vLLM's zero-queue mode: admission control (`--max-num-queued-reqs`, vLLM
0.29 and later) capped at the slots (`--max-num-seqs`), so that nothing can wait.

Proven against vLLM's own counters: every refusal zqbench saw is one vLLM counted in
`vllm:admission_rejections_total`, admitted requests are served with none queued, and vLLM's
waiting gauge stays at 0 (#40 item 1).
"""

from __future__ import annotations

import json
import os
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.vllm.conftest import zqbench_pinned
from tests.vllm.target import VllmServer, free_port, start_vllm, vllm_available

pytestmark = pytest.mark.slow

SLOTS = 4
COUNTER = re.compile(r"^vllm:admission_rejections_total\{[^}]*\} (\S+)$", re.M)


@pytest.fixture(scope="module")
def capped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    reason = vllm_available()
    if reason is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI must run the vLLM end-to-end tests: {reason}")
        pytest.skip(reason)
    log = tmp_path_factory.mktemp("vllm-capped") / "vllm.log"
    cap = ("--max-num-seqs", str(SLOTS), "--max-num-queued-reqs", str(SLOTS))
    server = start_vllm(free_port(), log, extra_args=cap)
    try:
        yield server
    finally:
        server.stop()


def _rejections(server: VllmServer) -> float:
    """vLLM's admission rejections so far, every reason summed."""
    with urllib.request.urlopen(f"{server.base_url}/metrics", timeout=10) as r:
        text = r.read().decode()
    return sum(float(v) for v in COUNTER.findall(text))


def test_a_burst_on_vllms_zero_queue_mode_refuses_what_vllm_counts_and_queues_none(
    capped: VllmServer, tmp_path: Path
) -> None:
    before = _rejections(capped)
    out = tmp_path / "burst"
    result = zqbench_pinned(
        "run", "burst", "--target", capped.base_url, "--rate-scale", "0.04",
        "--duration-scale", "0.5", "--max-tokens", "32", "--max-schedule-lag", "250ms",
        "--out", str(out),
    )  # fmt: skip
    grown = _rejections(capped) - before
    assert result.returncode in (0, 1), result.stderr  # an SLO verdict, not invalid
    summary = json.loads((out / "summary.json").read_text())
    counts = summary["outcomes"]["counts"]
    # Past 4 in flight vLLM refuses at once: the pulse (40 req/s against about 8 served a
    # second here) must have met the cap. 32 tokens, not 16: on one core vLLM's steps slow
    # while its API server refuses, so a TTFT under load is 1.5-4 times the one at rest; the
    # longer hold widens the "queued" bound (half the hold, classify.py) above that (TTFT p99
    # 60-70 ms against a bound of 210-220 ms measured) where 16 tokens left it at 1.3 times,
    # and a busy CI machine crossed it (11 of 252 judged queued, vLLM's gauge at 0).
    assert grown > 20, (grown, counts)
    # Each refusal vLLM counted is one zqbench saw: a 503, or a 200 stream with the error
    # inside (vLLM's race between its two admission checks, the failed count here).
    seen = counts["refused_fast"] + counts["refused_slow"] + counts["failed"]
    assert abs(seen - grown) <= 0.01 * grown, (seen, grown, summary["status_codes"])
    assert summary["status_codes"].get("503", 0) >= 0.9 * grown, summary["status_codes"]
    # The run's own scrapes of the counter say the same, by reason, beside the server queue.
    counted = summary["server_queue"]["rejections"]
    assert counted["metric"] == "vllm:admission_rejections_total", counted
    assert abs(counted["total"] - grown) <= 0.01 * grown, (counted, grown)
    assert counted["by_reason"]["max_num_queued_reqs"] == counted["total"], counted
    assert f"refused, by its own count | {round(counted['total'])} (max_num_queued_reqs" in (
        out / "summary.md"
    ).read_text()
    # Nothing waits: admitted requests are served, and vLLM's own gauge never saw a queue.
    assert counts["queued"] == 0 and counts["served"] > 0, counts
    waiting = summary["server_queue"]["waiting"]
    assert waiting["metric"] == "vllm:num_requests_waiting" and waiting["max"] == 0, waiting
