"""A small zero-queue endpoint (both APIs, HTTP/1.1, asyncio) that breaks one rule on request.

`FakeServer(faults={"refuse_429"})` runs in a thread on a loopback port. With no faults it
passes every conformance check; each fault in FAULTS violates the rule of exactly one check
(the value; a tuple where breaking one rule honestly breaks another too), which is what
tests/conform/test_faults.py proves. Tokens are the letter "a", one per `token_s` seconds;
`slots` requests run at once (GET /health says `slots`), the rest are refused (529 on the
Anthropic route, 503 on the OpenAI one) with Retry-After. A client that hangs up frees its
slot at the next token the server fails to write. Asked to think (the `thinking` object, on
either route), its first `budget_tokens` tokens are thinking; a named tool_choice gets a call
of that tool whose arguments fill max_tokens, one piece a token, as the reference server's.

For the target resolver's tests: `models` are the ids it serves and GET /v1/models lists
(None: that route answers 404; `models_body`: what it answers instead), `apis` the routes
it serves (another API's route answers 404 `{"detail": "Not Found"}`, as vLLM's FastAPI
does), and `requests` records the method, path and headers of every request but /health
(and /metrics).

`FakeServer(queue=True)` has vLLM's shape instead: past `slots` requests wait, first come
first served, for a slot (never refused, never timed out), then stream 200 like the others;
/health holds no capacity and GET /metrics serves `vllm:num_requests_running` and
`vllm:num_requests_waiting`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from typing import Any

from tests.dialects.frames import VLLM_REFUSAL_ANTHROPIC, VLLM_REFUSAL_OPENAI

# fault -> the check it must make fail (or the checks: each tuple says why)
FAULTS: dict[str, str | tuple[str, ...]] = {
    "a_body_shape": "api.anthropic.1",
    # Every stream out of order: .6's and .7's streams are held to .2's rules too.
    "a_stream_order": ("api.anthropic.2", "api.anthropic.6", "api.anthropic.7"),
    "a_extra_chunk": "api.anthropic.3",
    "a_stop_reason": "api.anthropic.4",
    "a_models": "api.anthropic.5",
    "o_body_shape": "api.openai.1",
    "o_no_done": ("api.openai.2", "api.openai.6", "api.openai.7"),
    "o_extra_chunk": "api.openai.3",
    "o_stop_reason": "api.openai.4",
    "o_models": "api.openai.5",
    # A called tool's pieces that join into no JSON object: vLLM 0.32's Messages route
    # streams the random model's '1499e' so; the OpenAI route's `null`.
    "a_tool_args": "api.anthropic.6",
    "o_tool_args": "api.openai.6",
    "a_thinking_unsigned": "api.anthropic.7",  # no signature_delta closes the thinking block
    "o_reasoning_late": "api.openai.7",  # a reasoning piece after the answer began
    "missing_422": "errors.1",
    "invalid_plaintext": "errors.2",
    "unknown_model_400": "errors.3",
    "oversize_400": "errors.4",
    "wrong_method_404": "errors.5",
    "no_auth": "errors.6",
    "bad_utf8_500": "errors.7",
    "close_each": "http.1",
    "no_h2": "http.2",
    "no_timing": "zeroqueue.1",  # received only: instrumentation that is there but short
    # None of the reference server's instrumentation, as an engine (vLLM, llama.cpp): no
    # X-Request-*-Time stamp, /health without dispatch_jitter_us. Fails only where required.
    "uninstrumented": ("zeroqueue.1", "zeroqueue.4"),
    "timing_disorder": "zeroqueue.2",
    "late_start": "zeroqueue.2",
    "slow_dispatch": "zeroqueue.3",
    "health_no_jitter": "zeroqueue.4",
    "hidden_queue": "zeroqueue.5",
    "drop_on_overload": "zeroqueue.6",
    "refuse_429": "zeroqueue.7",
    # 200 text/event-stream with the overload error inside, before any token: each API's own
    # error object (Anthropic `event: error` overloaded_error; OpenAI an `error` chunk, code
    # 503, then [DONE]); `refuse_in_stream_vllm`: the bytes vLLM 0.32 sends for it, both
    # routes (tests/dialects/frames.py).
    "refuse_in_stream": "zeroqueue.7",
    "refuse_in_stream_vllm": "zeroqueue.7",
    "slow_refusal": "zeroqueue.8",
    "no_retry_after": "zeroqueue.9",
    "sticky_refusal": "zeroqueue.10",
    # Every third short request (4 tokens or fewer: the at-rest probes' size) that finds
    # every slot free is refused: false refusals at rest (.11), and after the burst no five
    # admissions in a row (.10), as the "refuses every third request while idle"
    # would. The longer requests of api.*, errors.* and the load checks are spared.
    "refuse_idle": ("zeroqueue.10", "zeroqueue.11"),
    # Retry-After 0 ("come back now") while every slot is busy with the burst's generations.
    "retry_after_lies": "zeroqueue.12",
    # A stream whose client hung up keeps its slot until its generation would have ended.
    "keep_cancelled": "zeroqueue.13",
    "wrong_header": "headers.1",
}
MODEL = "fake-zq"
BUSY_DELAY_S = 0.05  # FakeServer.busy_for
BODY_LIMIT = 1024 * 1024
PATHS = {"/v1/messages": "anthropic", "/v1/chat/completions": "openai"}
REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Payload Too Large",
    422: "Unprocessable",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
    529: "Overloaded",
}


class Refuse(Exception):
    pass


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def error_body(api: str, status: int, message: str) -> bytes:
    kind = {
        400: "invalid_request_error",
        401: "authentication_error",
        404: "not_found_error",
        413: "request_too_large",
        429: "rate_limit_error",
        529: "overloaded_error",
    }
    if api == "anthropic":
        obj: dict[str, Any] = {
            "type": "error",
            "error": {"type": kind.get(status, "api_error"), "message": message},
        }
    else:
        obj = {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            }
        }
    return json.dumps(obj).encode()


class FakeServer:
    def __init__(
        self,
        faults: frozenset[str] | set[str] = frozenset(),
        *,
        slots: int = 2,
        token_s: float = 0.003,
        api_key: str | None = None,
        models: tuple[str, ...] | None = (MODEL,),
        apis: tuple[str, ...] = ("anthropic", "openai"),
        models_body: bytes | None = None,
        queue: bool = False,
        any_model: bool = False,
        props: bool = False,
        hang_up_stalls: int = 0,
        hang_up_stall_s: float = BUSY_DELAY_S,
        shared_prefill_s: float = 0.0,
        rejection_reason: str | None = None,
    ) -> None:
        unknown = set(faults) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown faults {unknown}")
        self.faults = frozenset(faults)
        self.slots = slots
        self.token_s = token_s
        self.api_key = api_key
        self.models = models
        # As llama.cpp's server: any model asked for is answered, by the one it serves.
        self.any_model = any_model
        # As llama.cpp's server too: /health says nothing of capacity, GET /props has
        # `total_slots`.
        self.props = props
        self.busy_until = 0.0  # busy_for
        # As a GC pause or a descheduled engine: after each of the first `hang_up_stalls`
        # rounds of client hang-ups, the next `slots` admissions each come `hang_up_stall_s`
        # late.
        self.hang_up_stalls = hang_up_stalls
        self.hang_up_stall_s = hang_up_stall_s
        self.stalls_left = 0
        # As vLLM on one core: a request admitted beside others waits this long for its
        # first token, their prefills sharing the core.
        self.shared_prefill_s = shared_prefill_s
        # As vLLM's admission control: GET /metrics also counts the refusals
        # (vllm:admission_rejections_total) under this `reason` label, whatever it holds (a
        # hostile target's text: the exposition escapes only \\, \" and newlines).
        self.rejection_reason = rejection_reason
        self.apis = apis
        self.models_body = models_body
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.queue = queue
        self.in_use = 0
        self.waiting = 0
        self.refuse_until = 0.0
        self.idle_arrivals = 0  # refuse_idle: short requests that found every slot free
        self.full_refusals: list[float] = []  # sticky_refusal: when it last refused, full
        self.refusals = 0  # requests refused, in any form (the ground truth of a count)
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._freed: asyncio.Condition | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # ------------------------------------------------------------ lifecycle
    def __enter__(self) -> FakeServer:
        ready = threading.Event()

        def main() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._freed = asyncio.Condition()
            self._server = loop.run_until_complete(
                asyncio.start_server(self._conn, "127.0.0.1", 0, limit=4 * BODY_LIMIT)
            )
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=main, daemon=True)
        self._thread.start()
        ready.wait(5)
        return self

    def busy_for(self, seconds: float) -> None:
        """Leftover work, as a one-core llama.cpp tokenizing errors.4's 32 MiB prompt long
        after answering it: for `seconds`, each first token comes BUSY_DELAY_S late."""
        self.busy_until = time.monotonic() + seconds

    def __exit__(self, *exc: object) -> None:
        loop, server = self._loop, self._server
        if loop and server:

            async def shutdown() -> None:
                server.close()
                tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                loop.stop()

            asyncio.run_coroutine_threadsafe(shutdown(), loop)
        if self._thread:
            self._thread.join(5)

    # ------------------------------------------------------------ HTTP/1.1
    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception, asyncio.CancelledError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if head.startswith(b"PRI "):  # an HTTP/2 preface: this server speaks 1.1 only
                    break
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        k, v = line.split(":", 1)
                        headers[k.strip().lower()] = v.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                received = time.time()
                keep = await self._handle(writer, method, path, headers, body, received)
                if not keep or "close_each" in self.faults:
                    break
        writer.close()

    def _head(self, status: int, headers: list[tuple[str, str]]) -> bytes:
        base = [("x-scheduler", "fifo" if "wrong_header" in self.faults else "zero-queue")]
        if "close_each" in self.faults:
            base.append(("connection", "close"))
        lines = [f"HTTP/1.1 {status} {REASONS.get(status, 'X')}"]
        lines += [f"{k}: {v}" for k, v in base + headers]
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    async def _full(
        self,
        w: asyncio.StreamWriter,
        status: int,
        body: bytes,
        headers: list[tuple[str, str]] = (),
        ctype: str = "application/json",
    ) -> bool:
        """Answers `body` whole; True: the connection stays open."""
        w.write(
            self._head(
                status, [("content-type", ctype), ("content-length", str(len(body))), *headers]
            )
            + body
        )
        await w.drain()
        return True

    def _sse_head(self, w: asyncio.StreamWriter, stamps: list[tuple[str, str]]) -> None:
        """A 200 event stream's head; its events follow as chunks."""
        sse = [("content-type", "text/event-stream"), ("transfer-encoding", "chunked")]
        w.write(self._head(200, [*sse, *stamps]))

    async def _chunk(self, w: asyncio.StreamWriter, data: bytes) -> None:
        w.write(b"%x\r\n%s\r\n" % (len(data), data))
        await w.drain()

    # ------------------------------------------------------------ routes
    async def _handle(self, w, method, path, headers, body, received) -> bool:
        stamps = [("x-request-received-time", f"{received:.6f}")]
        if "uninstrumented" in self.faults:
            stamps = []
        if path == "/health":
            obj: dict[str, Any] = {"status": "healthy", "dispatch_jitter_us": 12.5}
            if not self.queue and not self.props:  # vLLM's shape advertises no capacity
                obj["slots"] = self.slots
            if self.faults & {"health_no_jitter", "uninstrumented"}:
                del obj["dispatch_jitter_us"]
            return await self._full(w, 200, json.dumps(obj).encode(), stamps)
        if path == "/props" and self.props:
            props = {"total_slots": self.slots, "model_path": "fake.gguf"}
            return await self._full(w, 200, json.dumps(props).encode(), stamps)
        if path == "/metrics" and (self.queue or self.rejection_reason is not None):
            return await self._full(w, 200, self._metrics(), stamps, "text/plain; version=0.0.4")
        self.requests.append((method, path, headers))
        if path in PATHS and PATHS[path] not in self.apis:
            return await self._full(w, 404, b'{"detail":"Not Found"}', stamps)
        api = PATHS.get(path, "anthropic" if "anthropic-version" in headers else "openai")
        allowed = "GET" if path == "/v1/models" else "POST"
        if path not in PATHS and path != "/v1/models":
            return await self._full(w, 404, error_body(api, 404, "no route"), stamps)
        if method != allowed:
            status = 404 if "wrong_method_404" in self.faults else 405
            return await self._full(
                w, status, error_body(api, status, "method"), [*stamps, ("allow", allowed)]
            )
        if self.api_key and self.api_key not in (
            headers.get("x-api-key"),
            headers.get("authorization", "")[7:],
        ):
            return await self._full(w, 401, error_body(api, 401, "no key"), stamps)
        if path == "/v1/models" and self.models_body is not None:
            return await self._full(w, 200, self.models_body, stamps)
        if path == "/v1/models" and self.models is None:
            return await self._full(w, 404, b'{"detail":"Not Found"}', stamps)
        if path == "/v1/models":
            return await self._full(w, 200, self._models(), stamps)
        try:
            req = self._parse(api, body)
        except BadRequest as e:
            if e.status == 400 and "invalid_plaintext" in self.faults and "invalid" in str(e):
                return await self._full(w, 400, b"bad request", stamps, "text/plain")
            return await self._full(w, e.status, error_body(api, e.status, str(e)), stamps)
        return await self._generate(w, api, req, received, stamps)

    def _metrics(self) -> bytes:
        labels = f'{{engine="0",model_name="{MODEL}"}}'
        return (
            "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
            "# TYPE vllm:num_requests_running gauge\n"
            f"vllm:num_requests_running{labels} {float(self.in_use)}\n"
            "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n"
            "# TYPE vllm:num_requests_waiting gauge\n"
            f"vllm:num_requests_waiting{labels} {float(self.waiting)}\n" + self._rejections()
        ).encode()

    def _rejections(self) -> str:
        if self.rejection_reason is None:
            return ""
        reason = self.rejection_reason.replace("\\", "\\\\").replace('"', '\\"')
        reason = reason.replace("\n", "\\n")
        return (
            "# TYPE vllm:admission_rejections counter\n"
            f'vllm:admission_rejections_total{{reason="{reason}"}} {float(self.refusals)}\n'
        )

    def _models(self) -> bytes:
        models = self.models or ()
        if len(models) != 1:  # none, or several: the shape vLLM lists them in
            data = [{"id": m, "object": "model"} for m in models]
            return json.dumps({"object": "list", "data": data}).encode()
        m: dict[str, Any] = {
            "id": models[0],
            "type": "model",
            "display_name": "fake",
            "created_at": "2026-01-01T00:00:00Z",
            "object": "model",
            "created": 1767225600,
            "owned_by": "tests",
        }
        page: dict[str, Any] = {
            "object": "list",
            "data": [m],
            "has_more": False,
            "first_id": models[0],
            "last_id": models[0],
        }
        if "a_models" in self.faults:
            del m["type"], page["has_more"]
        if "o_models" in self.faults:
            del m["object"], m["owned_by"], page["object"]
        return json.dumps(page).encode()

    def _parse(self, api: str, body: bytes) -> dict[str, Any]:
        if len(body) > BODY_LIMIT:
            raise BadRequest(400 if "oversize_400" in self.faults else 413, "too large")
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise BadRequest(500 if "bad_utf8_500" in self.faults else 400, "not UTF-8") from None
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):
            raise BadRequest(400, "not JSON") from None
        if not isinstance(obj, dict):
            raise BadRequest(400, "invalid: not an object")
        required = (
            ("model", "messages", "max_tokens") if api == "anthropic" else ("model", "messages")
        )
        for name in required:
            if name not in obj:
                raise BadRequest(422 if "missing_422" in self.faults else 400, f"{name}: missing")
        max_tokens = obj.get("max_tokens", 16)
        msgs = obj["messages"]
        if not isinstance(obj["model"], str):
            raise BadRequest(400, "invalid model")
        if (
            not isinstance(max_tokens, int)
            or isinstance(max_tokens, bool)
            or not 1 <= max_tokens <= 4096
        ):
            raise BadRequest(400, "invalid max_tokens")
        if not isinstance(msgs, list) or not msgs:
            raise BadRequest(400, "invalid messages")
        for m in msgs:
            if not isinstance(m, dict) or m.get("role") not in ("user", "assistant"):
                raise BadRequest(400, "invalid message")
            if not isinstance(m.get("content"), (str, list)):
                raise BadRequest(400, "invalid content")
            if isinstance(m["content"], list) and not all(
                isinstance(b, dict) and b.get("type") == "text" for b in m["content"]
            ):
                raise BadRequest(400, "invalid content block")
        if not isinstance(obj.get("stream", False), bool):
            raise BadRequest(400, "invalid stream")
        if obj["model"] not in (self.models or (MODEL,)) and not self.any_model:
            status = 400 if "unknown_model_400" in self.faults else 404
            raise BadRequest(status, f"The model `{obj['model']}` does not exist.")
        return {
            "stream": obj.get("stream", False),
            "max_tokens": max_tokens,
            "tool": _named_tool(obj.get("tool_choice")),
            "thinking": _budget(obj.get("thinking")),
        }

    # ------------------------------------------------------------ admission and generation
    async def _admit(self, max_tokens: int) -> None:
        if time.monotonic() < self.busy_until:
            await asyncio.sleep(BUSY_DELAY_S)
        if self.stalls_left > 0:
            self.stalls_left -= 1
            await asyncio.sleep(self.hang_up_stall_s)
        now = time.monotonic()
        sticky = "sticky_refusal" in self.faults and now < self.refuse_until
        if "refuse_idle" in self.faults and max_tokens <= 4 and self.in_use == 0:
            self.idle_arrivals += 1
            if self.idle_arrivals % 3 == 0:
                raise Refuse
        if self.in_use < self.slots and not sticky:
            self.in_use += 1
            return
        if self.queue or ("hidden_queue" in self.faults and self.waiting < 3 * self.slots):
            self.waiting += 1
            async with self._freed:
                await self._freed.wait_for(lambda: self.in_use < self.slots)
            self.waiting -= 1
            self.in_use += 1
            return
        if "sticky_refusal" in self.faults and now >= self.refuse_until:
            # Armed by a burst of refusals (8 within 50 ms: the overload burst's 10, not a
            # slope step's 6), so the slope's steps see no refusal with a slot free.
            self.full_refusals = [t for t in self.full_refusals if t > now - 0.05] + [now]
            if len(self.full_refusals) >= 8:
                self.refuse_until = now + 2.5
        raise Refuse

    async def _release(self) -> None:
        self.in_use -= 1
        async with self._freed:
            self._freed.notify_all()

    async def _refuse(self, w, api: str, stamps) -> bool:
        self.refusals += 1
        if "drop_on_overload" in self.faults:
            return False  # close without an answer
        if "slow_refusal" in self.faults:
            await asyncio.sleep(0.4)
        status = 429 if "refuse_429" in self.faults else (529 if api == "anthropic" else 503)
        headers = list(stamps)
        if "no_retry_after" not in self.faults:
            wait = "1"
            if "retry_after_lies" in self.faults:
                wait = "0"
            elif "sticky_refusal" in self.faults:
                wait = "3"  # the truth: its refusals go on for 2.5 s
            headers.append(("retry-after", wait))
        if self.faults & {"refuse_in_stream", "refuse_in_stream_vllm"}:
            self._sse_head(w, stamps)
            await self._chunk(w, self._in_stream_refusal(api))
            await self._chunk(w, b"")
            return True
        return await self._full(w, status, error_body(api, status, "overloaded"), headers)

    def _in_stream_refusal(self, api: str) -> bytes:
        if "refuse_in_stream_vllm" in self.faults:
            return VLLM_REFUSAL_ANTHROPIC if api == "anthropic" else VLLM_REFUSAL_OPENAI
        if api == "anthropic":
            err = {"type": "error", "error": {"type": "overloaded_error", "message": "full"}}
            return b"event: error\ndata: " + json.dumps(err).encode() + b"\n\n"
        err = {"error": {"message": "full", "type": "server_busy", "param": None, "code": 503}}
        return b"data: " + json.dumps(err).encode() + b"\n\ndata: [DONE]\n\n"

    async def _generate(self, w, api, req, received, stamps) -> bool:
        try:
            await self._admit(req["max_tokens"])
        except Refuse:
            return await self._refuse(w, api, stamps)
        try:
            if self.shared_prefill_s and self.in_use > 1:
                await asyncio.sleep(self.shared_prefill_s)
            if "slow_dispatch" in self.faults:
                await asyncio.sleep(0.02)
            # Admission is synchronous (no await since `received`), so dispatch is that same
            # moment; a stamp taken here would only measure this thread's GIL waits.
            dispatch = time.time() if "slow_dispatch" in self.faults else received
            if "timing_disorder" in self.faults:
                dispatch = received - 0.01
            start = time.time()
            if "hidden_queue" in self.faults:
                start = dispatch  # the lie that hides the queue
            if "late_start" in self.faults:
                start = received + 0.5
            if not self.faults & {"no_timing", "uninstrumented"}:
                stamps = [
                    *stamps,
                    ("x-request-dispatch-time", f"{dispatch:.6f}"),
                    ("x-request-start-time", f"{start:.6f}"),
                ]
            if req["stream"]:
                t0 = time.monotonic()
                try:
                    await self._stream(w, api, req, stamps)
                except OSError:  # the client hung up (a failed write): the slot frees now...
                    if self.hang_up_stalls > 0 and self.stalls_left == 0:
                        self.hang_up_stalls -= 1
                        self.stalls_left = self.slots
                    if "keep_cancelled" in self.faults:  # ...unless it generates on for nobody
                        end = t0 + self.token_s * req["max_tokens"]
                        await asyncio.sleep(max(0.0, end - time.monotonic()))
                    raise
            else:
                await asyncio.sleep(self.token_s * req["max_tokens"])
                await self._full(w, 200, self._body(api, req["max_tokens"]), stamps)
        finally:
            await self._release()
        return True

    def _reason(self, api: str) -> str:
        if api == "anthropic":
            return "end_turn" if "a_stop_reason" in self.faults else "max_tokens"
        return "stop" if "o_stop_reason" in self.faults else "length"

    def _body(self, api: str, n: int) -> bytes:
        if api == "anthropic":
            obj: dict[str, Any] = {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": [{"type": "text", "text": "a" * n}],
                "stop_reason": self._reason(api),
                "stop_sequence": None,
                "usage": {"input_tokens": 3, "output_tokens": n},
            }
            if "a_body_shape" in self.faults:
                del obj["role"]
        else:
            obj = {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": MODEL,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "a" * n},
                        "finish_reason": self._reason(api),
                    }
                ],
                "usage": {"prompt_tokens": 3, "completion_tokens": n, "total_tokens": n + 3},
            }
            if "o_body_shape" in self.faults:
                obj["object"] = "chat.completions"
        return json.dumps(obj).encode()

    def _answer(self, api: str, req: dict[str, Any]) -> tuple[int, list[str], str | None]:
        """What a streamed answer holds (every token an "a", as text is): its thinking
        tokens, then the named tool's arguments, one piece a token, filling max_tokens (as
        the reference server's do), or None: the text tokens that fill it."""
        n, tool = req["max_tokens"], req["tool"]
        thought = req["thinking"] or 0
        if tool is None:
            return thought, [], None
        args = '{"query": "' + "a" * max(0, n - 13) + '"}'
        if f"{api[0]}_tool_args" in self.faults:
            args = "1499e" if api == "anthropic" else "null"
        return thought, list(args), tool

    async def _stream(self, w, api: str, req: dict[str, Any], stamps) -> None:
        self._sse_head(w, stamps)
        n = req["max_tokens"]
        thought, pieces, tool = self._answer(api, req)

        async def ev(name: str | None, obj: Any) -> None:
            data = obj if isinstance(obj, str) else json.dumps(obj)
            prefix = f"event: {name}\n" if name else ""
            await self._chunk(w, f"{prefix}data: {data}\n\n".encode())

        extra = ("a_extra_chunk" if api == "anthropic" else "o_extra_chunk") in self.faults
        texts = n + 1 if extra else n
        if api == "anthropic":
            await ev(
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": "msg_1",
                        "type": "message",
                        "role": "assistant",
                        "model": MODEL,
                        "content": [],
                        "stop_reason": None,
                        "usage": {"input_tokens": 3, "output_tokens": 0},
                    },
                },
            )
            index = 0

            async def block(start: dict[str, Any], deltas: list[Any], paced: bool) -> None:
                nonlocal index
                head = {"type": "content_block_start", "index": index, "content_block": start}
                await ev("content_block_start", head)
                for d in deltas:
                    if paced:
                        await asyncio.sleep(self.token_s)
                    body = {"type": "content_block_delta", "index": index, "delta": d}
                    await ev("content_block_delta", body)
                await ev("content_block_stop", {"type": "content_block_stop", "index": index})
                index += 1

            if thought:
                signed = "a_thinking_unsigned" not in self.faults
                sign = [{"type": "signature_delta", "signature": "c2lnbmVk"}] if signed else []
                thinking = [{"type": "thinking_delta", "thinking": "a"}] * thought
                start = {"type": "thinking", "thinking": "", "signature": ""}
                await block(start, thinking + sign, False)
            if tool is not None:
                start = {"type": "tool_use", "id": "toolu_1", "name": tool, "input": {}}
                args = [{"type": "input_json_delta", "partial_json": c} for c in pieces]
                await block(start, args, False)
            else:
                text = [{"type": "text_delta", "text": "a"}] * (texts - thought)
                await block({"type": "text", "text": ""}, text, True)
            delta = {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use" if tool else self._reason(api)},
                "usage": {"output_tokens": n},
            }
            stop = {"type": "message_stop"}
            if "a_stream_order" in self.faults:
                await ev("message_stop", stop)
                await ev("message_delta", delta)
            else:
                await ev("message_delta", delta)
                await ev("message_stop", stop)
        else:

            def chunk(delta: dict[str, Any], reason: str | None = None) -> dict[str, Any]:
                return {
                    "id": "c1",
                    "object": "chat.completion.chunk",
                    "created": 1,
                    "model": MODEL,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": reason}],
                }

            await ev(None, chunk({"role": "assistant", "content": ""}))
            late = "o_reasoning_late" in self.faults and thought > 0
            for _ in range(thought - late):
                await ev(None, chunk({"reasoning": "a"}))
            if tool is not None:
                name = {"name": tool, "arguments": ""}
                await ev(
                    None,
                    chunk(
                        {
                            "tool_calls": [
                                {"index": 0, "id": "call_1", "type": "function", "function": name}
                            ]
                        }
                    ),
                )
                for c in pieces:
                    args = {"index": 0, "function": {"arguments": c}}
                    await ev(None, chunk({"tool_calls": [args]}))
            else:
                for _ in range(texts - thought):
                    await asyncio.sleep(self.token_s)
                    await ev(None, chunk({"content": "a"}))
            if late:
                await ev(None, chunk({"reasoning": "a"}))
            await ev(None, chunk({}, "tool_calls" if tool else self._reason(api)))
            usage = {"prompt_tokens": 3, "completion_tokens": n, "total_tokens": n + 3}
            if thought:
                usage["completion_tokens_details"] = {"reasoning_tokens": thought}
            await ev(None, {**chunk({}), "choices": [], "usage": usage})
            if "o_no_done" not in self.faults:
                await ev(None, "[DONE]")
        await self._chunk(w, b"")


def _named_tool(choice: Any) -> str | None:
    """The tool a tool_choice names, in either API's words (None: none named)."""
    if not isinstance(choice, dict):
        return None
    fn = choice.get("function")
    name = fn.get("name") if isinstance(fn, dict) else choice.get("name")
    return name if isinstance(name, str) else None


def _budget(thinking: Any) -> int | None:
    """The thinking tokens a `thinking` object asks for (None: none)."""
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens")
        return budget if isinstance(budget, int) else None
    return None
