"""Tool calls on a real vLLM (#42 item 5): started with `--enable-auto-tool-choice
--tool-call-parser hermes`, a named tool_choice makes even the tiny random model call the
tool, its arguments streamed as tool-call deltas. conform's api.*.6 finds those arguments no
JSON object on either route (the last test).

Its own server: with auto tool choice on, vLLM 0.32 streams plain answers differently (21 and
26 of 100 smoke requests one chunk per token in two runs, against at least 90 without the
flags), so test_vllm.py's server stays without them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pyarrow.parquet as pq
import pytest

from tests.dialects.frames import feed
from tests.dialects.sdk import sdk_read
from tests.servers.process_group import need_engine
from tests.vllm.conftest import zqbench_pinned
from tests.vllm.target import VllmServer, free_port, start_vllm, vllm_available
from zqbench.conform import ConformOptions, run_conformance
from zqbench.dialects import get_dialect
from zqbench.dialects.base import TOOL, DialectConfig, RequestSpec, ToolDef, Tools

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    need_engine("vLLM", vllm_available())
    log = tmp_path_factory.mktemp("vllm-tools") / "vllm.log"
    tools = ("--enable-auto-tool-choice", "--tool-call-parser", "hermes")
    server = start_vllm(free_port(), log, extra_args=tools)
    try:
        yield server
    finally:
        server.stop()


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
        request = dialect.build(spec)
        r = httpx.post(
            vllm.base_url + request.path,
            content=request.body,
            headers=dict(dialect.headers),
            timeout=120,
        )
        assert r.status_code == 200, r.text
        frames = [event + b"\n\n" for event in r.content.split(b"\n\n") if event]
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
    JSON at all ('1499e'); 24 of 24 streamed calls here (2026-12-06), never the object of
    the tool's schema. The openai SDK's accumulator takes them (it parses no arguments), but
    any caller that reads the arguments as an object fails. .7 skips: the model does not
    reason (no --reasoning-parser), and the Messages route refuses a budget under 1,024, as
    Anthropic's API does. When .6 passes, vLLM constrains the arguments to the schema."""
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
    assert (checks["api.openai.7"].status, checks["api.openai.7"].reason) == (
        "skip",
        "the answer carries no reasoning piece: the target does not reason, or not asked so",
    )


def test_the_tool_workload_counts_one_call_a_request_exactly(
    vllm: VllmServer, tmp_path: Path
) -> None:
    """scenarios/tool-calls.toml (two tools offered, one named) against vLLM: every answer
    one call, summary and samples agree with it, and the tokens are vLLM's usage."""
    out = tmp_path / "tools"
    args = ["run", "tool-calls", "--target", vllm.base_url, "--duration-scale", "0.3"]
    args += ["--min-samples", "20", "--max-schedule-lag", "250ms"]  # 30 requests, a busy core
    result = zqbench_pinned(*args, "-q", "--out", str(out))
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
