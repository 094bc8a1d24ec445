"""The official anthropic and openai SDKs work against the server, streaming and not."""

from __future__ import annotations

from collections.abc import Iterator

import anthropic
import httpx
import openai
import pytest

from tests.reference_server.conftest import MODEL, Server

pytestmark = pytest.mark.slow  # starts the reference server (seconds)

TIMING_HEADERS = ("x-request-received-time", "x-request-dispatch-time", "x-request-start-time")


@pytest.fixture
def claude(sim_server: Server) -> Iterator[anthropic.Anthropic]:
    """The Anthropic SDK's client, closed after the test: an unclosed one leaves its
    connection to the garbage collector, a ResourceWarning in whichever test comes next."""
    with anthropic.Anthropic(base_url=sim_server.url, api_key="unused", max_retries=0) as client:
        yield client


@pytest.fixture
def gpt(sim_server: Server) -> Iterator[openai.OpenAI]:
    """The OpenAI SDK's client, closed after the test."""
    url = sim_server.url + "/v1"
    with openai.OpenAI(base_url=url, api_key="unused", max_retries=0) as client:
        yield client


def _check_timing(t: dict[str, object]) -> None:
    received, dispatch, start = t["received"], t["dispatch"], t["start"]
    assert isinstance(received, float) and isinstance(dispatch, float)
    assert isinstance(start, float)
    assert received <= dispatch <= start
    assert "gpu_ms" in t


def test_anthropic_non_streaming(claude: anthropic.Anthropic) -> None:
    """A Messages call returns exactly max_tokens tokens, exact usage and zq_timing."""
    raw = claude.messages.with_raw_response.create(
        model=MODEL, max_tokens=12, messages=[{"role": "user", "content": "hello"}]
    )
    msg = raw.parse()
    assert msg.stop_reason == "max_tokens"
    assert msg.usage.input_tokens == 6  # BOS + 5 bytes
    assert msg.usage.output_tokens == 12
    assert len(msg.content[0].text) == 12
    assert msg._request_id and msg._request_id.startswith("req_")
    for h in TIMING_HEADERS:
        assert float(raw.headers[h]) > 1.7e9
    assert raw.headers["x-engine"] == "sim"
    _check_timing(msg.model_extra["zq_timing"])  # type: ignore[index]


def test_anthropic_streaming(claude: anthropic.Anthropic) -> None:
    """The stream yields the exact event sequence; message_delta carries usage and zq_timing."""
    kinds = []
    text = ""
    with claude.messages.stream(
        model=MODEL,
        max_tokens=20,
        system="be brief",
        messages=[{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    ) as stream:
        for event in stream:
            kinds.append(event.type)
            if event.type == "message_delta":
                _check_timing(event.model_extra["zq_timing"])  # type: ignore[index]
                assert event.usage.output_tokens == 20
            if event.type == "content_block_delta":
                text += event.delta.text  # type: ignore[union-attr]
        final = stream.get_final_message()
    assert kinds[:2] == ["message_start", "content_block_start"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert len(text) == 20 and final.content[0].text == text  # type: ignore[union-attr]
    assert final.usage.input_tokens == len("be brief\nhi") + 1


def test_anthropic_stop_sequence(claude: anthropic.Anthropic) -> None:
    """A matching stop sequence ends generation early and is not part of the text."""
    first = claude.messages.create(
        model=MODEL, max_tokens=30, messages=[{"role": "user", "content": "stop test"}]
    )
    text = first.content[0].text  # type: ignore[union-attr]
    stop = text[10:12]  # the sim is deterministic: the same prompt gives the same text
    again = claude.messages.create(
        model=MODEL,
        max_tokens=30,
        stop_sequences=[stop],
        messages=[{"role": "user", "content": "stop test"}],
    )
    assert again.stop_reason == "stop_sequence" and again.stop_sequence == stop
    out = again.content[0].text  # type: ignore[union-attr]
    assert stop not in out and text.startswith(out)


def test_openai_non_streaming(gpt: openai.OpenAI) -> None:
    resp = gpt.chat.completions.create(
        model=MODEL, max_tokens=9, messages=[{"role": "user", "content": "abc"}]
    )
    assert resp.choices[0].finish_reason == "length"
    assert resp.usage is not None and resp.usage.completion_tokens == 9
    assert resp.usage.prompt_tokens == 4
    assert len(resp.choices[0].message.content or "") == 9
    _check_timing(resp.model_extra["zq_timing"])  # type: ignore[index]


def test_openai_streaming_with_usage(gpt: openai.OpenAI) -> None:
    chunks = list(
        gpt.chat.completions.create(
            model=MODEL,
            max_tokens=15,
            stream=True,
            stream_options={"include_usage": True},
            messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "abc"}],
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert len(text) == 15
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    assert last.usage.completion_tokens == 15 and last.usage.prompt_tokens == 6
    _check_timing(last.model_extra["zq_timing"])  # type: ignore[index]


def test_openai_streaming_without_usage(gpt: openai.OpenAI) -> None:
    """Without include_usage, zq_timing rides on the last (finish) chunk."""
    chunks = list(
        gpt.chat.completions.create(
            model=MODEL, max_tokens=5, stream=True, messages=[{"role": "user", "content": "x"}]
        )
    )
    assert chunks[-1].choices[0].finish_reason == "length"
    _check_timing(chunks[-1].model_extra["zq_timing"])  # type: ignore[index]


def test_models_and_health(
    sim_server: Server, claude: anthropic.Anthropic, gpt: openai.OpenAI
) -> None:
    """/v1/models serves both SDKs' shapes; /health reports scheduler, engine and jitter."""
    assert [m.id for m in claude.models.list()] == [MODEL]
    assert [m.id for m in gpt.models.list()] == [MODEL]
    health = httpx.get(sim_server.url + "/health").json()
    assert health["status"] == "healthy" and health["engine"] == "sim"
    assert health["scheduler"] in ("zero-queue", "fifo")
    assert health["dispatch_jitter_us"] >= 0 and health["server_time"] > 1.7e9


def test_http2_prior_knowledge(sim_server: Server) -> None:
    """The same port speaks h2c (prior knowledge), streaming included."""
    with httpx.Client(http1=False, http2=True, base_url=sim_server.url) as client:
        r = client.post(
            "/v1/messages",
            json={"model": MODEL, "max_tokens": 4, "stream": True,
                  "messages": [{"role": "user", "content": "h2"}]},
        )  # fmt: skip
        assert r.http_version == "HTTP/2" and r.status_code == 200
        assert "event: message_stop" in r.text
