"""The torch engine (tiny preset, CPU) behind the same API: both SDKs, both schedulers."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import anthropic
import httpx
import openai
import pytest

from tests.reference_server.conftest import MODEL, Server, start_server

pytestmark = [
    pytest.mark.torch,
    pytest.mark.slow,  # a torch server per scheduler: about 20 s to start on 2 busy cores
    pytest.mark.skipif(
        importlib.util.find_spec("torch") is None, reason="torch is not installed (optional extra)"
    ),
]


@pytest.fixture(scope="module", params=["zero-queue", "fifo"])
def torch_server(request: pytest.FixtureRequest) -> Iterator[Server]:
    server = start_server(
        "--engine", "torch", "--device", "cpu", "--preset", "tiny", "--scheduler", request.param,
        "--max-batch-size", "2", "--max-context", "256", "--max-concurrent-kernels", "1",
        wait_s=180,
    )  # fmt: skip
    yield server
    server.stop()


def test_torch_both_sdks(torch_server: Server) -> None:
    """Real model output: exact token counts, engine torch in headers and /health."""
    url = torch_server.url
    with (
        anthropic.Anthropic(base_url=url, api_key="k", max_retries=0) as a,
        openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0) as o,
    ):
        raw = a.messages.with_raw_response.create(
            model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "torch"}]
        )
        msg = raw.parse()
        assert raw.headers["x-engine"] == "torch"
        assert msg.usage.input_tokens == 6 and msg.usage.output_tokens == 8
        assert len(msg.content[0].text) == 8  # type: ignore[union-attr]
        with a.messages.stream(
            model=MODEL, max_tokens=6, messages=[{"role": "user", "content": "torch"}]
        ) as stream:
            final = stream.get_final_message()
        # Greedy decoding of seeded weights: the same prompt gives the same text.
        assert final.content[0].text == msg.content[0].text[:6]  # type: ignore[union-attr]
        chunks = list(
            o.chat.completions.create(
                model=MODEL, max_tokens=5, stream=True, stream_options={"include_usage": True},
                messages=[{"role": "user", "content": "torch"}],
            )
        )  # fmt: skip
        assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 5
        timing = chunks[-1].model_extra["zq_timing"]  # type: ignore[index]
        assert timing["received"] <= timing["dispatch"] <= timing["start"]
    health = httpx.get(torch_server.url + "/health").json()
    assert health["engine"] == "torch" and health["device"] == "cpu"


def _counter(url: str, name: str) -> float:
    lines = httpx.get(url + "/metrics").text.splitlines()
    return float(next(line.split()[1] for line in lines if line.startswith(name + " ")))


def test_cached_prompt_tokens_in_usage_and_metrics(torch_server: Server) -> None:
    """A prompt sharing a 70-token prefix with an earlier one reads its 4 full blocks (64
    tokens) from the prefix cache: OpenAI's prompt_tokens_details.cached_tokens, Anthropic's
    cache_read_input_tokens (input_tokens the rest), and the /metrics counters say so."""
    url = torch_server.url
    shared = "You are a careful assistant. Answer in one line. Context: 0123456789a"  # 70 tokens
    queries = _counter(url, "refserver_prefix_cache_queries_total")
    hits = _counter(url, "refserver_prefix_cache_hits_total")
    usages = []
    for suffix in ("? first", "! second"):
        body = {
            "model": MODEL,
            "max_tokens": 2,
            "messages": [{"role": "user", "content": shared + suffix}],
        }
        usages.append(httpx.post(url + "/v1/chat/completions", json=body).json()["usage"])
    assert [u["prompt_tokens_details"]["cached_tokens"] for u in usages] == [0, 64]
    assert _counter(url, "refserver_prefix_cache_queries_total") - queries == 77 + 78
    assert _counter(url, "refserver_prefix_cache_hits_total") - hits == 64

    with anthropic.Anthropic(base_url=url, api_key="k", max_retries=0) as a:
        msg = a.messages.create(
            model=MODEL, max_tokens=2, messages=[{"role": "user", "content": shared + ": third"}]
        )
        with a.messages.stream(
            model=MODEL, max_tokens=2, messages=[{"role": "user", "content": shared + "; fourth"}]
        ) as stream:
            final = stream.get_final_message()
    for usage, prompt_tokens in ((msg.usage, 77), (final.usage, 78)):
        assert usage.cache_read_input_tokens == 64
        assert usage.input_tokens == prompt_tokens - 64  # the Messages API's: the rest
