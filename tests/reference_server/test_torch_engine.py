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
