"""A loopback OpenAI-style streaming server whose every Nth stream carries a malformed chunk.

    python benchmarks/malformed_stream_server.py PORT EVERY MODE

Each stream: 8 chunks 5 ms apart, then a finish chunk with usage and `[DONE]`. In every
EVERY-th stream (0: none) the 4th chunk is malformed: MODE `cut` (JSON cut short) or
`nested` (600 KB of `{"a":` nested objects, never closed). For benchmarks/malformed_streams.py.
"""

from __future__ import annotations

import asyncio
import json
import sys

PORT, EVERY, MODE = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
MODELS = json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).encode()
STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)
END = (
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}],'
    b'"usage":{"prompt_tokens":5,"completion_tokens":8}}\n\ndata: [DONE]\n\n'
)
BAD = {
    "cut": b'data: {"choices": [{"delta": {"content": "x"\n\n',
    "nested": b'data: {"choices": [{"delta": ' + b'{"a":' * 120_000 + b"\n\n",
}
count = 0


def chunk(text: str) -> bytes:
    obj = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    global count
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if length:
                await reader.readexactly(length)
            if head.startswith(b"GET"):
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(MODELS), MODELS)
                )
                await writer.drain()
                continue
            count += 1
            bad = EVERY and count % EVERY == 0
            writer.write(STREAM_HEAD)
            for i in range(8):
                piece = BAD[MODE] if bad and i == 3 else chunk("tok ")
                writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                await writer.drain()
                await asyncio.sleep(0.005)
            writer.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(END), END))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main() -> None:
    server = await asyncio.start_server(handle, "127.0.0.1", PORT)
    async with server:
        await server.serve_forever()


asyncio.run(main())
