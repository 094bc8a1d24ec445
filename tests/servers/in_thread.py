"""A `BaseHTTPRequestHandler` served on loopback in a thread of the test's own process,
for fake targets whose every answer a test writes by hand (an echoed key, a usage of
10^30, an engine's metrics). Timing tests use `ProgrammedServer` (its own process) instead.

    with serve(Handler) as url:          # "http://127.0.0.1:<port>"
        ...
    send_json(handler, 400, {...})       # inside a handler: status, JSON body, its length
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@contextmanager
def serve(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    # Polled every 20 ms, so shutdown() returns at once rather than after 0.5 s.
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def read_body(handler: BaseHTTPRequestHandler) -> bytes:
    length = int(handler.headers.get("content-length") or 0)
    return handler.rfile.read(length) if length else b""


def send_json(handler: BaseHTTPRequestHandler, status: int, doc: Any) -> None:
    body = json.dumps(doc).encode()
    handler.send_response(status)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)
