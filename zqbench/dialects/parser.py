"""The skeleton both dialects fill in: `ResponseParser` (one response) and `DialectBase`.

`ResponseParser` implements the `ResponseSink` side once (status, timing headers,
Retry-After, body caps, SSE framing, end-of-stream checks); a dialect subclass only says
what one SSE event or one JSON body means. `DialectBase` holds what a dialect object
shares: its configuration, headers, parser and error-object check.

Error classes a parser can leave in `summary.error` (first one wins):

    http_<code>        the status was not 2xx
    bad_sse            the event stream was not valid UTF-8, or a line/event passed the cap
    bad_json           an event's data, or a non-streamed body, was not JSON of the right shape
    refused_in_stream  a refusal in disguise: an error reported inside a 2xx response before
                         any token event, saying the server is full (`common.overload_sign`:
                         a code or status 429/503/529, int or numeric string, in `code`,
                         `status` or `status_code`; type overloaded_error or
                         rate_limit_error; or, as vLLM's Anthropic route sends it, an
                         internal error whose message quotes an error object with such a
                         code); the outcome kernel counts it as a refusal
    stream_error       any other error reported inside a 2xx response (`event: error`, an
                         `error` key), or one after a token event, whatever it says;
    stream_<type>        with the error's type when it has a plain one: stream_api_error
    incomplete_stream  the body ended before the stream's end marker
    empty_stream       the end marker came before the stream's opening (OpenAI: `[DONE]`
                         before any chunk; Anthropic: `message_stop` before `message_start`)
    too_large          what is kept of a non-streamed body passed `max_body_bytes`: the whole
                         body while it is small, then its skeleton (memory stays bounded)
    parse_error        a bug in the parser itself; it is caught so the run goes on

Transport failures (timeout, reset, ...) are the transport's to report; the engine prefers
them over whatever the parser saw.

Token events. Servers that stream per token (vLLM, SGLang, the APIs themselves) send one
chunk per generated token, and a token that ends partway through a UTF-8 character (emoji,
CJK) arrives as a chunk with empty text: it is a token all the same, and the server's usage
counts it. So every chunk that carries the text field is one token event, empty text
included; what is not a token (a role announcement, the block's empty opening, a usage or
finish-only chunk) each dialect names in its module docstring. `summary.token_times` holds
the arrival of each token event: TTFT is the first, ITL the gaps between them, TPOT runs
from the first to the last (docs/metrics.md). A server that packs several tokens into one
chunk sends fewer events than its usage counts; `output_tokens` is then still the server's
count, and the events time what arrived.

Large responses. Whatever the transport hands over in one call is parsed in time linear in
its size, so a transport that hands over bounded slices (`PoolLimits.slice_bytes`) keeps
every call short. The two things that would not be: one `json.loads` of a large non-streamed
body at its end, and of one large event's data. Past `SKIM_AFTER` both are read by a
`JsonSkim` as they arrive (`zqbench.dialects.skim`): long strings (the generated text) are
measured, not kept, and only the small skeleton is parsed at the end. A dialect hands its
text to `_token` / `_body_text` as usual: they count a skimmed string's true length.

Repeated events. Nearly every piece of a token stream is one event whose bytes repeat the
previous event's but for the token's text. Once a piece was parsed the slow way into one
event that did nothing but add one token (the dialect says so: `_pure`), and the same bytes
with another text in that place are proven to decode to the same event but for the text
(`_learn`; only from a plain text: no quote, backslash or control character), a later piece
of that shape is read as that token directly (`_repeat`): no SSE lines, no JSON object. Its
text may be plain (decoded as UTF-8) or a JSON string's body with escapes (decoded by the
slow path's decoder); anything else, and any other piece, goes the slow way and drops the
template. At 50,000 token events a second this took a token's parse from about 3.3 to 0.9 µs
(#43, benchmarks/parser_events.py).

A dialect may hold one event as *provisional* (`_provisional_token`): a chunk that is a
token for one server and a mere trailer for another (OpenAI: empty text beside the
finish_reason). At the end of the stream it counts unless the server's usage is already
matched by the other events.
"""

from __future__ import annotations

import abc
import codecs
import json
import re
from collections.abc import Mapping
from typing import Any

from zqbench.dialects.base import (
    TEXT,
    THINKING,
    TOOL,
    CallPieces,
    DialectConfig,
    EventHook,
    RequestSpec,
    ResponseSummary,
)
from zqbench.dialects.common import (
    DEFAULT_MAX_BODY_BYTES,
    apply_zq_timing,
    error_object_problem,
    estimate_tokens,
    loads,
    read_headers,
    stream_error_class,
)
from zqbench.dialects.shapes import ApiShapes
from zqbench.dialects.skim import NO_SKIMMED, SKIM_AFTER, JsonSkim, SkimmedStrings, SkimTooLarge
from zqbench.dialects.sse import SkimmedData, SSEDecoder, SSEEvent
from zqbench.redact import secret_headers
from zqbench.transport.base import HttpRequest

# What a token's text may not hold for a repeated event to be read without JSON: a quote
# or backslash (an escape or the string's end), or a control character (not JSON, or an
# SSE line end).
_NOT_PLAIN = re.compile(rb'[\x00-\x1f"\\]').search
# A JSON string's body with escapes and without its quotes: in the template's place it keeps
# the event's structure (it cannot end the string early), so it is the token's text too.
_STRING_BODY = re.compile(rb'(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*').fullmatch
_SENTINEL = "zq\ue000"  # a plain text no server sends: the proof's stand-in for a token
MAX_TEMPLATE_BYTES = 4096  # a longer piece is not learned: the proof would cost more
MAX_UNUSED_TEMPLATES = 3


class ResponseParser(abc.ABC):
    """One response: a `StreamParser` whose dialect-specific part is `_event` / `_body`.

    For a streamed request the body is decoded as SSE and only the event being read is kept
    (a large one skimmed); for a non-streamed one the body is kept while small and skimmed
    past `SKIM_AFTER`, what is kept capped at `max_body_bytes`, and parsed at the end.
    TTFT of a non-streamed response is the arrival of the first body byte: nothing earlier
    tells the client that generation produced anything.
    """

    __slots__ = (
        "_began",
        "_body",
        "_body_len",
        "_cap",
        "_done",
        "_ended",
        "_ok",
        "_on_event",
        "_provisional",
        "_pure",
        "_repeats",
        "_skim",
        "_skim_decoder",
        "_skimmed",
        "_sse",
        "_stopped",
        "_template",
        "_unused",
        "stop_reason",
        "stream",
        "summary",
    )

    def __init__(
        self,
        stream: bool,
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        on_event: EventHook | None = None,
        keep_answer: bool = False,
    ) -> None:
        self.summary = ResponseSummary(
            answer=[] if keep_answer else None, calls=[] if keep_answer else None
        )
        self.stream = stream
        self.stop_reason: str | None = None  # stop_reason / finish_reason, when given
        self._cap = max_body_bytes
        self._ok = False  # 2xx
        # Without an event hook a large event is skimmed; a hook sees every event whole.
        skim = None if on_event is not None else max_body_bytes
        self._sse: SSEDecoder | None = SSEDecoder(skim_kept=skim) if stream else None
        self._body: list[bytes] = []
        self._body_len = 0
        self._skim: JsonSkim | None = None  # a large non-streamed body, as it arrives
        self._skim_decoder: codecs.IncrementalDecoder | None = None
        self._skimmed: SkimmedStrings = NO_SKIMMED  # of the JSON being read
        self._began = False  # the stream's opening (a dialect says which) was seen
        self._done = False  # the stream's end marker was seen
        self._stopped = False  # done or failed: later stream bytes are ignored
        self._ended = False
        self._on_event = on_event
        self._provisional: int | None = None  # arrival of a token event not yet settled
        # Set by a dialect's `_event` when the event only added this token (text, kind).
        self._pure: tuple[str, int] | None = None
        # The last pure event's piece around its text (before, after, kind): see `_repeat`.
        self._template: tuple[bytes, bytes, int] | None = None
        self._repeats = 0  # pieces read from the current template
        # Templates dropped before they read a piece: a server whose every event differs
        # (a counter, padding) would have each one's proof paid for nothing; past
        # MAX_UNUSED_TEMPLATES this response learns no more.
        self._unused = 0

    # -------------------------------------------------------------- ResponseSink
    def on_headers(self, status: int, headers: Mapping[str, str], t_ns: int) -> None:
        try:
            s = self.summary
            s.status = status
            s.t_headers = t_ns
            read_headers(s, headers)
            self._ok = 200 <= status < 300
            if not self._ok:
                s.error = f"http_{status}"
        except Exception:
            self._fail("parse_error")

    def on_data(self, data: bytes, t_ns: int) -> None:
        try:
            if not data:
                return
            if not self._ok:
                return  # a non-2xx body: its status is the error class
            sse = self._sse
            if sse is None:
                if self.summary.t_first_token is None:
                    self.summary.t_first_token = t_ns
                self._keep_body(data)
                return
            hook = self._on_event
            if hook is not None:
                self._feed_watched(hook, sse, data, t_ns)
                return
            if self._stopped:
                return
            template = self._template
            if template is not None:
                if self._repeat(template, data, t_ns):
                    self._repeats += 1
                    return
                self._template = None
                if not self._repeats:
                    self._unused += 1
            self._pure = None
            events = sse.feed(data)
            for event in events:
                self._event(event, t_ns, False)
                if self._stopped:
                    return
            if sse.error is not None:
                self._fail(sse.error)
            elif (
                self._pure is not None
                and len(events) == 1
                and self._unused < MAX_UNUSED_TEMPLATES
                and sse.idle()
            ):
                self._template = _learn(data, events[0], self._pure)
                self._repeats = 0
        except Exception:
            self._fail("parse_error")

    def on_end(self, t_ns: int) -> None:
        if self._ended:
            return
        self._ended = True
        try:
            s = self.summary
            if not self._ok:
                pass  # a non-2xx answer: its status is the error class
            elif self._sse is not None:
                if not self._stopped:
                    # Lenient about a final event whose closing blank line never came; a
                    # half event that is not JSON then reads as a cut stream, not bad JSON.
                    pending = self._sse.finish()
                    if pending is not None:
                        self._event(pending, t_ns, True)
                if not self._done:
                    self._fail("incomplete_stream")
                self._settle_provisional()
            elif self._skim is not None:
                self._parse_skimmed(t_ns)
            elif not self._stopped:
                body = b"".join(self._body)
                self._body = []
                self._parse_body(body, t_ns)
            self._finish_tokens(s)
        except Exception:
            self._fail("parse_error")

    def _repeat(self, template: tuple[bytes, bytes, int], data: bytes, t_ns: int) -> bool:
        """Read `data` as the template's event with another text, if it is one."""
        before, after, kind = template
        end = len(data) - len(after)
        if end <= len(before) or not data.startswith(before) or not data.endswith(after):
            return False
        raw = data[len(before) : end]
        try:
            if _NOT_PLAIN(raw) is None:
                text = raw.decode()
            elif _STRING_BODY(raw) is not None:  # escapes: a newline, a quote, code
                text = loads(b'"' + raw + b'"')  # the slow path's decoder, on that string
            else:
                return False
        except ValueError:  # not UTF-8, or an escape json refuses: the slow path says what
            return False
        self._token(text, t_ns, kind)
        return True

    @property
    def sse_error(self) -> str | None:
        """`bad_sse` once the event stream was not valid SSE, else None."""
        return None if self._sse is None else self._sse.error

    # -------------------------------------------------------------- for subclasses
    @abc.abstractmethod
    def _event(self, event: SSEEvent, t_ns: int, at_eof: bool) -> None:
        """One SSE event of a streamed response."""

    @abc.abstractmethod
    def _body_json(self, obj: dict[str, Any], t_ns: int) -> None:
        """The parsed JSON body of a non-streamed response."""

    def _fail(self, error: str) -> None:
        """Record the first error and stop reading the stream."""
        self._stopped = True
        if self.summary.error is None:
            self.summary.error = error

    def _server_error(self, err: Any) -> None:
        """An error the server reported inside a 2xx response (an event, a chunk, the body).

        Before any token event (a held provisional one counts: a finish chunk came) an
        overload error is a refusal; after one, the server admitted the request and broke
        it off."""
        before = not self.summary.token_times and self._provisional is None
        self._fail(stream_error_class(err, before_token=before))

    def _finish_stream(self) -> None:
        """The stream's end marker. One that came before the stream's opening ended an
        answer that never began: a 200 of nothing is no success."""
        if not self._began:
            self._fail("empty_stream")
        self._done = True
        self._stopped = True

    def _json_object(self, data: str, at_eof: bool) -> dict[str, Any] | None:
        """An event's data as a JSON object; None, the stream marked bad, for anything else.

        A half event at the very end is a cut stream, not a server emitting garbage."""
        try:
            if type(data) is SkimmedData:  # a large event, skimmed as it arrived
                obj, self._skimmed = data.skim.finish()
            else:
                obj, self._skimmed = loads(data), NO_SKIMMED
        except Exception:  # not JSON, or nested past the recursion limit
            obj = None
        if not isinstance(obj, dict):
            self._fail("incomplete_stream" if at_eof else "bad_json")
            return None
        return obj

    def _token(self, text: str, t_ns: int, kind: int = TEXT) -> None:
        """One token event: its arrival time and, for answer text, its characters ("" is a
        token too). `kind`: TEXT, THINKING or TOOL (a tool call's arguments)."""
        if self._provisional is not None:  # a later token: the held one was a token
            t_held, self._provisional = self._provisional, None
            self._token("", t_held)
        s = self.summary
        if s.t_first_token is None:
            s.t_first_token = t_ns
        s.add_token(t_ns)
        s.carried |= kind
        if kind == TEXT:
            s.text_chars += len(text) if self._skimmed is NO_SKIMMED else self._skimmed.chars(text)
            if s.answer is not None:
                self._keep_text(text)
        elif kind == THINKING:
            s.reasoning_events += 1
            return
        else:
            s.tool_events += 1
        if s.t_first_answer is None:
            s.t_first_answer = t_ns

    def _provisional_token(self, t_ns: int) -> None:
        """An empty event that is a token unless usage says otherwise (settled at the end)."""
        if self._provisional is not None:  # a second one: the first was a token
            t_held, self._provisional = self._provisional, None
            self._token("", t_held)
        self._provisional = t_ns

    def _settle_provisional(self) -> None:
        """Count the held event, unless the server's usage is already matched without it."""
        t_held, self._provisional = self._provisional, None
        if t_held is None:
            return
        s = self.summary
        matched = s.output_tokens is not None and len(s.token_times) >= s.output_tokens
        if s.tokens_from_usage and matched:
            return
        self._token("", t_held)

    def _body_text(self, *parts: str, carried: int = 0) -> None:
        """The generated text of a non-streamed body (its text parts): one chunk, at the
        first body byte. `carried`: the body's thinking and tool-call bits besides."""
        s = self.summary
        chars = sum(self._skimmed.chars(p) for p in parts)
        s.carried |= carried | (TEXT if chars else 0)
        if (chars or carried) and s.t_first_token is not None:
            s.add_token(s.t_first_token)
            if s.carried & (TEXT | TOOL):
                s.t_first_answer = s.t_first_token
        s.text_chars += chars
        if s.answer is not None:
            for part in parts:
                self._keep_text(part)

    def _keep_call(self, call_id: Any, name: Any, arguments: Any = None) -> None:
        """A tool call begins (with its whole `arguments` where a body gave them at once)."""
        calls = self.summary.calls
        if calls is not None:
            call = CallPieces(_string(call_id), _string(name))
            if isinstance(arguments, str):
                call.pieces.append(arguments)
            calls.append(call)

    def _keep_arguments(self, piece: str, index: int = -1) -> None:
        """A piece of the arguments of call `index` (of those kept); a skimmed piece was
        never held, as with text."""
        calls = self.summary.calls
        if calls and self._skimmed is NO_SKIMMED and -len(calls) <= index < len(calls):
            calls[index].pieces.append(piece)

    def _keep_text(self, text: str) -> None:
        """Keep a piece of the answer; a skimmed one was never held, so none is kept."""
        if self._skimmed is NO_SKIMMED:
            assert self.summary.answer is not None
            self.summary.answer.append(text)
        else:
            self.summary.answer = None

    # -------------------------------------------------------------- internals
    def _feed_watched(self, hook: EventHook, sse: SSEDecoder, data: bytes, t_ns: int) -> None:
        """The SSE path with an event hook: the hook sees every event, even after a stop."""
        for event in sse.feed(data):
            hook(event, t_ns)
            if not self._stopped:
                self._event(event, t_ns, False)
        if sse.error is not None:
            self._fail(sse.error)

    def _keep(self, data: bytes, cap: int) -> bool:
        if self._stopped:
            return True
        self._body_len += len(data)
        if self._body_len > cap:
            self._body = []
            return False
        self._body.append(data)
        return True

    def _keep_body(self, data: bytes) -> None:
        """A piece of a 2xx non-streamed body: kept while small, then skimmed."""
        if self._stopped:
            return
        skim, decoder = self._skim, self._skim_decoder
        if skim is None or decoder is None:
            if not self._keep(data, self._cap):
                self._fail("too_large")
                return
            if self._body_len <= SKIM_AFTER:
                return
            # Large: from here on the body is read as it arrives, its long strings measured.
            self._skim = skim = JsonSkim(max_kept=self._cap)
            self._skim_decoder = decoder = codecs.getincrementaldecoder("utf-8-sig")()
            data = b"".join(self._body)
            self._body = []
        try:
            skim.feed(decoder.decode(data))
        except SkimTooLarge:
            self._fail("too_large")
        except ValueError:  # not JSON, or not UTF-8
            self._fail("bad_json")

    def _parse_skimmed(self, t_ns: int) -> None:
        skim, decoder = self._skim, self._skim_decoder
        assert skim is not None and decoder is not None
        self._skim = self._skim_decoder = None
        if self._stopped:
            return
        try:
            skim.feed(decoder.decode(b"", True))
            obj, self._skimmed = skim.finish()
        except SkimTooLarge:
            self._fail("too_large")
            return
        except Exception:  # not JSON, not UTF-8, nested too deep
            self._fail("bad_json")
            return
        self._body_object(obj, t_ns)

    def _parse_body(self, body: bytes, t_ns: int) -> None:
        try:
            obj = loads(body)
        except Exception:  # not JSON, not UTF-8, nested too deep
            self._fail("bad_json")
            return
        self._body_object(obj, t_ns)

    def _body_object(self, obj: Any, t_ns: int) -> None:
        if not isinstance(obj, dict):
            self._fail("bad_json")
            return
        apply_zq_timing(self.summary, obj.get("zq_timing"))
        self._body_json(obj, t_ns)

    def _finish_tokens(self, s: ResponseSummary) -> None:
        # Without usage, estimate from the text (the engine falls back to the request's
        # own prompt estimate for prompt_tokens).
        if s.output_tokens is None:
            s.tokens_from_usage = False
            if s.text_chars > 0:
                s.output_tokens = estimate_tokens(s.text_chars)
            elif s.error is None:
                s.output_tokens = 0


class DialectBase(abc.ABC):
    """What a dialect object shares: configuration, headers, a parser per response, and the
    error-object check. A subclass names its API's facts (see `Dialect`) and builds bodies."""

    # The API's facts (the `Dialect` protocol), set by each subclass.
    name: str
    path: str
    required_fields: tuple[str, ...]
    stop_field: str
    stop_at_max_tokens: str
    count_tokens_path: str | None = None
    token_per_event: bool = False
    shapes: ApiShapes
    usage_statement: str
    exact_output_statement: str | None
    parser_class: type[ResponseParser]

    def __init__(self, config: DialectConfig, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES):
        self.config = config
        self.max_body_bytes = max_body_bytes
        # The API's headers, then the user's extra ones (credentials among them redacted).
        self.headers = (*self._headers(config), *secret_headers(config.extra_headers))
        self._model_json = json.dumps(config.model).encode()
        self._prepare(config)

    @abc.abstractmethod
    def _prepare(self, config: DialectConfig) -> None:
        """Precompute what every request's body shares."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config!r})"

    @abc.abstractmethod
    def _headers(self, config: DialectConfig) -> list[tuple[str, str]]:
        """The API's own headers, the key among them (as a `Secret`) when configured."""

    @abc.abstractmethod
    def build(self, spec: RequestSpec) -> HttpRequest: ...

    def parser(self, spec: RequestSpec, *, on_event: EventHook | None = None) -> ResponseParser:
        return self.parser_class(
            spec.stream,
            max_body_bytes=self.max_body_bytes,
            on_event=on_event,
            keep_answer=spec.keep_answer,
        )

    def error_problem(self, obj: Any) -> str | None:
        """Why `obj`, a non-2xx body's JSON, is not this API's error object; None if it is."""
        return error_object_problem(obj)


def _string(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _learn(data: bytes, event: SSEEvent, pure: tuple[str, int]) -> tuple[bytes, bytes, int] | None:
    """The template of a piece that was one pure token event, or None.

    The token's text must stand in the piece once between quotes, as the server encoded it
    (raw UTF-8, or a JSON escape of it); the proof: the piece with a stand-in text there
    decodes (SSE, then JSON) to the same event, field for field, but for that one string. So
    any JSON string body there is that event with that text."""
    text, kind = pure
    if not text or len(data) > MAX_TEMPLATE_BYTES or data.startswith(b"\xef\xbb\xbf"):
        return None
    for raw in _encodings(text):
        quoted = b'"' + raw + b'"'
        at = data.find(quoted)
        if at < 0:
            continue
        if data.find(quoted, at + 1) >= 0:
            return None  # twice: which one is the token's is not known
        before, after = data[: at + 1], data[at + 1 + len(raw) :]
        return (before, after, kind) if _proven(before, after, event, text) else None
    return None


def _encodings(text: str) -> list[bytes]:
    """How a server may have written `text` inside a JSON string, the likeliest first."""
    raw = text.encode()
    if _NOT_PLAIN(raw) is None:
        return [raw]
    found = [json.dumps(text, ensure_ascii=False)[1:-1].encode()]  # vLLM, most servers
    ascii_only = json.dumps(text)[1:-1].encode()
    if ascii_only not in found:
        found.append(ascii_only)
    return found


def _proven(before: bytes, after: bytes, event: SSEEvent, text: str) -> bool:
    probe = SSEDecoder()
    events = probe.feed(before + _SENTINEL.encode() + after)
    if len(events) != 1 or not probe.idle():
        return False
    other = events[0]
    # An id line in the piece must say the same; without one the id is the stream's so far.
    if other.event != event.event or (probe.last_event_id and other.id != event.id):
        return False
    try:
        return bool(_swap(loads(other.data), text) == loads(event.data))
    except Exception:  # not JSON after all: no template
        return False


def _swap(value: Any, text: str) -> Any:
    """`value` with every string equal to the stand-in replaced by `text`."""
    if isinstance(value, dict):
        return {k: _swap(v, text) for k, v in value.items()}
    if isinstance(value, list):
        return [_swap(v, text) for v in value]
    return text if value == _SENTINEL else value
