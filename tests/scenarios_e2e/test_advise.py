"""`zqbench sweep --server-cmd` end to end: the bundled reference server launched once per
setting, the scenario run against each, and the recommendation from the measured figures."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema
import matplotlib.image
import pytest

from tests.core.conftest import REPO, write_scenario, zqbench
from zqbench.target.launched import accepts, host_port

# The sim engine's sleeps set the capacity, not this machine: 8 output tokens at 12 ms a
# decode step, about 100 ms a request, so about 10 req/s a slot. 60 req/s for 4 s is three
# times what 2 slots serve and half again what 4 serve: a zero-queue server refuses the rest
# at once, a FIFO server queues it (seconds of TTFT).
SIM = "sim:\n  prefill_base_ms: 1\n  decode_base_ms: 12\n  decode_per_seq_ms: 0\n"
SCENARIO = """
name = "cap-advice"
api = "openai"
[load]
executor = "constant-arrival-rate"
rate = 60
duration = "4s"
[request]
max_tokens = 8
prompt_tokens = 32
timeout = "20s"
[slo]
checks = ["ttft:p90<150ms", "time_to_reject:p90<50ms"]
[validity]
min_samples = 20
max_schedule_lag = "500ms"
min_achieved_ratio = 0.9
"""


@pytest.mark.slow
def test_the_advisor_recommends_the_zero_queue_setting_that_admits_most(tmp_path: Path) -> None:
    path = write_scenario(tmp_path, SCENARIO)
    (tmp_path / "sim.yaml").write_text(SIM)
    out = tmp_path / "advice"
    cmd = (
        f"{sys.executable} -m reference_server --engine sim --config {tmp_path / 'sim.yaml'} "
        "--port {port} --max-batch-size {slots} --scheduler {sched}"
    )
    res = zqbench(
        "sweep", str(path), "--server-cmd", cmd, "--server-param", "slots=2,4",
        "--server-param", "sched=zero-queue,fifo", "--no-html", "--out", str(out),
        timeout=240,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads((out / "advice.json").read_text())
    schema = json.loads((REPO / "docs" / "advice.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(report)
    by = {s["label"]: s for s in report["settings"]}
    assert list(by) == [
        "slots=2 sched=zero-queue",
        "slots=2 sched=fifo",
        "slots=4 sched=zero-queue",
        "slots=4 sched=fifo",
    ]
    zq2, fifo2, zq4, fifo4 = by.values()
    assert all(s["state"] == "ran" and s["sent"] >= 200 for s in by.values()), by
    # Zero-queue: nothing waits, what it cannot start is refused at once; 4 slots admit
    # about twice what 2 do.
    for s in (zq2, zq4):
        assert s["verdict"] == "pass" and s["queued"] == 0 and s["refused"] > 0, s
        assert s["ttft_p99"] < 0.15 and s["time_to_reject_p99"] < 0.05, s
        assert s["false_refusals"] == 0, s  # refused only with every slot busy
    assert zq4["admitted_per_s"] > 1.5 * zq2["admitted_per_s"], (zq2, zq4)
    assert zq2["refusal_share"] > zq4["refusal_share"] > 0.2, (zq2, zq4)
    # FIFO: everything admitted, most of it after a queue; TTFT p99 past a second.
    for s in (fifo2, fifo4):
        assert s["verdict"] == "fail" and s["refused"] == 0, s
        assert s["queued_share"] > 0.5 and s["ttft_p99"] > 1.0, s
    rec = report["recommendation"]
    assert rec["setting"] == 2 and rec["values"] == {"slots": "4", "sched": "zero-queue"}
    # Why, from the measured figures: its own, then its neighbours' queue.
    assert rec["why"].startswith(
        f"the highest admitted throughput whose SLOs hold: {zq4['admitted_per_s']:.3g} req/s "
        "admitted, none of them queued, "
    )
    for s in (fifo2, fifo4):
        assert (
            f"{s['label']} admitted {s['admitted_per_s']:.3g} req/s, let "
            f"{s['queued_share']:.0%} of them queue (TTFT p99 "
        ) in rec["why"]
    assert res.stdout.splitlines()[0] == f"recommended: slots=4 sched=zero-queue, {rec['why']}"
    lines = [x for x in res.stderr.splitlines() if x.startswith("setting ")]
    assert [x.split(":")[0] for x in lines] == [
        "setting  0 slots=2 sched=zero-queue",
        "setting  1 slots=2 sched=fifo",
        "setting  2 slots=4 sched=zero-queue",
        "setting  3 slots=4 sched=fifo",
    ]
    assert lines[1].startswith("setting  1 slots=2 sched=fifo: fail, ")
    md = (out / "advice.md").read_text()
    assert "| `slots=4 sched=zero-queue` (recommended) | pass |" in md
    assert matplotlib.image.imread(out / "plots" / "advice.png").shape[0] > 100
    for s in by.values():
        folder = out / s["out_dir"]
        summary = json.loads((folder / "summary.json").read_text())
        assert summary["verdict"] == s["verdict"] and summary["requests"]["sent"] == s["sent"]
        health = (folder / "server.log").read_text()
        assert health, "the server's own log"
        assert not accepts(*host_port(s["target"])), "each server stopped, its port free"


def test_settings_whose_server_exits_are_recorded_and_none_serving_is_exit_3(
    tmp_path: Path,
) -> None:
    """A server that rejects its flags: each setting's log tail kept, the sweep goes on, and
    with no setting served the command exits 3 after writing the report."""
    code = "import sys; print('error: --max-num-queued-reqs {cap} < 1 on port {port}'); sys.exit(2)"
    out = tmp_path / "advice"
    res = zqbench(
        "sweep", "smoke", "--server-cmd", f"{sys.executable} -c \"{code}\"",
        "--server-param", "cap=0,-1", "--out", str(out), timeout=60,
    )  # fmt: skip
    assert res.returncode == 3, res.stdout + res.stderr
    assert res.stderr.splitlines()[-1] == (
        f"zqbench: error: no recommendation: no setting's server came to serve; see {out}"
    )
    report = json.loads((out / "advice.json").read_text())
    assert [s["state"] for s in report["settings"]] == ["exited", "exited"]
    assert report["recommendation"] is None
    for s, cap in zip(report["settings"], ("0", "-1"), strict=True):
        port = host_port(s["target"])[1]
        assert s["log_tail"] == [f"error: --max-num-queued-reqs {cap} < 1 on port {port}"]
        assert s["error"].startswith("the server command exited with code 2 before ")
        assert (out / s["out_dir"] / "server.log").is_file()
    assert "setting  0 cap=0: exited: the server command exited with code 2" in res.stderr
