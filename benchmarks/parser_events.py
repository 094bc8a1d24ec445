"""What a streamed token event costs the response parser, in process (#43).

    taskset -c 0 .venv/bin/python benchmarks/parser_events.py

Feeds `--events` token events, one piece each as a stream's reads bring them, to a fresh
parser of each API (OpenAI chat chunks in vLLM's shape; Anthropic `content_block_delta`
events), best of `--rounds`, and prints microseconds an event. Texts: plain words, which a
repeated event's template reads without SSE or JSON (dialects/parser.py, `_repeat`); words
in quotes with a newline (JSON escapes, as code streams have), every one or one in four;
and, worst case, chunks that each carry a different counter, so no template is ever used.
Last, the whole read chain of an HTTP/1.1 connection above the socket: each read handed to
the connection's protocol as a StampedTransport hands it (`data_received_at`), its chunked
framing, the parser and the response's end, 100 token events a response.
Run it from two checkouts to compare commits (`PYTHONPATH=<checkout>`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zqbench.dialects.anthropic import AnthropicParser
from zqbench.dialects.openai import OpenAIParser
from zqbench.transport.base import Exchange
from zqbench.transport.raw_h1 import _Conn


def openai_piece(text: str, created: int = 1) -> bytes:
    chunk = {
        "id": "chatcmpl-abc",
        "object": "chat.completion.chunk",
        "created": created,
        "model": "mock",
        "choices": [{"index": 0, "delta": {"content": text}, "logprobs": None,
                     "finish_reason": None}],
    }  # fmt: skip
    return f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n".encode()


def anthropic_piece(text: str) -> bytes:
    obj = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}
    return (
        f"event: content_block_delta\ndata: {json.dumps(obj, separators=(',', ':'))}\n\n".encode()
    )


def per_event_us(parser_cls: type, pieces: list[bytes], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        parser = parser_cls(True)
        parser.on_headers(200, {}, 0)
        t = time.perf_counter()
        for k, piece in enumerate(pieces):
            parser.on_data(piece, k)
        best = min(best, (time.perf_counter() - t) / len(pieces) * 1e6)
        assert parser.summary.error is None and len(parser.summary.token_times) == len(pieces)
    return best


def chunk(piece: bytes) -> bytes:
    return b"%x\r\n" % len(piece) + piece + b"\r\n"


HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)


class _NullTransport:
    """What the connection asks of its transport while reading; nothing is written."""

    def write(self, data: bytes) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def abort(self) -> None:
        pass

    def is_closing(self) -> bool:
        return False


def chain_per_event_us(responses: int, rounds: int, tokens: int = 100) -> float:
    """One read per token event, as a StampedTransport hands reads to an HTTP/1.1 connection,
    through the chunked framing and the parser to the response's end."""
    reads = [HEAD, chunk(openai_piece("")) + chunk(openai_piece(" tok0"))]
    reads += [chunk(openai_piece(f" tok{i % 7}")) for i in range(1, tokens)]
    finish = (
        b'data: {"id":"chatcmpl-abc","object":"chat.completion.chunk","created":1,"model":"mock",'
        b'"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}]}\n\n'
    )
    reads[-1] += chunk(finish) + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"

    async def run() -> float:
        conn = _Conn(1 << 30, lambda c: None)
        conn.connection_made(_NullTransport())  # type: ignore[arg-type]
        best = float("inf")
        for _ in range(rounds):
            t = time.perf_counter()
            for _ in range(responses):
                parser = OpenAIParser(True)
                done = conn.request(b"", False, parser, Exchange())
                for k, piece in enumerate(reads):
                    conn.data_received_at(piece, k)
                assert done.done() and parser.summary.error is None
            best = min(best, (time.perf_counter() - t) / (responses * tokens) * 1e6)
        assert len(parser.summary.token_times) == tokens + 1  # the role chunk's "" counts
        return best

    return asyncio.run(run())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    texts = {
        "plain": lambda i: f" tok{i % 7}",
        "escaped": lambda i: f' "tok{i % 7}"\n',  # every text has quotes and a newline
        "1 in 4 escaped": lambda i: f" tok{i % 7}" if i % 4 else f' "tok{i % 7}"\n',
    }
    for api, cls, make in (
        ("openai", OpenAIParser, openai_piece),
        ("anthropic", AnthropicParser, anthropic_piece),
    ):
        for kind, text in texts.items():
            pieces = [make(text(i)) for i in range(args.events)]
            us = per_event_us(cls, pieces, args.rounds)
            print(f"{api:9s} {kind:22s} {us:5.2f} us a token event")
    # A server whose every chunk differs beyond its text (a counter): no template is ever
    # used, and past three unused ones the parser stops trying.
    pieces = [openai_piece(f" tok{i % 7}", created=i) for i in range(args.events)]
    us = per_event_us(OpenAIParser, pieces, args.rounds)
    print(f"{'openai':9s} {'a counter in each chunk':22s} {us:5.2f} us a token event")
    us = chain_per_event_us(args.events // 100, args.rounds)
    print(f"{'openai':9s} {'HTTP/1.1 read chain':22s} {us:5.2f} us a token event")


if __name__ == "__main__":
    main()
