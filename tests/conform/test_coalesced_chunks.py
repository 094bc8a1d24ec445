"""api.openai.3 on a stream whose chunk carries two tokens (llama.cpp's server when a token
ends inside a UTF-8 character; vLLM when its API process lags): usage counts more tokens
than chunks, which is honest; the evidence holds the stream's own bytes."""

from __future__ import annotations

from tests.conform.fake_server import FakeServer
from tests.conform.util import fake_options
from zqbench.conform import run_conformance


def _openai_3(**server: object):
    with FakeServer(**server) as srv:  # type: ignore[arg-type]
        report = run_conformance(fake_options(srv.base_url, only=("api.openai",)))
    return next(o for o in report.outcomes if o.id == "api.openai.3")


def test_a_coalescing_stream_passes_with_its_bytes_in_the_evidence() -> None:
    result = _openai_3(coalesce=True)
    assert result.status == "pass", result.reason
    assert result.reason == "8 tokens reported in 7 chunks: 1 carried in a chunk with another"
    evidence = result.evidence
    assert (evidence["usage_output_tokens"], evidence["text_events"]) == (8, 7)
    assert '"content": "aa"' in evidence["stream"]  # the chunk that carried two


def test_more_chunks_than_tokens_still_fails() -> None:
    result = _openai_3(faults={"o_extra_chunk"})
    assert result.status == "fail"
    assert result.reason == "usage says 8 output tokens, 9 were streamed"
    assert evidence_has_stream(result.evidence)


def evidence_has_stream(evidence: dict) -> bool:
    return "data: " in evidence["stream"]
