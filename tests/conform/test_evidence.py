"""An exchange is judged by what the dialect's parser read from it: admitted, refused, refused
in the stream or failed; its first token; its usage; and its evidence stays bounded."""

from __future__ import annotations

from tests.conform.util import recorded
from tests.dialects.frames import (
    A_ERROR_BODY,
    A_STREAM,
    VLLM_REFUSAL_ANTHROPIC,
    VLLM_REFUSAL_OPENAI,
    VLLM_REFUSAL_WORDS,
    a_frame,
)
from zqbench.conform.evidence import BODY_CAP, Evidence
from zqbench.transport.base import ConnectionReset


def record(status: int, pieces: list[bytes], *, failure: bool = False) -> Evidence:
    error = ConnectionReset("peer reset") if failure else None
    return recorded("anthropic", pieces, status=status, error=error)


def test_an_admitted_stream_as_the_dialect_reads_it() -> None:
    cut = A_STREAM.index(b"text_delta")  # the first text event ends in the second piece
    ex = record(200, [A_STREAM[:cut], A_STREAM[cut:]])
    assert ex.admission == "admitted" and ex.error is None and ex.http_version == "HTTP/1.1"
    assert ex.text_events == 3 and ex.usage_output_tokens == 4 and ex.stop_reason == "max_tokens"
    assert ex.ttft_ms == 12.0  # ms from the send (t=0) to the piece that completed it
    assert ex.events[0][0].event == "message_start" and ex.events[-1][0].event == "message_stop"
    assert ex.body == A_STREAM and ex.t_first_byte == 11_000_000


def test_refusals_in_the_status_or_in_the_stream_and_failures() -> None:
    assert record(529, [A_ERROR_BODY]).admission == "refused"
    in_stream = a_frame("error", '{"type":"error","error":{"type":"overloaded_error"}}')
    assert record(200, [in_stream]).admission == "refused_in_stream"
    failed = record(200, [A_STREAM[:100]], failure=True)
    assert failed.admission == "failed" and failed.error == "reset"
    assert failed.evidence()["error"] == "reset"


def test_only_an_overload_error_before_any_token_is_a_refusal_in_disguise() -> None:
    """The dialect's refused_in_stream decides, as in `zqbench run`: another error inside a
    200 (no overload sign, or after a token) is a failure, not a refusal."""
    ex = recorded("openai", [VLLM_REFUSAL_OPENAI])
    assert ex.admission == "refused_in_stream" and ex.error_words() == VLLM_REFUSAL_WORDS
    ex = recorded("anthropic", [VLLM_REFUSAL_ANTHROPIC])
    assert ex.admission == "refused_in_stream"
    words = ex.error_words()
    assert words is not None and words.startswith("2 validation errors for ChatCompl")
    assert len(words) == 200  # the server's words, cut
    other = a_frame("error", '{"type":"error","error":{"type":"api_error","message":"boom"}}')
    ex = record(200, [other])
    assert (ex.admission, ex.answer_error, ex.error_words()) == (
        "failed",
        "stream_api_error",
        "boom",
    )
    late = a_frame("error", '{"type":"error","error":{"type":"overloaded_error","message":"x"}}')
    cut = A_STREAM.index(b"event: content_block_stop")  # after the three text events
    ex = record(200, [A_STREAM[:cut], late])
    assert (ex.admission, ex.answer_error) == ("failed", "stream_overloaded_error")
    assert record(200, [A_STREAM]).error_words() is None


def test_a_large_body_is_counted_not_kept() -> None:
    ex = record(500, [b"x" * BODY_CAP, b"y" * 10])
    assert len(ex.body) == BODY_CAP and ex.body_len == BODY_CAP + 10
    assert ex.json() is None  # cut at the cap: not judged as JSON
    assert ex.evidence()["body"].endswith(f"... ({BODY_CAP - 300} more bytes)")
