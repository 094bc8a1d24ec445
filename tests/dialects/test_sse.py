from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.dialects.frames import A_STREAM, split_at
from zqbench.dialects.sse import SSEDecoder, SSEEvent


def decode_all(pieces, **kw):
    dec = SSEDecoder(**kw)
    out = []
    for p in pieces:
        out.extend(dec.feed(p))
    return out, dec


def test_basic_fields_and_defaults():
    stream = (
        b": a comment\n"
        b"event: greet\nid: 7\ndata: hello\n\n"
        b"data: no event line\n\n"
        b"retry: 2500\nretry: 12x\n\n"  # no data: nothing dispatched
        b"data:no space\nunknown: field\nfieldonly\n\n"
    )
    events, dec = decode_all([stream])
    assert events == [
        SSEEvent("greet", "hello", "7"),
        SSEEvent("message", "no event line", "7"),  # the last id persists
        SSEEvent("message", "no space", "7"),
    ]
    assert dec.error is None


def test_multiline_data_and_empty_data_lines():
    events, _ = decode_all([b"data: a\ndata:\ndata:  b\ndata\n\n"])
    assert events == [SSEEvent("message", "a\n\n b\n", "")]


def test_blank_line_without_data_resets_event_type():
    events, _ = decode_all([b"event: x\n\ndata: d\n\n"])
    assert events == [SSEEvent("message", "d", "")]


def test_id_with_nul_is_ignored():
    events, _ = decode_all([b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n"])
    assert [e.id for e in events] == ["1", "1"]


def test_bom_is_dropped_even_when_split():
    stream = b"\xef\xbb\xbfdata: x\n\n"
    for cut in range(len(stream) + 1):
        events, dec = decode_all(split_at(stream, [cut]))
        assert events == [SSEEvent("message", "x", "")], cut
        assert dec.error is None


def test_line_endings_are_equivalent_under_every_split():
    want, _ = decode_all([A_STREAM])
    assert len(want) == 10
    for ending in (b"\r\n", b"\r", b"\n"):
        stream = A_STREAM.replace(b"\n", ending)
        for cut in range(len(stream) + 1):
            got, dec = decode_all(split_at(stream, [cut]))
            assert got == want, (ending, cut)
            assert dec.error is None


def test_mixed_line_endings_and_byte_by_byte():
    stream = b"data: a\r\ndata: b\rdata: c\n\r\nevent: e\r\rdata: d\r\n\n"
    want = [SSEEvent("message", "a\nb\nc", ""), SSEEvent("message", "d", "")]
    assert decode_all([stream])[0] == want
    assert decode_all([stream[i : i + 1] for i in range(len(stream))])[0] == want


def test_cr_then_lf_in_next_piece_is_one_line_ending():
    # "\r" | "\n": had the "\n" been a second line ending, the blank line would dispatch early.
    events, _ = decode_all([b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"])
    assert events == [SSEEvent("message", "a\nb", "")]


def test_multibyte_char_split_everywhere():
    stream = "data: ☃ wörld 😀\n\n".encode()
    for cut in range(len(stream) + 1):
        for cut2 in range(cut, len(stream) + 1):
            events, dec = decode_all(split_at(stream, [cut, cut2]))
            assert events == [SSEEvent("message", "☃ wörld 😀", "")]
            assert dec.error is None


def test_invalid_utf8_is_flagged_and_earlier_events_kept_for_every_split():
    stream = b"data: one\n\ndata: tw\xff o\n\ndata: three\n\n"
    for cut in range(len(stream) + 1):
        events, dec = decode_all(split_at(stream, [cut]))
        assert events == [SSEEvent("message", "one", "")], cut
        assert dec.error == "bad_sse"
    assert dec.feed(b"data: more\n\n") == []  # stays stopped


def test_truncated_utf8_sequence_followed_by_ascii_is_invalid():
    events, dec = decode_all([b"data: \xe2\x98", b"x\n\n"])
    assert events == [] and dec.error == "bad_sse"


def test_finish_returns_pending_event_only():
    dec = SSEDecoder()
    assert dec.feed(b"data: a\n\ndata: b") == [SSEEvent("message", "a", "")]
    assert dec.finish() == SSEEvent("message", "b", "")
    assert dec.finish() is None
    dec = SSEDecoder()
    dec.feed(b"event: x\n")
    assert dec.finish() is None


def test_caps_bound_memory():
    # One long line, whole or in pieces.
    for pieces in ([b"data: " + b"x" * 200 + b"\n\n"], [b"data: "] + [b"x" * 10] * 20):
        events, dec = decode_all(pieces, max_event_chars=100)
        assert events == [] and dec.error == "bad_sse"
    # Many short data lines that never end the event.
    events, dec = decode_all([b"data: xxxxxxxxx\n" * 20], max_event_chars=100)
    assert events == [] and dec.error == "bad_sse"


def test_long_line_in_many_pieces_is_fine_under_the_cap():
    pieces = [b"data: "] + [b"y" * 1000] * 1000 + [b"\n\n"]
    events, dec = decode_all(pieces)
    assert dec.error is None
    assert len(events) == 1 and len(events[0].data) == 1_000_000


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(A_STREAM)), max_size=30))
def test_random_splits_give_the_same_events(cuts):
    want, _ = decode_all([A_STREAM])
    assert decode_all(split_at(A_STREAM, cuts))[0] == want


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=10))
def test_garbage_never_raises(pieces):
    dec = SSEDecoder(max_event_chars=64)
    for p in pieces:
        dec.feed(p)
    dec.finish()
