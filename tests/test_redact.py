"""Secrets never reach an output."""

from __future__ import annotations

import pytest

from zqbench.redact import REDACTED, is_sensitive, redact, redact_headers, redact_url


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://user:pw@api.example.com/v1", "https://api.example.com/v1"),
        (
            "https://api.example.com/v1?api_key=sk-1&model=m",
            "https://api.example.com/v1?api_key=<redacted>&model=m",
        ),
        (
            "http://h:8000/x?key=abc&token=t&max_tokens=5",
            "http://h:8000/x?key=<redacted>&token=<redacted>&max_tokens=5",
        ),
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
    ],
)
def test_redact_url(url: str, expected: str) -> None:
    """Userinfo goes; sensitive query values become <redacted>; the rest stays."""
    assert redact_url(url) == expected


@pytest.mark.parametrize(
    "name",
    [
        "Authorization",
        "x-api-key",
        "X-Goog-Api-Key",
        "api_key",
        "apikey",
        "access_token",
        "token",
        "client_secret",
        "Cookie",
        "password",
        "signature",
        "key",
    ],
)
def test_sensitive_names(name: str) -> None:
    assert is_sensitive(name)


@pytest.mark.parametrize(
    "name",
    ["max_tokens", "output_tokens", "prompt_tokens", "tokens_from_usage", "monkey", "Accept"],
)
def test_counts_are_not_secrets(name: str) -> None:
    """Token counts share a word with secrets but are not redacted."""
    assert not is_sensitive(name)


def test_redact_headers() -> None:
    headers = {"Authorization": "Bearer sk-1", "x-api-key": "k", "Accept": "*/*"}
    assert redact_headers(headers) == {
        "Authorization": REDACTED,
        "x-api-key": REDACTED,
        "Accept": "*/*",
    }


def test_redact_nested_values_and_strings() -> None:
    """Nested mappings, URLs inside strings and bearer tokens / API keys in free text."""
    value = {
        "target": "https://u:p@h/v1?token=abc",
        "request": {"headers": {"anthropic-version": "2023-06-01", "x-api-key": "sk-ant-xyz"}},
        "max_tokens": 256,
        "note": "used Bearer abc.def-123 and sk-ant-api03-abcdefghijkl",
        "list": [{"secret": "s"}],
    }
    out = redact(value)
    assert out["target"] == "https://h/v1?token=<redacted>"
    assert out["request"]["headers"] == {"anthropic-version": "2023-06-01", "x-api-key": REDACTED}
    assert out["max_tokens"] == 256
    assert out["note"] == "used <redacted> and <redacted>"
    assert out["list"] == [{"secret": REDACTED}]
    assert value["request"]["headers"]["x-api-key"] == "sk-ant-xyz"  # the input is untouched
