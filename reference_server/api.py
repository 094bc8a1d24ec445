"""The ASGI app: routes, auth, body limits, timing headers, and the generation handlers.

Raw ASGI, no framework: the per-request overhead is what a zero-queue server is
judged on. The handler reads the body, parses it in the route's dialect, asks
the scheduler for a slot, and only then answers: a refusal before any byte of a
response goes out, or a response head once compute has started, so the head
can carry all three timing headers.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import time
from typing import Any

from reference_server import anthropic_api, openai_api
from reference_server.backend import ComputeBackend, SamplingParams
from reference_server.config import ServerConfig
from reference_server.engine import Engine
from reference_server.errors import ApiError, render, stream_error_type
from reference_server.gpu_density import DensitySampler
from reference_server.metrics import Metrics
from reference_server.model import tokenizer
from reference_server.request import GenRequest, body_limit
from reference_server.scheduler import Scheduler
from reference_server.sequence import Sequence, State
from reference_server.trace import TorchCapture

log = logging.getLogger("reference_server")

Headers = list[tuple[bytes, bytes]]
_POST_ROUTES = ("/v1/messages", "/v1/messages/count_tokens", "/v1/chat/completions")
_GET_ROUTES = ("/v1/models", "/health", "/metrics")
_PROFILE_ROUTES = ("/start_profile", "/stop_profile")


class Disconnected(Exception):
    """The client went away: the engine dropped its sequence and posted "abort"."""


def _ts(t: float) -> bytes:
    return f"{t:.6f}".encode()


class App:
    def __init__(
        self, config: ServerConfig, backend: ComputeBackend, *, engine_why: str = ""
    ) -> None:
        self.config = config
        self.backend = backend
        self.engine_why = engine_why  # how `--engine auto` chose; "" when named
        self.scheduler = Scheduler(
            config.scheduler,
            max_slots=min(config.max_batch_size, backend.max_slots),
            kv_budget_tokens=config.kv_budget_tokens,
            queue_timeout_s=config.queue_timeout_s,
            dispatch_latency_target_us=config.dispatch_latency_target_us,
        )
        self.metrics = Metrics(config.scheduler, backend.name, backend.device, config.preset)
        self.metrics.slots.set(self.scheduler.max_slots)
        self.density = DensitySampler.start(
            backend.device, lambda: self.scheduler.num_slots_used > 0
        )
        if isinstance(self.density, DensitySampler):
            self.metrics.measure_gpu_density(self.density.density)
        else:
            self.metrics.no_gpu_density(self.density)
        self.engine: Engine | None = None
        self.models = (config.served_model_name, config.preset)
        self.in_flight = 0
        self._handlers: set[asyncio.Task[Any]] = set()  # the tasks running _http, for shutdown
        self.profiling = False  # between POST /start_profile and /stop_profile
        # Set by REFSERVER_TORCH_PROFILER_DIR: the profiling routes drive torch.profiler.
        self.torch_capture = TorchCapture.from_env()
        self._n_generations = 0  # numbers the generation requests, for derived seeds
        self._key = config.api_key.encode() if config.api_key else None
        self._common: Headers = [
            (b"x-engine", backend.name.encode()),
            (b"x-scheduler", config.scheduler.encode()),
        ]

    # ---- lifecycle --------------------------------------------------------------

    def start_engine(self) -> None:
        if self.engine is None:
            fixed = self.config.step_shape == "fixed"
            budget = self.config.prefill_budget_tokens if fixed else None
            self.engine = Engine(
                self.backend,
                self.scheduler,
                self.metrics,
                asyncio.get_running_loop(),
                prefill_budget=budget,
            )
            self.engine.start()
            engine = self.engine
            self.metrics.watch_dispatch_jitter(lambda: engine.dispatch_jitter_us() / 1e6)

    def stop_engine(self) -> None:
        if isinstance(self.density, DensitySampler):
            self.density.stop()
        if self.engine is not None:
            self.engine.stop()
            self.engine = None

    async def drain(self, timeout_s: float) -> bool:
        """Refuse new work; wait (bounded) for in-flight requests. True when all finished."""
        self.scheduler.draining = True
        deadline = time.monotonic() + timeout_s
        while self.in_flight and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return self.in_flight == 0

    def abort_in_flight(self) -> None:
        """End every request still being handled (after the drain timeout): a client
        holding a half-sent body must not keep the process alive."""
        for task in list(self._handlers):
            task.cancel()

    # ---- ASGI -------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                try:
                    self.start_engine()
                except Exception as exc:  # report to the server, which exits
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                self.stop_engine()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _http(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path: str = scope["path"]
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        dialect = (
            "openai"
            if path.startswith("/v1/chat")
            or ("anthropic-version" not in headers and not path.startswith("/v1/messages"))
            else "anthropic"
        )
        rid = "req_" + os.urandom(12).hex()
        resp = _Response(send, rid, self._common)
        resp.timing = self.config.timing_headers
        resp.trace_id = headers.get("x-request-id", "")[:128] or rid
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        self.in_flight += 1
        self.metrics.in_flight.inc()
        try:
            await self._route(scope, headers, path, receive, resp, dialect)
        except ApiError as err:
            await self._send_error(resp, err, dialect)
        except Disconnected:
            resp.status = 499
        except Exception:
            if resp.started:  # most likely the client went away mid-stream
                log.debug("response to %s ended early", path, exc_info=True)
            else:
                log.exception("unhandled error in %s %s", scope.get("method"), path)
                await self._send_error(resp, ApiError("api_error", "internal error"), dialect)
        finally:
            if task is not None:
                self._handlers.discard(task)
            self.in_flight -= 1
            self.metrics.in_flight.dec()
            known = path in _POST_ROUTES or path in _GET_ROUTES or path in _PROFILE_ROUTES
            route = path if known else "other"
            self.metrics.http_requests.labels(route, str(resp.status)).inc()

    async def _send_error(self, resp: _Response, err: ApiError, dialect: str) -> None:
        if resp.started:  # too late for a status: end the stream with an error event
            if not resp.finished:
                await resp.body_part(self._stream_error(err, dialect), more=False)
            return
        if resp.received is None:
            resp.received = time.time()
        status, body = render(err, dialect, resp.rid)
        await resp.full(status, body, b"application/json", err.headers)

    def _stream_error(self, err: ApiError, dialect: str) -> bytes:
        etype = stream_error_type(dialect, err.kind)
        if dialect == "anthropic":
            return anthropic_api.stream_error(etype, err.message)
        return openai_api.Stream("", "", False).error(etype, err.message)

    # ---- routing ------------------------------------------------------------------

    async def _route(
        self,
        scope: dict[str, Any],
        headers: dict[str, str],
        path: str,
        receive: Any,
        resp: _Response,
        dialect: str,
    ) -> None:
        method = scope["method"]
        model_path = path.startswith("/v1/models/") and len(path) > len("/v1/models/")
        if path in _POST_ROUTES or path in _PROFILE_ROUTES:
            allowed = b"POST"
        elif path in _GET_ROUTES or model_path:
            allowed = b"GET"
        else:
            raise ApiError("route_not_found", f"no route for {path}")
        if method.encode() != allowed and not (allowed == b"GET" and method == "HEAD"):
            raise ApiError(
                "method_not_allowed",
                f"{method} not allowed on {path}",
                [(b"allow", allowed)],
            )
        if path == "/health":
            return await resp.full(200, self._health(), b"application/json")
        if path == "/metrics":
            return await resp.full(200, self.metrics.render(), b"text/plain; version=0.0.4")
        self._check_auth(headers)
        if path in _PROFILE_ROUTES:
            return await resp.full(
                200, self._profile(path == "/start_profile"), b"application/json"
            )
        if path == "/v1/models":
            return await resp.full(200, self._models_page(), b"application/json")
        if model_path:
            return await resp.full(
                200, self._model(path[len("/v1/models/") :]), b"application/json"
            )
        _check_json_content_type(headers)
        body = await self._read_json(headers, receive, resp)
        stream_mode = _stream_mode(headers)
        profile_header = headers.get("x-execution-profile") or stream_mode
        if path == "/v1/chat/completions":
            req = openai_api.parse(
                body, self.config.max_tokens_limit, self.config.default_max_tokens, profile_header
            )
        elif path == "/v1/messages":
            req = anthropic_api.parse(body, self.config.max_tokens_limit, profile_header)
        else:  # count_tokens: the same request, without max_tokens
            if isinstance(body, dict):
                body = {**body, "max_tokens": 1}
            req = anthropic_api.parse(body, self.config.max_tokens_limit, profile_header)
            n = _count_tokens(req)
            return await resp.full(
                200, json.dumps({"input_tokens": n}).encode(), b"application/json"
            )
        if req.model not in self.models:
            raise ApiError(
                "not_found", f"model: {req.model!r} not found; serving {self.models[0]!r}"
            )
        await self._generate(req, dialect, receive, resp, stream_mode=stream_mode)

    def _check_auth(self, headers: dict[str, str]) -> None:
        if self._key is None:
            return
        given = headers.get("x-api-key")
        if given is None:
            auth = headers.get("authorization", "")
            given = auth[7:] if auth[:7].lower() == "bearer " else ""
        if not hmac.compare_digest(given.encode("latin-1"), self._key):
            raise ApiError("authentication", "invalid x-api-key")

    async def _read_json(self, headers: dict[str, str], receive: Any, resp: _Response) -> Any:
        limit = body_limit(self.config.body_limit, self.config.max_context)
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise ApiError("too_large", f"request body exceeds {limit} bytes")
        timeout = self.config.body_timeout_s
        try:
            body = await asyncio.wait_for(_read_body(receive, limit), timeout)
        except asyncio.TimeoutError:
            # Close the connection too: the unread rest of the body would frame the next request.
            raise ApiError(
                "request_timeout",
                f"request body not received within {timeout:g} s",
                [(b"connection", b"close")],
            ) from None
        resp.received = time.time()
        resp.received_perf = time.perf_counter()
        try:
            return json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ApiError("invalid_request", f"body is not valid JSON: {exc}") from None
        except RecursionError:
            raise ApiError("invalid_request", "body is nested too deeply") from None

    # ---- generation -----------------------------------------------------------------

    async def _generate(
        self,
        req: GenRequest,
        dialect: str,
        receive: Any,
        resp: _Response,
        stream_mode: str | None = None,
    ) -> None:
        n_prompt = _count_tokens(req)  # checked before tokenizing
        limit = self.config.max_context
        if n_prompt + req.max_tokens > limit:
            raise ApiError(
                "invalid_request",
                f"prompt ({n_prompt} tokens) + max_tokens ({req.max_tokens}) "
                f"exceeds the context limit of {limit} tokens",
            )
        prompt = tokenizer.encode(req.prompt_text)
        seq = Sequence(
            resp.rid,
            prompt,
            req.max_tokens,
            req.stop,
            self.sampling(req),
            req.profile,
            resp.received or time.time(),
            resp.received_perf or time.perf_counter(),
            asyncio.get_running_loop(),
        )
        seq.trace_id = resp.trace_id
        seq.thinking_tokens = req.plan.thinking(self.config.thinking_tokens, req.max_tokens)
        shown = req.plan.thinking_shown
        seq.thinking_shown = self.config.thinking_display != "omitted" if shown is None else shown
        seq.tool = req.plan.tool
        refusal = self.scheduler.submit(seq)
        if refusal is not None:
            self.metrics.rejected.labels(refusal).inc()
            self.metrics.time_to_reject.observe(time.perf_counter() - seq.received_perf)
            raise self._overloaded(refusal)
        resp.extra.append((b"x-execution-profile", req.profile.encode()))
        if stream_mode is not None and req.profile == stream_mode:
            resp.extra.append((b"x-stream-mode", stream_mode.encode()))  # honoured, said so
        watcher = asyncio.ensure_future(_watch_disconnect(receive, seq, self.scheduler))
        try:
            await self._await_start(seq)
            resp.dispatch, resp.start = seq.dispatch, seq.start
            if req.stream:
                await self._stream(seq, req, dialect, resp)
            else:
                await self._wait_end(seq)
                timing = _timing(seq, stamps=resp.timing)
                msg_id = ("msg_" if dialect == "anthropic" else "chatcmpl-") + resp.rid[4:]
                render_body = anthropic_api.body if dialect == "anthropic" else openai_api.body
                await resp.full(
                    200, render_body(seq, msg_id, req.model, timing), b"application/json"
                )
        finally:
            watcher.cancel()
            if seq.state not in (State.FINISHED, State.REJECTED, State.ABORTED):
                self.scheduler.abort(seq)  # the engine frees the slot at its next step boundary

    def sampling(self, req: GenRequest) -> SamplingParams:
        """The request's sampling parameters. Without a `seed` field the seed is derived
        from the server seed and the request's number n (0, 1, ... since start):
        (seed * 2**32 + n) mod 2**64, so a restarted server replays the same sequence of seeds."""
        n = self._n_generations
        self._n_generations += 1
        seed = req.seed if req.seed is not None else (self.config.seed * 2**32 + n) % 2**64
        return SamplingParams(req.temperature, seed, req.top_p, req.top_k)

    def _overloaded(self, reason: str) -> ApiError:
        headers: Headers = []
        if self.config.retry_after_s > 0:
            headers.append((b"retry-after", f"{self.config.retry_after_s:g}".encode()))
            headers.append((b"retry-after-ms", f"{self.config.retry_after_s * 1e3:.0f}".encode()))
        if self.config.no_sdk_retry:
            headers.append((b"x-should-retry", b"false"))
        if reason == "queue_timeout":
            return ApiError("rate_limit", "queued longer than the queue timeout", headers)
        if reason in ("draining", "shutdown"):
            return ApiError("overloaded", "server is shutting down", headers)
        what = {"no_slot": "no free sequence slot", "kv_budget": "no KV-cache budget"}
        return ApiError("overloaded", f"Overloaded: {what.get(reason, reason)}", headers)

    async def _await_start(self, seq: Sequence) -> None:
        while True:
            for kind, data in await _next_events(seq, keep_after_start=True):
                if kind == "start":
                    return
                if kind == "reject":
                    self.metrics.rejected.labels(data or "unknown").inc()
                    self.metrics.time_to_reject.observe(time.perf_counter() - seq.received_perf)
                    raise self._overloaded(data or "shutdown")
                if kind == "error":
                    raise ApiError("api_error", data or "engine failure")

    async def _wait_end(self, seq: Sequence) -> None:
        while True:
            for kind, data in await _next_events(seq):
                if kind == "end":
                    return
                if kind == "error":
                    raise ApiError("api_error", data or "engine failure")

    async def _stream(self, seq: Sequence, req: GenRequest, dialect: str, resp: _Response) -> None:
        anthropic = dialect == "anthropic"
        oa = openai_api.Stream("chatcmpl-" + resp.rid[4:], req.model, req.include_usage)
        am = anthropic_api.Stream(seq, "msg_" + resp.rid[4:], req.model)
        await resp.start_stream(am.head() if anthropic else oa.head())
        marks: dict[str, float] = {}  # when the first token, and the first answer token, went
        while True:
            out: list[bytes] = []
            done = False
            for kind, data in await _next_events(seq):
                if kind in ("thinking", "text", "tool"):
                    # Everything that arrived since the last write goes out in one write,
                    # but as one event per token: OpenAI-compatible clients count a chunk
                    # per token (a token ending inside a character is an empty chunk, as
                    # vLLM sends it); Messages deltas carry text, so an empty one is left
                    # out there.
                    out.append(
                        am.piece(kind, data or "") if anthropic else oa.piece(seq, kind, data or "")
                    )
                    marks.setdefault("first_token", 0.0)
                    if kind != "thinking":
                        marks.setdefault("first_answer", 0.0)
                elif kind == "end":
                    done = True
                elif kind == "error":
                    raise ApiError("api_error", data or "engine failure")
            chunk = b"".join(out)
            for mark, at in marks.items():  # stamped just before the write that carries it
                if not at:
                    marks[mark] = time.time()
            if done:
                timing = _timing(seq, marks, stamps=resp.timing)
                tail = am.tail(timing) if anthropic else oa.tail(seq, timing)
                await resp.body_part(chunk + tail, more=False)
                return
            if chunk:
                await resp.body_part(chunk, more=True)

    # ---- profiler switches ------------------------------------------------------------

    def _profile(self, start: bool) -> bytes:
        """POST /start_profile, /stop_profile: bound an Nsight capture (cudaProfilerApi
        range), or with REFSERVER_TORCH_PROFILER_DIR set a torch.profiler trace."""
        answer: dict[str, Any] = {"profiling": start}
        try:
            if self.torch_capture is not None and start:
                self.torch_capture.start()
            elif self.torch_capture is not None:
                answer["trace"] = str(self.torch_capture.stop())
            elif start:
                self.backend.start_profile()
            else:
                self.backend.stop_profile()
        except ValueError as exc:  # no CUDA, or nothing to stop: a clear 400, never a 500
            raise ApiError("invalid_request", str(exc)) from None
        self.profiling = start
        return json.dumps(answer).encode()

    # ---- small GET routes -----------------------------------------------------------

    def _health(self) -> bytes:
        eng = self.engine
        return json.dumps(
            {
                "status": "draining" if self.scheduler.draining else "healthy",
                "dispatch_jitter_us": round(eng.dispatch_jitter_us(), 3) if eng else 0.0,
                "server_time": time.time(),
                "scheduler": self.config.scheduler,
                "engine": self.backend.name,
                "engine_why": self.engine_why,
                "device": self.backend.device,
                "model": self.config.served_model_name,
                "preset": self.config.preset,
                "slots": self.scheduler.max_slots,
                "step_shape": self.config.step_shape,
                "slots_used": self.scheduler.num_slots_used,
                "waiting": self.scheduler.num_waiting,
                "max_context": self.config.max_context,
                "profiling": self.profiling,
            }
        ).encode()

    def _model_info(self, model_id: str) -> dict[str, Any]:
        # A union of both SDKs' model shapes: each ignores the other's keys.
        return {
            "id": model_id,
            "object": "model",
            "created": 1764374400,
            "owned_by": "zqbench",
            "type": "model",
            "display_name": f"zqbench reference ({self.backend.name}, {self.config.preset})",
            "created_at": "2025-11-29T00:00:00Z",
            "max_input_tokens": self.config.max_context - 1,
            "max_tokens": self.config.max_tokens_limit,
        }

    def _models_page(self) -> bytes:
        mid = self.config.served_model_name
        page = {
            "object": "list",
            "data": [self._model_info(mid)],
            "has_more": False,
            "first_id": mid,
            "last_id": mid,
        }
        return json.dumps(page).encode()

    def _model(self, model_id: str) -> bytes:
        if model_id not in self.models:
            raise ApiError("not_found", f"model: {model_id!r} not found")
        return json.dumps(self._model_info(model_id)).encode()


def _stream_mode(headers: dict[str, str]) -> str | None:
    """X-Stream-Mode: low-latency asks for the low-latency execution profile (the design's
    header: the request's prefill runs before the next decode step, alone, whatever the
    prefill budget); an explicit execution profile wins over it."""
    value = headers.get("x-stream-mode")
    if value is None:
        return None
    if value.strip().lower() != "low-latency":
        raise ApiError("invalid_request", "X-Stream-Mode must be low-latency (or absent)")
    return "low-latency"


def _check_json_content_type(headers: dict[str, str]) -> None:
    """Generation routes take JSON only. A browser sends text/plain or a form without a
    CORS preflight, so this rule is what keeps a web page off a keyless local server."""
    media_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        raise ApiError("unsupported_media_type", "Content-Type must be application/json")


async def _read_body(receive: Any, limit: int) -> bytes:
    chunks, size = [], 0
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            # Granian also reports broken framing (a bad chunk size) this way; a client
            # that really left never reads the answer.
            raise ApiError("invalid_request", "request body ended early or its framing is invalid")
        part = msg.get("body", b"")
        size += len(part)
        if size > limit:
            raise ApiError("too_large", f"request body exceeds {limit} bytes")
        chunks.append(part)
        if not msg.get("more_body", False):
            return b"".join(chunks)


def _count_tokens(req: GenRequest) -> int:
    """The prompt's token count, without building the token list (a huge prompt is refused
    before it is tokenized); checks that the prompt and stop texts are valid UTF-8."""
    try:
        for stop in req.stop:
            stop.encode("utf-8")
        return tokenizer.count_tokens(req.prompt_text)
    except UnicodeEncodeError:  # JSON allows "\ud800"; UTF-8 (and so a token) does not
        raise ApiError("invalid_request", "text contains a lone surrogate") from None


def _timing(
    seq: Sequence, marks: dict[str, float] | None = None, *, stamps: bool = True
) -> dict[str, Any]:
    """The server's own times, epoch seconds. Streamed: `first_token` and `first_answer`,
    when the write carrying the first token (of any kind), and the first text or tool
    token, began; null when none went out. Without `stamps` (--no-timing-headers) it does
    not say when the request was received, dispatched and started."""
    timing: dict[str, Any] = {}
    if stamps:
        timing["received"] = round(seq.received, 6)
        timing["dispatch"] = round(seq.dispatch, 6) if seq.dispatch else None
        timing["start"] = round(seq.start, 6) if seq.start else None
    timing["gpu_ms"] = round(seq.gpu_ms, 4) if seq.gpu_ms is not None else None
    if marks is not None:
        for mark in ("first_token", "first_answer"):
            timing[mark] = round(marks[mark], 6) if mark in marks else None
    return timing


async def _next_events(seq: Sequence, keep_after_start: bool = False) -> list[tuple[str, Any]]:
    """Wait for, and take, the events the engine posted. With `keep_after_start`,
    events after "start" stay queued for the streaming loop. Raises Disconnected when the
    engine dropped the sequence because its client went away."""
    while not seq.events:
        await seq.wake.wait()
        seq.wake.clear()
    out = []
    while seq.events:
        ev = seq.events.popleft()
        if ev[0] == "abort":
            raise Disconnected
        out.append(ev)
        if keep_after_start and ev[0] == "start":
            break
    return out


async def _watch_disconnect(receive: Any, seq: Sequence, scheduler: Scheduler) -> None:
    """Marks the sequence aborted when the client disconnects, so its slot frees up."""
    while True:
        msg = await receive()
        if msg["type"] == "http.disconnect":
            scheduler.abort(seq)
            return


class _Response:
    """One response: common headers, timing headers, and whether the head went out."""

    __slots__ = (
        "common",
        "dispatch",
        "extra",
        "finished",
        "received",
        "received_perf",
        "rid",
        "send",
        "start",
        "started",
        "status",
        "timing",
        "trace_id",
    )

    def __init__(self, send: Any, rid: str, common: Headers) -> None:
        self.send, self.rid, self.common = send, rid, common
        self.trace_id = rid  # the client's x-request-id, when it sent one: names its range
        self.received: float | None = None
        self.received_perf: float | None = None
        self.dispatch: float | None = None
        self.start: float | None = None
        self.started = self.finished = False
        self.status = 0
        self.extra: Headers = []  # earned on the way (x-execution-profile once admitted)
        self.timing = True  # send the X-Request-*-Time headers (--no-timing-headers: no)

    def _headers(self, content_type: bytes, extra: Headers) -> Headers:
        h: Headers = [(b"content-type", content_type), (b"request-id", self.rid.encode())]
        h += self.common
        if not self.timing:
            return h + self.extra + extra
        if self.received is not None:
            h.append((b"x-request-received-time", _ts(self.received)))
        if self.dispatch is not None:
            h.append((b"x-request-dispatch-time", _ts(self.dispatch)))
        if self.start is not None:
            h.append((b"x-request-start-time", _ts(self.start)))
        return h + self.extra + extra

    async def full(
        self, status: int, body: bytes, content_type: bytes, extra: Headers | None = None
    ) -> None:
        if self.received is None:
            self.received = time.time()
        self.status, self.started = status, True
        headers = self._headers(content_type, extra or [])
        headers.append((b"content-length", str(len(body)).encode()))
        await self.send({"type": "http.response.start", "status": status, "headers": headers})
        await self.send({"type": "http.response.body", "body": body})
        self.finished = True

    async def start_stream(self, first: bytes) -> None:
        self.status, self.started = 200, True
        headers = self._headers(
            b"text/event-stream; charset=utf-8", [(b"cache-control", b"no-cache")]
        )
        await self.send({"type": "http.response.start", "status": 200, "headers": headers})
        await self.send({"type": "http.response.body", "body": first, "more_body": True})

    async def body_part(self, data: bytes, more: bool) -> None:
        await self.send({"type": "http.response.body", "body": data, "more_body": more})
        if not more:
            self.finished = True
