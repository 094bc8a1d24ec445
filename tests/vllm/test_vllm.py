"""zqbench against a real vLLM server (CPU build, tiny random Llama, 8 slots, one core).

vLLM is the server most users benchmark, and it queues: past its 8 slots a request waits in
the engine's queue, with its response headers already sent. These tests drive the CLI as a
user would, with `--target` alone, and check that zqbench says so: a valid FAIL with the
queue shown from vLLM's own metrics, conform's zero-queue group failed for that reason,
probe's TTFT, and a wrong model refused in vLLM's words before any load. The tests of what
vLLM serves (each API's tokens, a dataset's lengths, its prefix cache, a trace, sessions)
make the same runs without report.html (conftest.run_pinned).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.conform.util import judged_on_behaviour
from tests.vllm.conftest import run_pinned, zqbench_pinned
from tests.vllm.target import VllmServer

pytestmark = pytest.mark.slow

MAX_TOKENS = 16  # scenarios/smoke.toml's max_tokens


# These tests are about what vLLM serves and how zqbench reads it, not about the generator's
# timing (benchmarks/ measures that). zqbench shares core 1 with the other pytest-xdist
# worker, so the default lag bound (p99 10 ms) was once missed at 11.5 ms in a full run, and
# 50 ms at 98 ms: one send of 69 descheduled for 0.1 s (with under 100 samples the p99 is
# the slowest). The bound leaves room for that, and a run past it still says why.
LAG_OK_S = 0.25
LAG_OK = ("--max-schedule-lag", f"{LAG_OK_S * 1e3:g}ms")


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


def test_burst_with_target_alone_is_a_valid_fail_that_shows_the_queue(
    vllm: VllmServer, tmp_path: Path, attempt_seed: int
) -> None:
    out = tmp_path / "burst"
    args = ["run", "burst", "--target", vllm.base_url, "--duration-scale", "0.3"]
    args += ["--seed", str(attempt_seed)]  # cold prompts, on a rerun too
    args += ["--rate-scale", "0.04", "--graceful-stop", "5s", *LAG_OK]  # not 30 s of queue
    result = zqbench_pinned(*args, "-q", "--out", str(out))
    summary = _json(out / "summary.json")
    assert result.returncode == 1, summary["validity"]  # FAIL: a queue, measured validly
    assert summary["verdict"] == "fail" and summary["validity"]["ok"]
    assert summary["validity"]["thresholds"]["max_schedule_lag_p99_s"] == LAG_OK_S  # the flag's
    resolution = summary["target_resolution"]
    assert (resolution["model"], resolution["model_source"]) == ("tiny", "discovered")
    assert resolution["models"] == ["tiny"]
    assert {p["api"]: p["status"] for p in resolution["probes"]} == {
        "anthropic": 200,
        "openai": 200,
    }
    queue = summary["server_queue"]
    assert queue["engine"] == "vllm" and queue["found_by"] == "discovery"
    assert queue["waiting"]["metric"] == "vllm:num_requests_waiting"
    assert queue["waiting"]["max"] > 0  # requests waited in vLLM's queue
    assert queue["running"]["max"] <= 8  # --max-num-seqs 8
    # Synthetic prompts stay cold: each starts with its own request id (#26).
    assert summary["prefix_cache"]["server"]["hit_rate"] < 0.05, summary["prefix_cache"]
    assert queue["queue_time"]["count"] > 0 and queue["queue_time"]["p99"] > 0
    waiting_peak = f"{queue['waiting']['max']:g}"
    markdown = (out / "summary.md").read_text()
    html = (out / "report.html").read_text()
    for text in (markdown, html):
        assert "Server queue" in text and "vllm:num_requests_waiting" in text
        assert waiting_peak in text
    assert (out / "plots" / "server_queue.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    _outcomes_follow_vllms_waiting_gauge(summary, out)


def _outcomes_follow_vllms_waiting_gauge(summary: dict, out: Path) -> None:
    """vLLM sends no timing headers: each admitted request is judged by its TTFT against the
    at-rest probes' (#21). `queued` must sit where vLLM's own num_requests_waiting was above
    0. The gauge is known at a request's send when the scrapes on either side of it agree
    (both saw a waiting request, or neither did); where they differ the queue filled or
    drained between them, and the gauge cannot say which side the send fell on. Counting
    either scrape as the truth failed one CI run: 8 of 77 admitted requests were served
    beside a scrape that saw one waiting.

    The two directions differ. A request called queued where nothing waited would be
    zqbench's error: at most one in ten (or one) of the known. A request sent while others
    waited is served when a slot freed within the bound (its TTFT says it did not wait a
    service time), so the gauge only asks that most of them were queued: agreement overall
    at 90% failed a CI run at 16 of 18 on exactly those (2 served, 6 queued, waiting > 0)."""
    outcomes = summary["outcomes"]
    assert "unavailable" not in outcomes["basis"]["at_rest"], outcomes["basis"]
    assert outcomes["evidence"]["server_queue"] == 0
    assert (
        outcomes["evidence"]["ttft"] == outcomes["counts"]["served"] + outcomes["counts"]["queued"]
    )
    assert outcomes["counts"]["queued"] > 0, outcomes["counts"]
    series = summary["server_queue"]["over_time"]
    samples = pq.read_table(out / "samples.parquet").to_pandas()
    admitted = samples[samples["outcome"].isin(["served", "queued"])]
    table = {(q, w): 0 for q in (True, False) for w in (True, False, None)}
    for t_send, outcome in zip(admitted["t_send"] / 1e9, admitted["outcome"], strict=True):
        before = [w for t, w in zip(series["t"], series["waiting"], strict=True) if t <= t_send]
        after = [w for t, w in zip(series["t"], series["waiting"], strict=True) if t > t_send]
        near = {w > 0 for w in (before[-1:] + after[:1]) if w is not None}
        waiting = near.pop() if len(near) == 1 else None
        table[(outcome == "queued", waiting)] += 1
    known = sum(n for (_, w), n in table.items() if w is not None)
    queued_known = table[(True, True)] + table[(True, False)]
    waiting_known = table[(True, True)] + table[(False, True)]
    shown = {
        f"{'queued' if q else 'served'}, waiting {({True: '>0', False: '=0'}).get(w, 'edge')}": n
        for (q, w), n in table.items()
    }
    print(f"outcomes against vllm:num_requests_waiting: {shown}")
    assert known >= len(admitted) / 2, shown
    assert queued_known > 0, shown
    assert table[(True, False)] <= max(1, 0.1 * queued_known), shown  # no queue, not queued
    # A queue: most were queued. The scrapes (1 s apart) may see no send beside a waiting
    # request at all (a full run: 0 known-waiting of 18 admitted), so only where they did.
    assert table[(True, True)] >= waiting_known / 2, shown


def test_conform_fails_the_zero_queue_group_for_the_queue(vllm: VllmServer, tmp_path: Path) -> None:
    out = tmp_path / "conform"
    result = zqbench_pinned("conform", "--target", vllm.base_url, "--out", str(out))
    assert result.returncode == 1, result.stderr
    checks = {c["id"]: c for c in _json(out / "conform.json")["checks"]}
    hidden = checks["zeroqueue.5"]
    assert hidden["status"] == "fail", hidden
    assert "queue" in hidden["reason"]
    judged_on_behaviour(_json(out / "conform.json"), result.stdout)
    # The API shapes vLLM really serves, and its one-chunk-per-token stream.
    for check in ("api.openai.1", "api.openai.2", "api.openai.3", "api.openai.4"):
        assert checks[check]["status"] == "pass", checks[check]
    assert checks["api.anthropic.3"]["status"] == "pass", checks["api.anthropic.3"]
    # vLLM never refuses: nothing to judge about refusals is a skip, never a pass.
    for check in ("zeroqueue.10", "zeroqueue.11", "zeroqueue.12"):
        assert checks[check]["status"] == "skip", checks[check]
    _cut_streams_free_vllms_slots(checks["zeroqueue.13"])


def _cut_streams_free_vllms_slots(check: dict) -> None:
    """zeroqueue.13: vLLM aborts a request whose client hung up, so its 8 slots (found from
    its running gauge) take 8 new requests at once, none queued behind the cut streams."""
    ev = check["evidence"]
    print(f"zeroqueue.13 on vLLM: {check['reason']}; gauge {ev.get('gauge')}")
    print(f"  new requests {ev['new_requests']}, threshold {ev['threshold_ms']} ms")
    assert check["status"] == "pass", check
    assert ev["capacity"]["value"] == 8, ev["capacity"]  # --max-num-seqs 8
    assert ev["capacity"]["source"].startswith("discovered: max vllm:num_requests_running")
    assert ev["streams_live"] == 8 and ev["would_have_run_s"] > ev["bound_s"]
    assert ev["gauge"]["name"] == "vllm:num_requests_running"
    assert ev["gauge"]["fell_after_s"] is not None and ev["gauge"]["fell_after_s"] <= 1.0
    assert ev["new_requests"]["admitted"] == 8
    assert max(ev["new_requests"]["ttft_ms"]) <= ev["threshold_ms"]


def test_probe_with_target_alone_shows_ttft_beside_ttfb(vllm: VllmServer) -> None:
    result = zqbench_pinned("probe", "--target", vllm.base_url, "-n", "10")
    assert result.returncode == 0, result.stdout + result.stderr
    rows = {line.split()[0] for line in result.stdout.splitlines() if line.strip()}
    assert {"ttfb", "ttft", "total"} <= rows
    assert "model tiny (discovered from GET /v1/models)" in result.stderr


def test_a_wrong_model_is_refused_in_vllms_words_before_any_load(
    vllm: VllmServer, tmp_path: Path
) -> None:
    root = tmp_path / "reports"
    t0 = time.monotonic()
    result = zqbench_pinned(
        "run", "burst", "--target", vllm.base_url, "--model", "wrong", cwd=tmp_path
    )
    elapsed = time.monotonic() - t0
    assert result.returncode == 2, result.stderr
    assert "The model `wrong` does not exist" in result.stderr
    assert len(result.stderr.strip().splitlines()) <= 3, result.stderr
    assert not root.exists()  # no folder left behind
    assert elapsed < 10, elapsed  # the check itself takes well under a second


@pytest.mark.parametrize("api", ["anthropic", "openai"])
def test_each_api_vllm_serves_measures_its_tokens(
    vllm: VllmServer, tmp_path: Path, api: str
) -> None:
    out = tmp_path / api
    result = run_pinned(
        scenario="smoke", target=vllm.base_url, api=api, max_schedule_lag_s=LAG_OK_S, out=str(out)
    )
    assert result.returncode in (0, 1), result.stderr  # judged on its SLOs, either way
    summary = _json(out / "summary.json")
    assert summary["validity"]["ok"], summary["validity"]
    assert summary["target_resolution"]["api"] == api
    assert summary["target_resolution"]["api_source"] == "option"
    assert summary["requests"]["ok"] > 0
    rows = [r for r in pq.read_table(out / "samples.parquet").to_pylist() if r["error"] is None]
    assert rows and all(r["tokens_from_usage"] for r in rows)
    for r in rows:  # a delta stands for at least one token
        assert r["n_chunks"] <= r["output_tokens"], r
        # No text at all only when the model ended the answer before its first character:
        # the random model samples its end-of-sequence token first (or after half a
        # character) now and then, and the Messages adapter then sends no text delta.
        assert r["n_chunks"] >= 1 or r["output_tokens"] < MAX_TOKENS, r
    if api == "openai":  # one chunk per token, a split character's empty ones included
        # ...while vLLM's API process keeps up. Descheduled for tens of ms (a busy machine),
        # it sends the tokens produced meanwhile as one chunk (its RequestOutputCollector
        # merges them; `return_token_ids` shows several ids on that chunk) and its usage
        # stays exact. Seen once in 100 requests in a full run; 0 of 200 with a CPU hog on
        # vLLM's core; 99 of 100 with its API process stopped 30 ms in every 100.
        exact = sum(r["n_chunks"] == r["output_tokens"] for r in rows)
        assert exact >= 0.9 * len(rows), (exact, len(rows))


def test_a_dataset_run_gets_each_rows_output_length_from_vllm(
    vllm: VllmServer, tmp_path: Path
) -> None:
    # The random model often samples its end-of-sequence token early (see above): only
    # min_tokens + ignore_eos, which zqbench sends for a row's output length, make every
    # answer exactly as long as the row asks.
    dataset = tmp_path / "rows.jsonl"
    rows = [{"prompt": f"question {i}: " + "why " * (i % 7), "output_tokens": 3 + i % 11}
            for i in range(20)]  # fmt: skip
    rows[5] = {"system": "be brief", "output_tokens": 9,
               "messages": [{"role": "user", "content": "hi"},
                            {"role": "assistant", "content": "hello"},
                            {"role": "user", "content": "and now?"}]}  # fmt: skip
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "dataset"
    result = run_pinned(
        scenario="smoke", target=vllm.base_url, api="openai", dataset=str(dataset),
        max_schedule_lag_s=LAG_OK_S, out=str(out),
    )  # fmt: skip
    assert result.returncode in (0, 1), result.stderr
    summary = _json(out / "summary.json")
    source = summary["environment"]["request_source"]
    assert source["source"] == "dataset" and source["rows_kept"] == 20
    assert source["output_lengths"] == "forced (min_tokens = max_tokens, ignore_eos)"
    samples = [r for r in pq.read_table(out / "samples.parquet").to_pylist() if r["error"] is None]
    assert len(samples) >= 90  # smoke: 100 requests, each row 5 times
    for r in samples:
        assert (
            r["tokens_from_usage"] and r["output_tokens"] == rows[r["source_row"]]["output_tokens"]
        )
    seen = {r["source_row"] for r in samples}
    assert seen == set(range(20))
    # The conversation's turns reached vLLM: its prompt is longer than its last message alone.
    assert min(r["prompt_tokens"] for r in samples if r["source_row"] == 5) > min(
        r["prompt_tokens"] for r in samples if r["source_row"] == 0
    )


def test_shared_prefixes_hit_vllms_prefix_cache_and_cold_prompts_do_not(
    vllm: VllmServer, tmp_path: Path, attempt_seed: int
) -> None:
    # One after the other against the same vLLM: the same load and prompt length (544
    # tokens), with and without 8 shared 512-token prefixes.
    runs = {}
    for name in ("shared-prefix", "shared-prefix-cold"):
        out = tmp_path / name
        result = run_pinned(
            scenario=name, target=vllm.base_url, api="openai", max_schedule_lag_s=LAG_OK_S,
            duration_scale=0.35, min_samples=40,  # about 70 requests in 7 s
            seed=attempt_seed,  # prompts no earlier run (or attempt) sent
            out=str(out),
        )  # fmt: skip
        assert result.returncode in (0, 1), result.stderr
        runs[name] = _json(out / "summary.json")
    warm, cold = runs["shared-prefix"], runs["shared-prefix-cold"]
    for summary in (warm, cold):
        assert summary["validity"]["ok"], summary["validity"]
        assert summary["requests"]["failed"] == 0
    server = warm["prefix_cache"]["server"]
    assert server["metrics"] == ["vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"]
    assert server["hit_rate"] >= 0.5, server  # all but each group's first prefill
    assert warm["prefix_cache"]["usage"]["cached_share"] >= 0.5
    assert cold["prefix_cache"]["server"]["hit_rate"] < 0.05  # cold prompts stay cold
    assert cold["prefix_cache"]["usage"]["cached_requests"] == 0
    assert warm["metrics"]["ttft"]["p50"] < cold["metrics"]["ttft"]["p50"]


def test_a_trace_replay_gives_vllm_the_traces_own_prefix_reuse(
    vllm: VllmServer, tmp_path: Path, attempt_seed: int
) -> None:
    # The bundled trace's first half, 3x faster: about 90 requests in 6 s. A seed of this
    # attempt's own, so no earlier run (or attempt) against this vLLM sent the same text.
    out = tmp_path / "trace"
    result = run_pinned(
        scenario="trace", target=vllm.base_url, api="openai", max_schedule_lag_s=LAG_OK_S,
        rate_scale=3, duration_scale=0.5, min_samples=40, seed=attempt_seed, out=str(out),
    )  # fmt: skip
    assert result.returncode in (0, 1), result.stderr
    summary = _json(out / "summary.json")
    assert summary["validity"]["ok"], summary["validity"]
    source = summary["environment"]["request_source"]
    assert source["source"] == "trace" and source["format"] == "mooncake"
    assert summary["requests"]["sent"] == source["rows_scheduled"] >= 80
    ideal = source["ideal_reuse"]  # from the replayed rows' hash ids: about 42%
    server = summary["prefix_cache"]["server"]
    # Below the ideal, never above it: vLLM caches whole 16-token blocks (a shared prefix's
    # last partial block is computed again), and requests that share a prefix while its
    # first prefill is still running all miss it, the more so on a slow machine (0.345-0.353
    # for seeds 5, 11 and another on a quiet machine; 0.316 in a CI run). Text that ignored
    # the trace's hash ids would share nothing; text that shared more would pass the ideal.
    assert 0.6 * ideal <= server["hit_rate"] <= ideal + 0.02, (server, ideal)
    # Each row's output reached vLLM at the trace's length, its prompt at about its length:
    # this tokenizer's 2.2 bytes a token vary from text to text, most on short prompts.
    trace = Path(__file__).resolve().parents[2] / "scenarios/data/trace.jsonl"
    rows = [json.loads(line) for line in trace.read_text().splitlines()]
    samples = [r for r in pq.read_table(out / "samples.parquet").to_pylist() if r["error"] is None]
    for r in samples:
        row = rows[r["source_row"]]
        assert r["source_row"] == r["request_id"]
        assert r["output_tokens"] == row["output_length"], r  # forced: min_tokens, ignore_eos
        assert abs(r["prompt_tokens"] - row["input_length"]) <= 0.25 * row["input_length"]
    sent = sum(r["prompt_tokens"] for r in samples)
    asked = sum(rows[r["source_row"]]["input_length"] for r in samples)
    assert abs(sent - asked) <= 0.05 * asked


def test_each_sessions_turn_carries_the_last_one_and_its_answer_on_vllm(
    vllm: VllmServer, tmp_path: Path
) -> None:
    # 2 sessions a second for 3 s, 4 turns each, on both APIs vLLM serves. Messages of 384
    # tokens and answers of 8: vLLM counts an answer again from its text, and this random
    # model's text re-encodes to more tokens than it was made of (32-token answers came back
    # as 32-51, 8-token ones as up to 17), noise that must stay small beside the prompt.
    scenario = tmp_path / "talk.toml"
    scenario.write_text(
        'name = "talk"\n[load]\nexecutor = "sessions"\nrate = 2\nduration = "3s"\n'
        'turns = 4\nthink_time = "300ms"\n[request]\nprompt_tokens = 384\nmax_tokens = 8\n'
    )
    for api in ("openai", "anthropic"):
        out = tmp_path / api
        result = run_pinned(
            scenario=str(scenario), target=vllm.base_url, api=api, max_schedule_lag_s=LAG_OK_S,
            min_samples=20, out=str(out),
        )  # fmt: skip
        assert result.returncode in (0, 1), result.stderr
        summary = _json(out / "summary.json")
        assert summary["sessions"]["completed"] == summary["sessions"]["sessions"] >= 6
        turns: dict[int, dict[int, dict]] = {}
        for r in pq.read_table(out / "samples.parquet").to_pylist():
            assert r["error"] is None and r["tokens_from_usage"], r
            turns.setdefault(r["session"], {})[r["turn"]] = r

        # A turn answered with no text (this random model's 8 tokens can detokenize to
        # nothing; seen once in a clean-clone run: 383, 775, 775, 1172) is left out of the
        # conversation by design (sources/sessions.py): the next turn then resends the same
        # history with a new message of the same length.
        def grew(session: dict[int, dict], k: int) -> bool:
            step = session[k]["prompt_tokens"] - session[k - 1]["prompt_tokens"]
            if step > session[0]["prompt_tokens"] // 2:
                return True
            assert abs(step) <= 0.02 * session[k]["prompt_tokens"], (k, step)
            return False

        steps = [(s, k) for s in turns.values() for k in range(1, 4)]
        kept = [(s, k) for s, k in steps if grew(s, k)]
        assert len(kept) >= 0.75 * len(steps), (api, len(kept), len(steps))

        # Each turn adds the chat template's few tokens for two more messages: a constant,
        # taken as the least any kept turn shows beyond the sum. It can read below 0: an
        # answer fed back as text may encode to a token or two fewer than it was generated
        # as (BPE merges across its edges; seen once: -1 in a clean-clone run).
        def residual(session: dict[int, dict], k: int) -> int:
            last, now = session[k - 1], session[k]
            added = last["output_tokens"] + session[0]["prompt_tokens"]
            return now["prompt_tokens"] - last["prompt_tokens"] - added

        template = min(residual(s, k) for s, k in kept)
        assert -4 <= template <= 8, template
        for session, k in kept:
            expected = session[k]["prompt_tokens"] - residual(session, k) + template
            assert abs(session[k]["prompt_tokens"] - expected) <= 0.02 * expected, (
                api,
                k,
                [session[j]["prompt_tokens"] for j in range(4)],
            )
