"""Tool calls and reasoning on one real vLLM (#42 item 5), serving the reasoning model
(make_tiny_model.py --think) with `--enable-auto-tool-choice --tool-call-parser hermes` and
`--reasoning-parser qwen3 --logits-processors end_thinking:EndThinking`.

Tools: a named tool_choice makes even the tiny random model call the tool, its arguments
streamed as tool-call deltas; a turn offered tools opens no thinking (the model's template
closes it), so the call is constrained from its first token. conform's api.*.6 finds those
arguments no JSON object on either route.

Reasoning: any other turn thinks exactly 16 tokens (plugins/end_thinking.py forces `</think>`
then), streamed as one reasoning piece a token, then answers to max_tokens (the model never
chooses EOS); usage's completion_tokens_details.reasoning_tokens counts the 16.

Its own server: with auto tool choice on, vLLM 0.32 streams plain answers differently (21 and
26 of 100 smoke requests one chunk per token in two runs, against at least 90 without the
flags), so test_vllm.py's server stays without them, and on its plain model.

The thinking run goes through the CLI; the tool workload and the agent's loop are made
without report.html (conftest.run_pinned): what they check is what vLLM served.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pyarrow.parquet as pq
import pydantic
import pytest

from tests.dialects.frames import feed
from tests.dialects.sdk import sdk_read
from tests.servers.process_group import need_engine
from tests.vllm.conftest import run_pinned, zqbench_pinned
from tests.vllm.target import VllmServer, free_port, start_vllm, think_model_dir, vllm_available
from zqbench.conform import ConformOptions, run_conformance
from zqbench.dialects import get_dialect
from zqbench.dialects.base import TEXT, THINKING, TOOL, DialectConfig, RequestSpec, ToolDef, Tools

pytestmark = pytest.mark.slow

TOOL_FLAGS = ("--enable-auto-tool-choice", "--tool-call-parser", "hermes")
REASONING_FLAGS = ("--reasoning-parser", "qwen3", "--logits-processors", "end_thinking:EndThinking")
THOUGHT = 16  # end_thinking.THINKING_TOKENS: the thinking tokens of every answer that thinks


@pytest.fixture(scope="module")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    model = think_model_dir()
    need_engine("vLLM", vllm_available(model))
    log = tmp_path_factory.mktemp("vllm-tools") / "vllm.log"
    server = start_vllm(free_port(), log, extra_args=(*TOOL_FLAGS, *REASONING_FLAGS), model=model)
    try:
        yield server
    finally:
        server.stop()


def _stream(vllm: VllmServer, api: str, spec: RequestSpec) -> list[bytes]:
    """One request as zqbench's dialect writes it; the stream's events as they came."""
    dialect = get_dialect(api, DialectConfig(model=vllm.model))
    request = dialect.build(spec)
    r = httpx.post(
        vllm.base_url + request.path,
        content=request.body,
        headers=dict(dialect.headers),
        timeout=120,
    )
    assert r.status_code == 200, r.text
    return [event + b"\n\n" for event in r.content.split(b"\n\n") if event]


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_named_tool_choice_streams_one_call_that_zqbench_counts_as_the_sdk_does(
    vllm: VllmServer, api: str
) -> None:
    """#42: vLLM (--enable-auto-tool-choice) answers a named tool_choice with one call
    whose arguments stream as tool-call deltas; zqbench counts the calls the official SDK's
    accumulator finds, and usage's tokens. vLLM streams fewer argument pieces than tokens
    (structured outputs generate JSON it passes on in merged pieces), so tool events stay
    at or under usage."""
    lookup = ToolDef("lookup", "look a word up", {
        "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"],
    })  # fmt: skip
    dialect = get_dialect(api, DialectConfig(model=vllm.model))
    for n in range(3):
        spec = RequestSpec("tools", f"look up {n}", 96, tools=Tools((lookup,), "lookup", True))
        frames = _stream(vllm, api, spec)
        s = feed(dialect.parser(spec), frames)
        assert s.error is None and s.carried == TOOL and s.tool_calls == 1, s
        assert 1 <= s.tool_events <= s.output_tokens
        if api == "openai":
            assert sdk_read(api, frames)[1:] == (1, s.output_tokens)
        else:
            # vLLM 0.32's Messages route streams the random model's arguments as they came,
            # not constrained to an object ("1499e", "null"): the anthropic SDK refuses them.
            # When this fails, vLLM constrains them there too: compare with the SDK then.
            with pytest.raises(ValueError, match="Unable to parse tool parameter JSON"):
                sdk_read(api, frames)


def test_conform_fails_the_named_calls_arguments_on_both_routes(vllm: VllmServer) -> None:
    """api.*.6 (#42 item 4): vLLM 0.32 calls the tool tool_choice named, on both routes, but
    streams arguments that are no JSON object: a JSON scalar ('true', 'null', '8E22') or not
    JSON at all ('1499e'); 24 of 24 streamed calls on the plain model (2026-12-06), the
    reasoning model's likewise ('0e10', 'true', '45E+6'), never the object of the tool's
    schema. The openai SDK's accumulator takes them (it parses no arguments), but
    any caller that reads the arguments as an object fails. When .6 passes, vLLM constrains
    the arguments to the schema. .7 passes on the chat route: 16 reasoning pieces, then the
    answer, usage's reasoning_tokens 16 (vLLM ignores the thinking object there; the model
    thinks anyway). The Messages route refuses its budget of 16, under 1,024, as Anthropic's
    API does: a skip."""
    options = ConformOptions(target=vllm.base_url, apis=("anthropic", "openai"), only=("api",))
    checks = {o.id: o for o in run_conformance(options).outcomes}
    for api, stop in (("anthropic", "stop_reason"), ("openai", "finish_reason")):
        call = checks[f"api.{api}.6"]
        assert call.status == "fail", call
        assert call.reason.endswith("are not a JSON object"), call.reason
        (made,) = call.evidence["calls"]
        assert made["name"] == "lookup" and made["pieces"] >= 1, call.evidence
        # The call ended (not cut): a format that is wrong, not a call left unfinished.
        assert call.evidence[stop] in ("tool_use", "stop"), call.evidence
    thought = checks["api.anthropic.7"]
    assert thought.status == "skip", thought
    assert thought.reason.startswith("not applicable: the request for thinking got status 400")
    thought = checks["api.openai.7"]
    assert thought.status == "pass", thought
    facts = (thought.evidence["reasoning_pieces"], thought.evidence["reasoning_tokens"])
    assert facts == (THOUGHT, THOUGHT), thought.evidence


def test_the_tool_workload_counts_one_call_a_request_exactly(
    vllm: VllmServer, tmp_path: Path
) -> None:
    """scenarios/tool-calls.toml (two tools offered, one named) against vLLM: every answer
    one call, summary and samples agree with it, and the tokens are vLLM's usage."""
    out = tmp_path / "tools"
    result = run_pinned(
        scenario="tool-calls", target=vllm.base_url, duration_scale=0.3,
        min_samples=20, max_schedule_lag_s=0.25,  # 30 requests, a busy core
        out=str(out),
    )  # fmt: skip
    assert result.returncode in (0, 1), result.stderr  # judged on its SLOs, either way
    summary = json.loads((out / "summary.json").read_text())
    assert summary["validity"]["ok"], summary["validity"]
    ok = summary["requests"]["ok"]
    r = summary["reasoning"]
    assert ok >= 20 and r["tool_requests"] == r["tool_calls"] == ok, (ok, r)
    rows = [row for row in pq.read_table(out / "samples.parquet").to_pylist() if not row["error"]]
    assert len(rows) == ok and all(
        row["tool_calls"] == 1
        and row["carried"] == TOOL
        and row["tokens_from_usage"]
        and 1 <= row["n_chunks"] <= row["output_tokens"]
        for row in rows
    ), rows[0]
    assert "ttfa" in summary["metrics"]


def _thinking(api: str, frames: list[bytes]) -> tuple[list[str], int | None]:
    """The stream's thinking pieces and usage's reasoning_tokens, read here from its JSON."""
    pieces: list[str] = []
    reasoning_tokens = None
    for frame in frames:
        for line in frame.decode().splitlines():
            if not line.startswith("data: {"):
                continue
            obj = json.loads(line[6:])
            if api == "anthropic":
                delta = obj.get("delta") or {}
                if obj["type"] == "content_block_delta" and delta["type"] == "thinking_delta":
                    pieces.append(delta["thinking"])
                continue
            pieces += [
                c["delta"]["reasoning"] for c in obj["choices"] if c["delta"].get("reasoning")
            ]
            if obj.get("usage"):
                reasoning_tokens = obj["usage"]["completion_tokens_details"]["reasoning_tokens"]
    return pieces, reasoning_tokens


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_turn_thinks_then_answers_and_zqbench_counts_the_thinking_as_vllm_does(
    vllm: VllmServer, api: str
) -> None:
    """#42 item 5: a plain request to the reasoning model, as zqbench writes it, gets 16
    thinking tokens then the answer to max_tokens, on both routes. zqbench's count of the
    thinking is usage's reasoning_tokens on the chat route and its own 16 events on the
    Messages route (whose usage has no count); the openai SDK accumulates the same thinking
    text. One event a token, except `</think>`, which streams nothing."""
    dialect = get_dialect(api, DialectConfig(model=vllm.model))
    for n in range(3):
        spec = RequestSpec("think", f"tell me about the river {n}", 48)
        frames = _stream(vllm, api, spec)
        s = feed(dialect.parser(spec), frames)
        pieces, usage_reasoning = _thinking(api, frames)
        assert s.error is None and s.carried == THINKING | TEXT and s.tool_calls == 0, s
        assert len(pieces) == s.reasoning_events == THOUGHT
        assert s.output_tokens == 48 and s.token_events == 48 - 1
        assert s.t_first_token is not None and s.t_first_answer is not None
        # feed() times each event by its place: the answer began where the thinking ended.
        if api == "openai":
            assert s.reasoning_tokens == usage_reasoning == THOUGHT
            assert s.t_first_answer - s.t_first_token == THOUGHT
            assert sdk_read(api, frames) == ("".join(pieces), 0, s.output_tokens)
            continue
        assert s.reasoning_tokens is None and usage_reasoning is None
        # its signature, the thinking block's stop and the text block's start between
        assert s.t_first_answer - s.t_first_token == THOUGHT + 3
        # vLLM 0.32 opens the thinking block without its `signature` (`{"type": "thinking",
        # "thinking": ""}`; Anthropic's API sends "signature": ""), which the anthropic SDK's
        # accumulator refuses. When this fails, vLLM sends it: compare with the SDK then.
        with pytest.raises(pydantic.ValidationError, match=r"ThinkingBlock\.signature"):
            sdk_read(api, frames)


def test_a_run_reports_every_answers_thinking_as_vllms_usage_counts_it(
    vllm: VllmServer, tmp_path: Path
) -> None:
    """zqbench run on the chat route (scenarios/smoke.toml, 48 tokens): every answer thought
    16 tokens by vLLM's usage, then answered; summary.json's reasoning section and ttfa say
    so. Chunks may merge on a busy core (docs/targets.md), so events are at most the tokens
    streamed; the counts are usage's, exact."""
    out = tmp_path / "think"
    args = ["run", "smoke", "--target", vllm.base_url, "--api", "openai", "--max-tokens", "48"]
    args += ["--rate-scale", "0.25", "--min-samples", "20", "--max-schedule-lag", "250ms"]
    result = zqbench_pinned(*args, "-q", "--out", str(out))
    assert result.returncode in (0, 1), result.stderr  # judged on its SLOs, either way
    summary = json.loads((out / "summary.json").read_text())
    assert summary["validity"]["ok"], summary["validity"]
    ok = summary["requests"]["ok"]
    r = summary["reasoning"]
    assert ok >= 20 and r["thinking_requests"] == ok and r["unanswered"] == 0, (ok, r)
    assert (r["reasoning_tokens_mean"], r["reasoning_tokens_counted"]) == (THOUGHT, 0), r
    assert r["tool_requests"] == r["tool_calls"] == 0 and r["thinking_p50"] > 0, r
    rows = [row for row in pq.read_table(out / "samples.parquet").to_pylist() if not row["error"]]
    assert len(rows) == ok and all(
        row["carried"] == THINKING | TEXT
        and row["reasoning_tokens"] == THOUGHT
        and row["reasoning_from_usage"]
        and row["output_tokens"] == 48
        and row["tokens_from_usage"]
        and THOUGHT < row["n_chunks"] <= 48 - 1
        and row["t_first_answer"] > row["t_first_token"]
        for row in rows
    ), rows[0]
    metrics = summary["metrics"]
    assert metrics["ttfa"]["p50"] > metrics["ttft"]["p50"], (metrics["ttfa"], metrics["ttft"])


AGENT = """
name = "agent"
api = "{api}"
[load]
executor = "sessions"
rate = 2
duration = "3s"
turns = 3
[request]
prompt_tokens = 48
max_tokens = 64
timeout = "60s"
tools = "{tools}"
tool_choice = "lookup"
"""


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_an_agents_loop_sends_each_call_back_with_its_result_and_vllm_takes_it(
    vllm: VllmServer, tmp_path: Path, api: str
) -> None:
    """Sessions offering tools (#42 item 4): each turn after a call sends the call back and
    its result, in the API's words; vLLM's own request models accept both (a malformed tool
    message is a 400), and the context it counts grows turn by turn by the call and result."""
    tools = Path(__file__).resolve().parents[2] / "scenarios" / "data" / "tools.json"
    scenario = tmp_path / "agent.toml"
    scenario.write_text(AGENT.format(api=api, tools=tools))
    out = tmp_path / "agent"
    result = run_pinned(
        scenario=str(scenario), target=vllm.base_url, min_samples=6, max_schedule_lag_s=0.25,
        out=str(out),
    )  # fmt: skip
    assert result.returncode in (0, 1), result.stderr
    rows = pq.read_table(out / "samples.parquet").to_pylist()
    by_session: dict[int, dict[int, dict]] = {}
    for row in rows:
        assert row["error"] is None and row["status"] == 200, row
        assert row["tool_calls"] == 1 and row["carried"] & TOOL, row
        by_session.setdefault(row["session"], {})[row["turn"]] = row
    assert len(by_session) >= 4 and all(len(t) == 3 for t in by_session.values()), by_session
    for turns in by_session.values():
        for k in (1, 2):
            # The last turn's prompt, then its call and the result: a message of the first
            # turn's length (the first turn's prompt adds the chat template's few tokens).
            grown = turns[k]["prompt_tokens"] - turns[k - 1]["prompt_tokens"]
            assert grown > 0.5 * turns[0]["prompt_tokens"], (k, turns)
