"""Who may take part in a distributed run (#25 items 2-3): a shared secret both sides prove
and never send, every frame checked before it is acted on, and a stranger's samples never
merged. The processes are real: a master, a hostile peer speaking ZeroMQ directly
(rogue_worker.py), a worker with the wrong secret and one with the right one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.core.conftest import REPO, write_scenario, zqbench_here
from tests.core.test_distributed import SCENARIO, SECRET_ENV, _free_port, _start
from zqbench.distributed import auth
from zqbench.distributed import protocol as p
from zqbench.distributed.guard import _parse
from zqbench.errors import EXIT_OK, EXIT_TARGET, EXIT_USAGE, OptionError
from zqbench.pipeline.options import RunOptions
from zqbench.samples.live_counts import N_BINS
from zqbench.target.embedded import EmbeddedServer

SECRET = SECRET_ENV["ZQBENCH_SECRET"].encode()
NODE = "host_0123"


# ------------------------------------------------------------------ the handshake's parts
def test_a_proof_answers_one_challenge_for_one_node_and_one_role() -> None:
    nw, nm = auth.new_nonce(), auth.new_nonce()
    shown = auth.proof(SECRET, "worker", NODE, nm, nw)
    assert auth.proof_ok(SECRET, "worker", NODE, nm, nw, shown)
    assert not auth.proof_ok(b"another secret 0123", "worker", NODE, nm, nw, shown)
    assert not auth.proof_ok(SECRET, "master", NODE, nm, nw, shown)  # reflected back
    assert not auth.proof_ok(SECRET, "worker", "host_other", nm, nw, shown)
    assert not auth.proof_ok(SECRET, "worker", NODE, auth.new_nonce(), nw, shown)  # replayed
    assert not auth.proof_ok(SECRET, "worker", NODE, nm, nw, shown.hex())  # not bytes
    assert SECRET not in shown and len(shown) == 32


def test_a_sealed_message_opens_once_unchanged_and_only_as_its_kind() -> None:
    nm, nw = auth.new_nonce(), auth.new_nonce()
    worker, master = auth.Channel(SECRET, NODE, nm, nw), auth.Channel(SECRET, NODE, nm, nw)
    first = worker.seal(p.SAMPLES, {"batch": b"rows"})
    second = worker.seal(p.DONE, {"sent": 3})
    assert master.open(p.SAMPLES, first) == (True, {"batch": b"rows"})
    assert master.open(p.SAMPLES, first) == (False, None)  # a replay
    assert master.open(p.SAMPLES, second) == (False, None)  # a DONE passed off as SAMPLES
    changed = {**second, "b": second["b"].replace(b"\x03", b"\x09")}
    assert master.open(p.DONE, changed) == (False, None)
    assert master.open(p.DONE, {"sent": 3}) == (False, None)  # unsealed
    other = auth.Channel(SECRET, "host_other", nm, nw)  # another session's key
    assert other.open(p.DONE, second) == (False, None)
    assert master.open(p.DONE, second) == (True, {"sent": 3})


def test_a_frame_is_checked_before_anything_reads_it() -> None:
    import msgpack

    def message(kind: str, data: object, node: str) -> tuple:  # as Locust's Message is built
        return kind, data, node

    def frames(kind: object, data: object, node: object, identity: bytes = b"w1") -> list:
        return [identity, msgpack.packb((kind, data, node))]

    ok = _parse(frames("heartbeat", {"state": "ready"}, "w1"), message)
    assert ok == ("heartbeat", {"state": "ready"}, "w1")
    for bad, why in (
        ([b"w1", b"\xc1"], "not msgpack (FormatError)"),
        ([b"w1"], "1 frames, not 2"),
        ([b"w1", msgpack.packb(["a", 1])], "not a (type, data, node_id) triple"),
        ([b"w1", msgpack.packb(7)], "not a (type, data, node_id) triple"),
        (frames(3, None, "w1"), "type and node_id must be strings"),
        (frames("zq_samples", {}, "w2"), "node_id is not the identity it arrived under"),
        ([b"\xff", msgpack.packb(("quit", None, "w1"))], "not msgpack (UnicodeDecodeError)"),
    ):
        with pytest.raises(ValueError) as err:
            _parse(bad, message)
        assert str(err.value) == why


def test_a_workers_progress_must_have_its_fields_and_types() -> None:
    good = {
        "sent": 3, "due": 3, "done": 2, "ok": 2, "inflight": 1, "stage": 0,
        "status": {"200": 2}, "recent_ms": [1.5, 2.0], "worker": 1, "lag_p99_ms": None,
        "counts": None,
    }  # fmt: skip
    assert p.progress_from_wire(good).recent_ms == (1.5, 2.0)
    bins = [0] * N_BINS
    counts = {
        "requests": [[0, "short", "200", "ok", 2]],
        "histograms": [["ttft", 0, "short", bins, 0.0]],
    }
    assert p.progress_from_wire({**good, "counts": counts}).counts is not None
    for bad in (
        [1, 2],
        {**good, "extra": 1},
        {**good, "sent": "3"},
        {**good, "sent": True},
        {**good, "status": [["200", 2]]},
        {**good, "recent_ms": [float("inf")]},
        {**good, "sent": 2**63},
        {**good, "recent_ms": [0.0] * (p.MAX_RECENT + 1)},
        {**good, "lag_p99_ms": "1"},
        {**good, "counts": {"requests": []}},
        {**good, "counts": {**counts, "requests": [[0, "short", "200", "served at once", 2]]}},
        {**good, "counts": {**counts, "requests": [[0, "x" * 129, "200", "ok", 2]]}},
        {**good, "counts": {**counts, "requests": [[0, "short", "200", "ok", -1]]}},
        {**good, "counts": {**counts, "requests": [[0, "short", "200", "ok", 1]] * 16385}},
        {**good, "counts": {**counts, "histograms": [["ttft", 0, "short", bins[1:], 0.0]]}},
        {**good, "counts": {**counts, "histograms": [["bytes", 0, "short", bins, 0.0]]}},
        {**good, "counts": {**counts, "histograms": [["ttft", 0, "short", bins, float("nan")]]}},
    ):
        with pytest.raises(ValueError):
            p.progress_from_wire(bad)


def test_a_distributed_run_needs_the_secret_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ZQBENCH_SECRET", raising=False)
    how = (
        "export ZQBENCH_SECRET=$(openssl rand -hex 32) with the same value on the master and"
        " every worker"
    )
    with pytest.raises(OptionError):
        RunOptions.of(scenario="smoke", distributed=True)  # the library refuses it too
    monkeypatch.setenv("ZQ_SHORT", "0123456789")
    result = zqbench_here("worker", "--master", "127.0.0.1:1", "--secret-env", "ZQ_SHORT")
    assert result.returncode == EXIT_USAGE
    assert result.stderr.strip() == (
        "zqbench: error: --secret-env ZQ_SHORT: the secret is 10 characters; use at least 16:"
        f" {how}"
    )
    result = zqbench_here("run", "smoke", "--distributed")
    assert result.returncode == EXIT_USAGE
    assert result.stderr.strip() == (
        "zqbench: error: --secret-env ZQBENCH_SECRET: a distributed run needs a shared secret:"
        f" {how}"
    )


# ------------------------------------------------------------------ real processes
pytestmark_slow = pytest.mark.slow


def _rogue(port: int) -> list[str]:
    done = subprocess.run(
        [sys.executable, str(REPO / "tests" / "core" / "rogue_worker.py"), f"127.0.0.1:{port}"],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    return done.stdout.splitlines()


def _master(
    tmp_path: Path,
    server: EmbeddedServer,
    port: int,
    wait_s: str,
    *,
    expect: str = "1",
    duration: str = "2s",
) -> subprocess.Popen:
    scenario = write_scenario(tmp_path, SCENARIO.format(duration=duration))
    return _start(
        "run", str(scenario), "--target", server.base_url, "--calibration", "off",
        "--seed", "7", "--out", str(tmp_path / "run"), "-q", "--distributed",
        "--expect-workers", expect, "--master-bind", f"127.0.0.1:{port}",
        "--worker-wait", wait_s, log=tmp_path / "master.log",
    )  # fmt: skip


def _worker(tmp_path: Path, port: int, name: str, env: dict[str, str]) -> subprocess.Popen:
    log = tmp_path / f"{name}.log"
    with log.open("wb") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "zqbench", "worker", "--master", f"127.0.0.1:{port}",
             "--out", str(tmp_path / "w"), "--once"],
            cwd=REPO, stdout=sink, stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(REPO), **env},
        )  # fmt: skip


@pytestmark_slow
def test_a_rogue_is_never_merged_and_the_real_worker_still_runs(
    tmp_path: Path, ref_server: EmbeddedServer
) -> None:
    port = _free_port()
    master = _master(tmp_path, ref_server, port, "60")
    procs = [master]
    try:
        said = _rogue(port)
        assert said == [
            "ack", "challenged", "refused: its proof of the shared secret is wrong", "done",
        ]  # fmt: skip
        # A real worker whose secret differs: the master's proof fails, it leaves at once.
        wrong = _worker(tmp_path, port, "wrong", {"ZQBENCH_SECRET": "another-secret-0123456"})
        procs.append(wrong)
        assert wrong.wait(timeout=60) == EXIT_USAGE
        right = _worker(tmp_path, port, "right", SECRET_ENV)
        procs.append(right)
        assert master.wait(timeout=120) == EXIT_OK, (tmp_path / "master.log").read_text()
        assert right.wait(timeout=30) == EXIT_OK
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
    wrong_log = (tmp_path / "wrong.log").read_text()
    assert f"the master at 127.0.0.1:{port} did not prove the shared secret" in wrong_log
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    ids = pq.read_table(tmp_path / "run" / "samples.parquet").column("request_id").to_pylist()
    assert len(ids) == summary["load"]["offered_requests"] > 0
    assert max(ids) < 10**9  # none of the rogue's fabricated rows
    workers = summary["distributed"]["workers"]
    assert [(w["state"], w["samples_received"]) for w in workers] == [("done", len(ids))]
    rejected = summary["distributed"]["rejected_messages"]
    # (A "bad seal" needs a session, which only a holder of the secret gets: the Channel
    # test above covers it.)
    assert set(rejected) == {
        "malformed frame", "unexpected message", "malformed content", "not proven",
        "wrong proof", "too many joins",
    }  # fmt: skip
    assert rejected["malformed frame"] == 3 and rejected["wrong proof"] == 1
    assert rejected["too many joins"] >= 100 - 64
    log = (tmp_path / "master.log").read_text()
    assert "Traceback" not in log and "Uncaught exception" not in log
    assert "zqbench master: dropped a message from rogue_" in log


@pytestmark_slow
def test_a_rogue_alone_makes_no_run(tmp_path: Path, ref_server: EmbeddedServer) -> None:
    port = _free_port()
    master = _master(tmp_path, ref_server, port, "4")
    try:
        _rogue(port)
        assert master.wait(timeout=60) == EXIT_TARGET
    finally:
        if master.poll() is None:
            master.kill()
        master.wait(timeout=10)
    log = (tmp_path / "master.log").read_text()
    assert f"zqbench: error: 0 of 1 workers joined the master at 127.0.0.1:{port}" in log
    assert not (tmp_path / "run").exists()  # nothing was written, no verdict given
