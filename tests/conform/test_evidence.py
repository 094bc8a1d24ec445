"""An exchange is judged by what the dialect's parser read from it: admitted, refused, refused
in the stream or failed; its first token; its usage; and its evidence stays bounded."""

from __future__ import annotations

from tests.conform.util import recorded
from tests.dialects.frames import A_ERROR_BODY, A_STREAM, a_frame
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


def test_a_large_body_is_counted_not_kept() -> None:
    ex = record(500, [b"x" * BODY_CAP, b"y" * 10])
    assert len(ex.body) == BODY_CAP and ex.body_len == BODY_CAP + 10
    assert ex.json() is None  # cut at the cap: not judged as JSON
    assert ex.evidence()["body"].endswith(f"... ({BODY_CAP - 300} more bytes)")
