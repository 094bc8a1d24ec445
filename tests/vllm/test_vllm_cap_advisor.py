"""The admission-cap advisor on a real vLLM (#40 item 5): `zqbench sweep --server-cmd` launches
vLLM's CPU build three times, `--max-num-seqs 4` with `--max-num-queued-reqs` 2, 4 and 32
(the cap counts requests running and waiting alike), runs one overload against each, and
recommends 4: below the slots vLLM refuses work it could have started; far above them a
queue forms and TTFT grows with it.

About 2.5 minutes: each vLLM start costs 20-45 s on one core, each run 9 s of load.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.servers.process_group import need_engine
from tests.vllm.conftest import zqbench_pinned
from tests.vllm.target import SERVE_SH, vllm_available

pytestmark = [pytest.mark.slow, pytest.mark.timeout(720)]

# At the scales below: 80 req/s for 9 s, 16 output tokens. vLLM admits 13-19 a second with 4
# slots on a slow day (7.95 and 11.5 req/s with cap 2, 12.9 and 18.9 with cap 4) and 33-39 on
# a fast one (2026-12-07: 16.7-18 with cap 2, 33.4-37.8 with cap 4, 38.9-39.4 with cap 16).
# Offered 40 req/s, a fast day's cap 16 barely queued (14% and 41% of the admitted, and its
# SLO passed once): the offer must be well past the capacity of either day. ttft:p90 decides
# with the few hundred requests a setting gets; a queue of 28 (cap 32) holds each admitted
# request 0.7 s on a fast day, 1.5-2 s on a slow one.
SCENARIO = """
name = "cap-advice"
api = "openai"
[load]
executor = "constant-arrival-rate"
rate = 200
duration = "60s"
[request]
max_tokens = 256
prompt_tokens = 32
timeout = "60s"
[slo]
checks = ["ttft:p90<250ms"]
[validity]
min_samples = 50
"""


def test_the_advisor_recommends_the_cap_at_vllms_slots(tmp_path: Path) -> None:
    need_engine("vLLM", vllm_available())
    path = tmp_path / "cap.toml"
    path.write_text(SCENARIO)
    out = tmp_path / "advice"
    # Its dev mode serves GET /server_info, where zqbench reads the slots it was given: what
    # a refusal made with one free is judged by.
    cmd = (
        f"env VLLM_SERVER_DEV_MODE=1 bash {SERVE_SH} {{port}} --max-num-seqs 4 "
        "--max-num-queued-reqs {cap}"
    )
    res = zqbench_pinned(
        "sweep", str(path), "--server-cmd", cmd, "--server-param", "cap=2,4,32",
        "--rate-scale", "0.4", "--duration-scale", "0.15", "--max-tokens", "16",
        "--max-schedule-lag", "250ms", "--no-html", "--out", str(out),
        timeout=660,
    )  # fmt: skip
    print(res.stderr)  # each setting's line, for the record
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads((out / "advice.json").read_text())
    low, at, high = report["settings"]
    assert [s["label"] for s in (low, at, high)] == ["cap=2", "cap=4", "cap=32"]
    assert all(s["state"] == "ran" and 20 < s["ready_s"] < 180 for s in (low, at, high)), report
    rec = report["recommendation"]
    assert rec["label"] == "cap=4", report["outcome"]
    # At the slots: hardly anything waits, and it passes. Without timing headers "queued" is
    # read from TTFT against twice the at-rest TTFT, and on one core the API server's work for
    # ~60 refusals a second can stretch an admitted request's TTFT that far: CI saw 0%, 1% and
    # 5.2% (TTFT p99 278 ms) at cap 4, against 99% at cap 32.
    assert at["verdict"] == "pass" and at["queued_share"] < 0.15, at
    assert at["queued_share"] < high["queued_share"] / 4, (at, high)
    # Below them: refusals with a slot free. Not fewer admitted: on one CPU core vLLM's
    # throughput barely grows from 2 slots to 4 (the CI of 10b13fb: 23% against 26% of the
    # requests admitted), so that is the engine's figure, not the advisor's judgement.
    # vLLM's dev mode states its 4 slots (/server_info): cap 2 refused with two of them free.
    basis = json.loads((out / low["out_dir"] / "summary.json").read_text())["outcomes"]["basis"]
    assert basis["capacity"]["value"] == 4 and basis["capacity"]["source"] == "stated", basis
    assert low["false_refusals"] > 0, low
    assert at["false_refusals"] == 0, at
    # Its clause names the refusals; a cap of 2 may also let a few wait (1% in one CI run),
    # and then the clause says that too.
    (low_clause,) = [c for c in rec["why"].split("; ") if c.startswith("cap=2 ")]
    assert low_clause.startswith(f"cap=2 admitted {low['admitted_per_s']:.3g} req/s"), low_clause
    assert f"refused {low['false_refusals']:,} requests while a slot was free" in low_clause
    assert ("queue (TTFT p99" in low_clause) == bool(low["queued"]), (low_clause, low)
    # Far above them: a queue, and TTFT with it (it admitted about as much: 15.9 and 17.8 req/s
    # measured against 12.9 and 18.9 at the slots), so its SLO fails.
    assert high["queued_share"] > 0.5, high
    assert high["verdict"] == "fail" and high["ttft_p99"] > 3 * at["ttft_p99"], (high, at)
    # Its sentence names what it lost: a queue (and the refusals, when it refused more).
    assert f"cap=32 admitted {high['admitted_per_s']:.3g} req/s, " in rec["why"], rec["why"]
    assert f"let {high['queued_share']:.0%} of them queue" in rec["why"], rec["why"]
    assert rec["why"].endswith("and failed ttft:p90<250ms."), rec["why"]
    assert res.stdout.splitlines()[0] == f"recommended: cap=4, {rec['why']}"
