"""Secrets never reach a log or an output: one definition of what is sensitive, used by the
dialects (which wrap credentials in `Secret` before they are sent) and by every writer (which
removes them from URLs, headers and mappings).

    redact_url("https://user:pw@api.x.com/v1?api_key=sk-1&model=m")
        -> "https://api.x.com/v1?api_key=<redacted>&model=m"
    redact_headers({"Authorization": "Bearer sk-1", "Accept": "*/*"})
        -> {"Authorization": "<redacted>", "Accept": "*/*"}
    redact(obj)  # any JSON-like value: sensitive keys, URLs and key-looking strings
    Secret("sk-1")  # a str whose repr is '<redacted>': safe in reprs, logs and tracebacks

A name is sensitive when it contains authorization, cookie, secret, passw, api-key /
api_key / apikey, signature, or ends in key / token (so x-api-key, access_token and
refresh_token are redacted, while max_tokens and output_tokens, which are counts, are not).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

REDACTED = "<redacted>"

_SENSITIVE_NAME = re.compile(
    r"authorization|cookie|secret|passw|api[-_]?key|signature|(^|[-_.])(key|token|sig)$",
    re.IGNORECASE,
)
# Bearer/Basic credentials and well-known API key shapes, wherever they appear in a string.
_SECRET_VALUE = re.compile(
    r"(?i:\b(?:bearer|basic)\s+)[A-Za-z0-9._~+/=-]+"
    r"|\bsk-[A-Za-z0-9_-]{8,}"
    r"|\b(?:ghp|gho|github_pat|hf|xox[abp])_[A-Za-z0-9_]{8,}"
)
# A scheme is short: unbounded, the search backtracked over every long word from each of its
# letters (quadratic: a target's 100 kB model id held the summary's writer for minutes).
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,31}://[^\s\"'<>]+")


def is_sensitive(name: str) -> bool:
    """True for header, parameter or field names that carry credentials."""
    return bool(_SENSITIVE_NAME.search(name))


class Secret(str):
    """A header value that prints as `'<redacted>'` in every repr (request, tuple, traceback).

    It is still a `str` with the real value for the transport: `encode()`, f-strings and
    `str()` return the key. Only `repr` is changed, which is what logs and dataclass reprs use.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return "'<redacted>'"


def secret_headers(headers: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """The headers, with the value of every sensitive one wrapped in `Secret`."""
    return tuple((k, Secret(v) if is_sensitive(k) else v) for k, v in headers)


def redact_url(url: str) -> str:
    """The URL without userinfo, with the values of sensitive query parameters redacted."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return REDACTED
    netloc = parts.netloc.rpartition("@")[2]
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, REDACTED if is_sensitive(k) else v) for k, v in pairs], safe="<>")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


# The values of this process's own secrets (the --api-key-env key, sensitive --header values):
# a target that echoes one back in an error body must not get it printed, whatever its shape.
_KNOWN: set[str] = set()
_KNOWN_MIN_LEN = 8  # shorter values would redact ordinary words (keys are longer)


def remember_secret(value: str) -> None:
    """Redact `value` wherever `redact_text` (and the CLI's terminal) sees it from now on;
    for `Bearer X` the token X too."""
    value = value.strip()
    for part in (value, value.partition(" ")[2]):
        part = part.strip()
        if len(part) >= _KNOWN_MIN_LEN:
            _KNOWN.add(part)


def redact_known(text: str) -> str:
    """`text` with this process's known secret values replaced, longest first."""
    if not _KNOWN:
        return text  # every terminal write passes here: nothing to look for, no cost
    for value in sorted(_KNOWN, key=len, reverse=True):
        if value in text:
            text = text.replace(value, REDACTED)
    return text


def redact_text(text: str) -> str:
    """URLs in the text lose their credentials; bearer tokens, API keys and the values of
    this process's own secrets are redacted."""
    text = _URL.sub(lambda m: redact_url(m.group(0)), redact_known(text))
    return _SECRET_VALUE.sub(REDACTED, text)


def redact_headers(headers: dict[str, str]) -> dict[str, str]:
    """Header values of Authorization, x-api-key and any name with key/token/secret."""
    return {k: REDACTED if is_sensitive(k) else v for k, v in headers.items()}


def redact(value: Any) -> Any:
    """A copy of a JSON-like value with every secret replaced by "<redacted>"."""
    if isinstance(value, dict):
        return {
            k: (REDACTED if isinstance(k, str) and is_sensitive(k) and v is not None else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value
