"""An incremental Server-Sent Events decoder (WHATWG HTML "event stream interpretation").

Bytes arrive split anywhere: inside a multi-byte UTF-8 character, between `\\r` and `\\n`,
in the middle of a field name. `SSEDecoder.feed` takes each piece as it comes and returns
the events that piece completed, in order.

Speed matters (one call per socket read, thousands of requests per second), so each piece
is handled by a few C-level operations: one UTF-8 decode of the whole piece
(which also rejects invalid UTF-8 anywhere in the stream, and copes with a character split
across pieces), one line-ending normalisation, one split. Python only loops over lines,
never over bytes.

Rules followed (https://html.spec.whatwg.org/multipage/server-sent-events.html):
- lines end with `\\r\\n`, `\\n` or `\\r`; a `\\r` at the end of one piece and a `\\n` at the
  start of the next are one line ending;
- a leading UTF-8 BOM is dropped;
- `:` starts a comment; `field:value` with one optional space after the colon; a line with no
  colon is a field with an empty value; unknown fields are ignored, and so is `retry`
  (nothing here reconnects);
- `data` lines accumulate, joined with `\\n`; `event` sets the type (default `"message"`);
  `id` sets the last event id unless it contains NUL;
- a blank line dispatches the event, unless no `data` line was seen (then it only resets the
  event type).

Large events. With `skim_kept` set, an event whose data passes `SKIM_AFTER` characters is
not kept: its data goes, as it arrives, to a `JsonSkim` (`zqbench.dialects.skim`), and the
event's `data` is a `SkimmedData` holding it (its own text empty). No piece then costs more
than its own size, however large the event.

Errors are flagged, never raised: `error` becomes `"bad_sse"` for invalid UTF-8 or a line /
event larger than `max_event_chars` (memory stays bounded whatever the peer sends), and the
decoder then ignores everything else. Events completed before the bad byte are still
returned, so the outcome does not depend on how the bytes were split.
"""

from __future__ import annotations

import codecs
import contextlib
from typing import NamedTuple

from zqbench.dialects.skim import SKIM_AFTER, JsonSkim

DEFAULT_MAX_EVENT_CHARS = 8 * 1024 * 1024

_utf8_decode = codecs.utf_8_decode  # C; with final=False it leaves a split character undecoded
_tuple_new = tuple.__new__


class SSEEvent(NamedTuple):
    event: str  # "message" when the event had no `event:` line
    data: str  # the `data:` lines joined with "\n"
    id: str  # the last event id seen so far ("" if none)


class SkimmedData(str):
    """The data of an event too large to keep: its text is empty, `skim` read the data."""

    skim: JsonSkim


class SSEDecoder:
    __slots__ = (
        "_data",
        "_data_len",
        "_event",
        "_max",
        "_pend",
        "_pend_len",
        "_pend_plain",
        "_skim",
        "_skim_kept",
        "_skim_line",
        "_skip_lf",
        "_started",
        "_tail",
        "error",
        "last_event_id",
    )

    def __init__(
        self, max_event_chars: int = DEFAULT_MAX_EVENT_CHARS, *, skim_kept: int | None = None
    ) -> None:
        self._tail = b""  # the first bytes of a UTF-8 character split across pieces
        # The incomplete last line, in pieces: joined only once its end arrives, so a long
        # line read in many small pieces costs linear, not quadratic, time.
        self._pend: list[str] = []
        self._pend_len = 0
        self._skip_lf = False  # the previous piece ended in "\r": a leading "\n" is its pair
        self._started = False  # first characters seen (for the BOM)
        self._data: list[str] = []
        self._data_len = 0
        self._event = ""
        self._max = max_event_chars
        self._skim_kept = skim_kept  # None: never skim; else the skeleton's cap
        self._skim: JsonSkim | None = None  # the current event's data goes here, not to _data
        self._skim_line = False  # the unfinished line is a data line going to _skim
        self._pend_plain = False  # the unfinished line is long but no data line: kept
        self.error: str | None = None
        self.last_event_id = ""

    def feed(self, data: bytes) -> list[SSEEvent]:
        """Decode one piece of the stream; return the events it completed."""
        if self.error is not None:
            return []
        if self._tail:
            data = self._tail + data
        try:
            text, used = _utf8_decode(data, "strict", False)
        except UnicodeDecodeError as exc:
            # Keep the events completed before the bad byte, then stop for good.
            events = self._text(data[: exc.start].decode("utf-8", "replace"))
            self._fail()
            return events
        self._tail = data[used:] if used < len(data) else b""
        return self._text(text)

    def idle(self) -> bool:
        """Whether the decoder holds nothing between events: what it read ended an event."""
        return not (
            self._tail
            or self._pend
            or self._data
            or self._event
            or self._skip_lf
            or self._skim_line
            or self._skim is not None
            or self.error is not None
        )

    def finish(self) -> SSEEvent | None:
        """End of stream: return the event that was pending without its closing blank line.

        The WHATWG rules discard it; a caller that wants to be lenient (a final event whose
        last blank line never came) can use it. Bytes of an unfinished UTF-8 character are
        dropped: the stream was cut, which the caller learns from the missing end event.
        """
        if self.error is not None:
            return None
        self._skim_line = False
        if self._skim is not None:
            return self._skimmed_event()
        if self._pend:
            # The unterminated last line still counts (one non-blank line never dispatches).
            line = "".join(self._pend)
            self._pend = []
            self._pend_len = 0
            self._lines([line], [])
        if self._data and self.error is None:
            event = SSEEvent(self._event or "message", "\n".join(self._data), self.last_event_id)
            self._data = []
            self._data_len = 0
            self._event = ""
            return event
        return None

    # ------------------------------------------------------------------ internals
    def _fail(self) -> None:
        self.error = "bad_sse"
        self._pend = []
        self._tail = b""
        self._data = []
        self._skim = None
        self._skim_line = False
        self._pend_plain = False

    def _text(self, text: str) -> list[SSEEvent]:
        if not text:
            return []
        if not self._started:
            self._started = True
            if text[0] == "\ufeff":
                text = text[1:]
                if not text:
                    return []
        if self._skip_lf:
            self._skip_lf = False
            if text[0] == "\n":
                text = text[1:]
                if not text:
                    return []
        if "\r" in text:
            # A trailing "\r" already ends its line; remember to drop a "\n" that may follow.
            self._skip_lf = text[-1] == "\r"
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if self._skim_line:  # the rest of a large data line
            end = text.find("\n")
            self._skim_data(text if end < 0 else text[:end])
            if end < 0 or self.error is not None:
                return []
            self._skim_line = False
            text = text[end + 1 :]
            if not text:
                return []
        if "\n" not in text:  # the common "part of a line" case: just keep it
            self._pend.append(text)
            self._pend_len += len(text)
            if self._pend_len > self._max:
                self._fail()
            elif (
                self._pend_len > SKIM_AFTER and self._skim_kept is not None and not self._pend_plain
            ):
                self._skim_pending_line()
            return []
        if self._pend:
            self._pend.append(text)
            text = "".join(self._pend)
            self._pend = []
            self._pend_len = 0
            self._pend_plain = False
        lines = text.split("\n")
        last = lines.pop()
        out: list[SSEEvent] = []
        self._lines(lines, out)
        if last and self.error is None:
            self._pend.append(last)
            self._pend_len = len(last)
            if self._pend_len > self._max:
                self._fail()
        return out

    def _lines(self, lines: list[str], out: list[SSEEvent]) -> None:
        # Hot loop: locals instead of attribute lookups, and the event tuple is built with
        # tuple.__new__ (NamedTuple's own __new__ is a Python-level call).
        limit = self._max
        data = self._data
        new_event = _tuple_new
        for line in lines:
            if not line:
                if self._skim is not None:
                    out.append(self._skimmed_event())
                elif data:
                    text = data[0] if len(data) == 1 else "\n".join(data)
                    out.append(
                        new_event(SSEEvent, (self._event or "message", text, self.last_event_id))
                    )
                    data = self._data = []
                    self._data_len = 0
                self._event = ""
                continue
            if len(line) > limit:
                self._fail()
                return
            name, _, value = line.partition(":")
            if not name:
                continue  # a comment (the line starts with ":")
            if value and value[0] == " ":
                value = value[1:]
            if name == "data":
                if self._skim is not None:
                    self._skim_data("\n" + value)
                    if self.error is not None:
                        return
                    continue
                self._data_len += len(value) + 1
                if self._data_len > limit:
                    self._fail()
                    return
                data.append(value)
                if self._data_len > SKIM_AFTER and self._skim_kept is not None:
                    self._start_skim()
                    data = self._data
            elif name == "event":
                self._event = value
            elif name == "id" and "\0" not in value:
                self.last_event_id = value

    # ------------------------------------------------------------------ large events
    def _start_skim(self) -> None:
        """From now on the event's data goes to a skim; what it had so far goes first."""
        assert self._skim_kept is not None
        self._skim = JsonSkim(max_kept=self._skim_kept)
        data, self._data = self._data, []
        self._skim_feed("\n".join(data))  # already counted in _data_len

    def _skim_pending_line(self) -> None:
        """A long unfinished line: if it is a data line, its value goes to the skim as it
        arrives; any other field is kept (up to the cap) as usual."""
        line = "".join(self._pend)
        name, colon, value = line.partition(":")
        if name != "data" or not colon:
            self._pend = [line]
            self._pend_plain = True
            return
        self._pend = []
        self._pend_len = 0
        if value and value[0] == " ":
            value = value[1:]
        if self._skim is not None or self._data:  # the event had data lines before this one
            value = "\n" + value
        if self._skim is None:
            self._start_skim()
        self._skim_line = True
        self._skim_data(value)

    def _skim_data(self, text: str) -> None:
        """More of the event's data: counted against the event's cap, then skimmed."""
        self._data_len += len(text)
        if self._data_len > self._max:
            self._fail()
            return
        self._skim_feed(text)

    def _skim_feed(self, text: str) -> None:
        assert self._skim is not None
        with contextlib.suppress(ValueError):  # not JSON: said again when the event is read
            self._skim.feed(text)

    def _skimmed_event(self) -> SSEEvent:
        skim, self._skim = self._skim, None
        assert skim is not None
        data = SkimmedData()
        data.skim = skim
        self._data_len = 0  # (its lines went to the skim: _data is still empty)
        return _tuple_new(SSEEvent, (self._event or "message", data, self.last_event_id))
