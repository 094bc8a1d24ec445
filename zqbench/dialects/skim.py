"""Read a large JSON text in pieces, keeping only its skeleton: `JsonSkim`.

A response's JSON can be tens of megabytes, nearly all of it one generated text. Parsing it
with one `json.loads` holds the event loop (and the GIL: a thread does not help) for tens of
milliseconds, and keeping it costs its size twice over. What a dialect needs from it is
small: the usage, the stop reason, an error, and the *length* of the text.

`JsonSkim.feed` takes the text in pieces of any size and split, in time linear in each
piece. It copies everything outside strings, and strings up to `long_chars` characters, into
a skeleton; a longer string is checked and measured as it arrives (by json's own C string
scanner, a slice at a time) and leaves only a placeholder in the skeleton. `finish` parses
the skeleton with `json.loads` and returns the value and a `SkimmedStrings` that turns a
placeholder back into its string's length (`chars`). The result equals `json.loads` of the
whole text, long strings aside; a text that `json.loads` rejects is rejected here too
(`ValueError`), except that a long string's characters are checked as json checks them
(strict: no raw control characters) wherever it stands.

Not bounded: a skeleton that is itself large (a body of many small values, such as
per-token logprobs) is parsed by one `json.loads` at the end; `max_kept` caps its size.
"""

from __future__ import annotations

import functools
import json
import json.decoder
import re
from collections.abc import Callable
from typing import Any

# json's own string scanner (C): decodes a string's contents up to its closing quote and
# checks them as json.loads does. Not in the typeshed stubs, hence the annotation.
scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]

LONG_CHARS = 1024  # a string longer than this is measured, not kept
SKIM_AFTER = 64 * 1024  # the parsers skim a body, or an event's data, once it passes this
_PLACEHOLDER = "\ue000zq-skimmed-"  # a private-use character: no real short string starts so

# A string's contents from the current position: ends before its closing quote, before a
# backslash that ends the piece, or at the end of the piece.
_STRING_BODY = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*', re.S)
_HIGH_SURROGATE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}")
# What may stand between strings: punctuation, numbers, true/false/null, whitespace. Checked
# as it arrives, so a body that is not JSON at all fails at once instead of filling the cap.
_BETWEEN_STRINGS = re.compile(r"[\s\[\]{},:0-9eE.+\-truefalsn]*")


class SkimTooLarge(ValueError):
    """The skeleton passed `max_kept` characters."""


class SkimmedStrings:
    """The placeholders of one skimmed text, each with the length of the string it stands for."""

    __slots__ = ("_lengths",)

    def __init__(self, lengths: dict[str, int]) -> None:
        self._lengths = lengths

    def chars(self, text: str) -> int:
        """Characters of `text`, or of the long string it stands for."""
        n = self._lengths.get(text)
        return len(text) if n is None else n

    def __len__(self) -> int:
        return len(self._lengths)


NO_SKIMMED = SkimmedStrings({})


class JsonSkim:
    """One JSON text, fed in pieces (str); see the module docstring."""

    __slots__ = (
        "_carry",
        "_chars",
        "_error",
        "_escaped",
        "_in_string",
        "_kept",
        "_lengths",
        "_long",
        "_max_kept",
        "_out",
        "_short",
        "_short_len",
        "long_chars",
    )

    def __init__(self, *, max_kept: int, long_chars: int = LONG_CHARS) -> None:
        self.long_chars = long_chars
        self._max_kept = max_kept
        self._out: list[str] = []  # the skeleton, in pieces
        self._kept = 0
        self._in_string = False
        self._escaped = False  # the last piece ended in a string's lone backslash
        self._short: list[str] = []  # the current string's raw contents while it is short
        self._short_len = 0
        self._long = False  # the current string passed long_chars: measured, not kept
        self._carry = ""  # its raw tail that may end inside an escape, measured later
        self._chars = 0  # its characters measured so far
        self._lengths: dict[str, int] = {}
        self._error: ValueError | None = None  # once raised, raised again by `finish`

    def feed(self, text: str) -> None:
        """The next piece of the text. Raises ValueError for what is not JSON (SkimTooLarge
        past `max_kept`); after that, later pieces are ignored."""
        if self._error is not None:
            return
        try:
            self._feed(text)
        except ValueError as e:
            self._error = e
            raise

    def finish(self) -> tuple[Any, SkimmedStrings]:
        """The value (long strings as placeholders) and their lengths. Raises ValueError."""
        if self._error is not None:
            raise self._error
        if self._in_string:
            raise ValueError("the text ends inside a string")
        value = json.loads("".join(self._out))
        self._out = []
        return value, SkimmedStrings(self._lengths) if self._lengths else NO_SKIMMED

    # ------------------------------------------------------------------ internals
    def _feed(self, text: str) -> None:
        pos, n = 0, len(text)
        fast = _fast_run(self.long_chars)
        while pos < n:
            if not self._in_string:
                # A run of structure and short plain strings, kept as it is in one C scan: a
                # text of many small values (logprobs, deep objects) otherwise costs a few
                # Python calls per string, 140 ms for a 600 KB event.
                end = fast(text, pos).end()
                if end > pos:
                    self._keep(text[pos:end])
                    pos = end
                    if pos == n:
                        return
                quote = text.find('"', pos)
                if quote < 0:
                    self._structure(text[pos:] if pos else text)
                    return
                self._structure(text[pos:quote])
                self._in_string = True
                pos = quote + 1
                continue
            lo = pos + 1 if self._escaped else pos  # an escaped first character is no quote
            end = _closing_quote(text, lo)
            if end >= 0:
                self._escaped = False
                self._string_part(text[pos:end])
                self._close_string()
                pos = end + 1
            else:  # the string goes on in the next piece
                self._escaped = _odd_backslashes(text, lo, n)
                self._string_part(text[pos:] if pos else text)
                return

    def _structure(self, text: str) -> None:
        if not _BETWEEN_STRINGS.fullmatch(text):
            raise ValueError("not JSON")
        self._keep(text)

    def _keep(self, text: str) -> None:
        if not text:
            return
        self._kept += len(text)
        if self._kept > self._max_kept:
            raise SkimTooLarge(f"the skeleton passed {self._max_kept} characters")
        self._out.append(text)

    def _string_part(self, raw: str) -> None:
        if self._long:
            self._measure(raw)
            return
        self._short.append(raw)
        self._short_len += len(raw)
        if self._short_len > self.long_chars:
            self._long = True
            joined = "".join(self._short)
            self._short = []
            self._measure(joined)

    def _close_string(self) -> None:
        self._in_string = False
        if not self._long:
            raw = "".join(self._short)
            self._short = []
            self._short_len = 0
            self._keep(f'"{raw}"')
            return
        if self._carry:
            self._chars += len(scanstring(self._carry + '"', 0)[0])
        placeholder = f"{_PLACEHOLDER}{len(self._lengths)}"
        self._lengths[placeholder] = self._chars
        self._keep(f'"{placeholder}"')
        self._long = False
        self._carry = ""
        self._chars = 0
        self._short_len = 0

    def _measure(self, raw: str) -> None:
        """Decode (and so check) a long string's raw contents up to a safe cut; keep the rest."""
        text = self._carry + raw if self._carry else raw
        cut = _safe_cut(text)
        if cut:
            self._chars += len(scanstring(text[:cut] + '"', 0)[0])
        self._carry = text[cut:]


@functools.cache
def _fast_run(long_chars: int) -> Callable[[str, int], re.Match[str]]:
    """`match(text, pos)` of the longest run of what may stand between strings and of whole
    strings of at most `long_chars` characters without a backslash (kept as they are:
    `finish`'s json.loads checks them). It always matches, if only "", so it never
    backtracks."""
    between = _BETWEEN_STRINGS.pattern[:-1]  # the character class, without its `*`
    pattern = re.compile(rf'(?:{between}+|"[^"\\]{{0,{long_chars}}}")*', re.S)
    return pattern.match  # type: ignore[return-value]


def _closing_quote(text: str, lo: int) -> int:
    """Index of the first unescaped `"` at or after `lo` (inside a string), else -1.

    `str.find` and a look at the backslashes before each quote: a C-speed scan for text
    with few escaped quotes. Text full of them (code, embedded JSON) goes to the regex,
    which walks every character but never loops in Python."""
    q = text.find('"', lo)
    escaped = q
    for _ in range(8):
        if q < 0 or not _odd_backslashes(text, lo, q):
            return q
        escaped = q
        q = text.find('"', q + 1)
    match = _STRING_BODY.match(text, escaped + 1)  # always matches, if only ""
    end = match.end() if match else escaped + 1
    return end if end < len(text) and text[end] == '"' else -1


def _odd_backslashes(text: str, lo: int, end: int) -> bool:
    """Whether an odd run of backslashes ends at `end` (not reaching before `lo`): then the
    character at `end` is escaped."""
    k = end
    while k > lo and text[k - 1] == "\\":
        k -= 1
    return (end - k) % 2 == 1


def _safe_cut(raw: str) -> int:
    """The longest prefix of a string's raw contents that decodes alone as it would in place:
    it ends neither inside an escape nor between the two escapes of a surrogate pair.

    An escape is at most 6 characters (`\\uXXXX`), so only a backslash among the last 12
    can start one that is cut or that pairs with one that is cut."""
    n = len(raw)
    i = raw.find("\\", max(0, n - 12))
    if i < 0:
        return n
    # i may sit in a run of backslashes (`\\\\` is two escapes): the run's start, and every
    # second character after it, start an escape.
    run = i
    while run > 0 and raw[run - 1] == "\\":
        run -= 1
    cut = run + (i - run) // 2 * 2
    k = cut - 6
    if k >= 0 and _HIGH_SURROGATE.fullmatch(raw, k, cut) and not _odd_backslashes(raw, 0, k):
        cut = k  # that backslash starts an escape: a high surrogate, paired after the cut
    return cut
