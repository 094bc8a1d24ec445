"""Secrets never reach an output."""

from __future__ import annotations

import os

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


def test_this_processs_own_secrets_are_redacted_whatever_their_shape() -> None:
    """#25 item 5: the --api-key-env value and sensitive --header values are redacted in
    any text; values under 8 characters are not remembered (they would hit plain words)."""
    from zqbench.option_values import parse_headers, read_api_key
    from zqbench.redact import redact_known, redact_text

    os.environ["ZQ_TEST_OWN_KEY"] = "own-key-0123456789"
    try:
        assert read_api_key("ZQ_TEST_OWN_KEY") == "own-key-0123456789"
    finally:
        del os.environ["ZQ_TEST_OWN_KEY"]
    parse_headers(
        ("Authorization: Bearer tok-abcdefgh", "X-Api-Key: short", "X-Trace: trace-0123456789")
    )
    text = "echo own-key-0123456789 and tok-abcdefgh, short and trace-0123456789"
    assert redact_known(text) == "echo <redacted> and <redacted>, short and trace-0123456789"
    assert "own-key-0123456789" not in redact_text(f"400 invalid x-api-key: {text}")
