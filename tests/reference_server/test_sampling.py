"""Sampling end to end: temperature, seed, top_p and top_k reach the engine."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import httpx
import pytest

from tests.reference_server.conftest import MODEL, Server, start_server

pytestmark = pytest.mark.slow  # starts the reference server (seconds)

PROMPT = [{"role": "user", "content": "sample me"}]


def _openai(server: Server, **extra: object) -> str:
    body = {"model": MODEL, "max_tokens": 24, "messages": PROMPT, **extra}
    r = httpx.post(server.url + "/v1/chat/completions", json=body, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]["content"]


def _anthropic(server: Server, **extra: object) -> str:
    body = {"model": MODEL, "max_tokens": 24, "messages": PROMPT, **extra}
    r = httpx.post(server.url + "/v1/messages", json=body, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["content"][0]["text"]


def _check_sampling(server: Server) -> None:
    # Greedy: identical requests give identical text, whatever seed they carry.
    assert _openai(server) == _openai(server) == _openai(server, seed=7)
    assert _anthropic(server, temperature=0) == _openai(server, temperature=0)
    # Sampled: the same explicit seed reproduces; other seeds give other text.
    a = _openai(server, temperature=1.0, seed=1)
    assert _openai(server, temperature=1.0, seed=1) == a
    others = {_openai(server, temperature=1.0, seed=s) for s in (2, 3, 4)}
    assert others - {a}
    # Without a seed each request gets its own derived seed: repeats differ.
    assert len({_openai(server, temperature=1.0) for _ in range(3)}) > 1
    # The Anthropic route takes `seed` as an extra field (SDK: extra_body).
    b = _anthropic(server, temperature=1.0, seed=5, top_k=50, top_p=0.9)
    assert _anthropic(server, temperature=1.0, seed=5, top_k=50, top_p=0.9) == b


def test_sim_sampling(zq_server: Server) -> None:
    """sim: temperature 0 is deterministic; temperature > 0 follows the seed."""
    _check_sampling(zq_server)


def test_sampling_fields_are_validated(zq_server: Server) -> None:
    """Out-of-range sampling fields are 400s in the route's dialect."""
    url = zq_server.url + "/v1/chat/completions"
    for bad in ({"top_p": 1.5}, {"top_k": -1}, {"seed": "x"}, {"temperature": 3}):
        body = {"model": MODEL, "max_tokens": 4, "messages": PROMPT, **bad}
        r = httpx.post(url, json=body, timeout=10)
        assert r.status_code == 400, bad
        assert r.json()["error"]["type"] == "invalid_request_error"


@pytest.fixture(scope="module")
def torch_server() -> Iterator[Server]:
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed (optional extra)")
    server = start_server(
        "--engine", "torch", "--device", "cpu", "--preset", "tiny", "--max-batch-size", "2",
        "--max-context", "256", "--max-concurrent-kernels", "1", wait_s=180,
    )  # fmt: skip
    yield server
    server.stop()


@pytest.mark.slow
@pytest.mark.torch
def test_torch_sampling(torch_server: Server) -> None:
    """torch (CPU, tiny): the same sampling contract as the sim."""
    _check_sampling(torch_server)


@pytest.mark.torch
def test_top_k_and_top_p_filter_the_distribution() -> None:
    """top_k keeps the k most likely tokens; top_p the smallest prefix reaching p."""
    torch = pytest.importorskip("torch")
    from reference_server.model.torch_runner import _filtered_probs

    logits = torch.log(torch.tensor([0.1, 0.5, 0.15, 0.25]))
    assert _filtered_probs(logits, 1, 1.0).tolist() == [0.0, 1.0, 0.0, 0.0]
    top2 = _filtered_probs(logits, 2, 1.0)
    assert top2[0] == top2[2] == 0 and torch.isclose(top2.sum(), torch.tensor(1.0))
    # 0.5 + 0.25 reaches 0.7: the two others are dropped (renormalised by multinomial).
    assert (_filtered_probs(logits, 0, 0.7) > 0).tolist() == [False, True, False, True]
    assert (_filtered_probs(logits, 0, 0.0) > 0).tolist() == [False, True, False, False]
    assert torch.allclose(_filtered_probs(logits, 0, 1.0), torch.softmax(logits, -1))
