"""A loopback target that answers calibration-shaped requests badly, on a thread.

    with MisbehavingTarget(drip(b'{"input_tokens": 5}', every_s=1.0)) as target:
        target.base_url   # http://127.0.0.1:<port>

`GET /health` answers at once (the target is reachable); every non-streaming POST (a
calibration probe: a token count, or a max_tokens 1 request) gets the programmed answer; a
streaming POST (the load) gets a 503 at once, so a run's load ends quickly. Each answer
checks `stopping` between writes, so closing the server never waits for a drip to end.
Every POST's connection closes after its answer, and the answer says so (`connection:
close`): closing a connection the client may reuse would race with its next request ("Server
disconnected without sending a response", seen on a busy machine), a fault of its own.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

Answer = Callable[[BaseHTTPRequestHandler, threading.Event], None]


def drip(body: bytes, *, every_s: float) -> Answer:
    """A 200 whose head and body come one byte every `every_s` seconds."""

    def answer(handler: BaseHTTPRequestHandler, stopping: threading.Event) -> None:
        head = (
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n"
            + f"content-length: {len(body)}\r\n\r\n".encode()
        )
        for i in range(len(head + body)):
            if stopping.wait(every_s):
                return
            handler.wfile.write((head + body)[i : i + 1])
            handler.wfile.flush()

    return answer


def huge(n_bytes: int) -> Answer:
    """A 200 declaring `n_bytes` of JSON body, sent as fast as the client reads it."""

    def answer(handler: BaseHTTPRequestHandler, stopping: threading.Event) -> None:
        handler.send_response(200)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(n_bytes))
        handler.send_header("connection", "close")
        handler.end_headers()
        chunk = b" " * 65536
        sent = 0
        while sent < n_bytes and not stopping.is_set():
            piece = chunk[: n_bytes - sent]
            handler.wfile.write(piece)
            sent += len(piece)

    return answer


def slow(status: int, body: bytes, *, delay_s: float) -> Answer:
    """A whole answer, sent `delay_s` after the request."""

    def answer(handler: BaseHTTPRequestHandler, stopping: threading.Event) -> None:
        if stopping.wait(delay_s):
            return
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(body)))
        handler.send_header("connection", "close")
        handler.end_headers()
        handler.wfile.write(body)

    return answer


def usage_answer(api: str, prompt_tokens: int) -> bytes:
    """A non-streaming generation answer of `api` whose usage names `prompt_tokens`."""
    if api == "openai":
        return json.dumps(
            {
                "id": "c",
                "object": "chat.completion",
                "model": "m",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "x"},
                             "finish_reason": "length"}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 1,
                          "total_tokens": prompt_tokens + 1},
            }
        ).encode()  # fmt: skip
    return json.dumps(
        {
            "id": "m", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": "x"}], "stop_reason": "max_tokens",
            "usage": {"input_tokens": prompt_tokens, "output_tokens": 1},
        }
    ).encode()  # fmt: skip


class MisbehavingTarget:
    def __init__(self, answer: Answer, *, count_tokens: Answer | None = None) -> None:
        """`answer` for every non-streaming POST; `count_tokens`, if given, for that route."""
        self.stopping = threading.Event()
        target = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                body = b'{"status": "ok"}'
                self.send_response(200)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                request = json.loads(self.rfile.read(length) or b"{}")
                try:
                    if request.get("stream"):
                        self.send_error(503)
                    elif self.path.endswith("/count_tokens") and count_tokens is not None:
                        count_tokens(self, target.stopping)
                    else:
                        answer(self, target.stopping)
                except OSError:
                    pass  # the client gave up: that is what it should do
                self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        # A short poll: shutdown() waits for it (0.5 s by default, paid by every test).
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> MisbehavingTarget:
        self.thread.start()
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stopping.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def wait_for(condition: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()
