from __future__ import annotations

import math
import random
import traceback
from array import array
from email.utils import formatdate

import pytest

from zqbench.dialects import DIALECTS, AnthropicDialect, OpenAIDialect, get_dialect
from zqbench.dialects.base import DialectConfig, RequestSpec, ResponseSummary
from zqbench.dialects.common import (
    estimate_tokens,
    loads,
    parse_epoch,
    parse_retry_after,
)
from zqbench.dialects.itl import NUMPY_FROM, summarize_gaps, summarize_itl
from zqbench.errors import UsageError
from zqbench.redact import Secret

KEY = "sk-SECRET-do-not-print-42"


# ------------------------------------------------------------------ registry
def test_get_dialect():
    assert tuple(DIALECTS) == ("anthropic", "openai")
    cfg = DialectConfig(model="m")
    assert isinstance(get_dialect("anthropic", cfg), AnthropicDialect)
    assert isinstance(get_dialect("openai", cfg), OpenAIDialect)
    for name in DIALECTS:
        assert get_dialect(name, cfg).name == name


def test_unknown_dialect():
    with pytest.raises(UsageError) as info:
        get_dialect("x", DialectConfig(model="m", api_key=KEY))
    assert str(info.value) == "api 'x': choose anthropic or openai"
    assert info.value.render("--api") == "--api 'x': choose anthropic or openai"
    assert info.value.exit_code == 2


# ------------------------------------------------------------------ secrets
@pytest.mark.parametrize("name", DIALECTS)
def test_api_key_never_printed(name):
    cfg = DialectConfig(
        model="m", api_key=KEY, extra_headers=(("Authorization", f"Bearer {KEY}"), ("x-a", "b"))
    )
    dialect = get_dialect(name, cfg)
    req = dialect.build(RequestSpec("c", "p", 4))
    parser = dialect.parser(RequestSpec("c", "p", 4))
    parser.on_headers(401, {}, 1)
    parser.on_data(b'{"error":{"type":"authentication_error","message":"bad key"}}', 2)
    parser.on_end(3)
    for text in (
        repr(cfg),
        repr(dialect),
        repr(req),
        str(req),
        repr(req.headers),
        repr(parser.summary),
    ):
        assert KEY not in text, text
    try:
        raise RuntimeError(req)
    except RuntimeError:
        assert KEY not in traceback.format_exc()
    # ... yet the transport gets the real value however it reads it.
    secrets = [v for _, v in req.headers if isinstance(v, Secret)]
    assert len(secrets) == 2
    for v in secrets:
        assert KEY in v and KEY in str(v) and KEY in f"{v}" and KEY.encode() in v.encode()
        assert KEY in "%s" % v  # noqa: UP031


@pytest.mark.parametrize(
    "header", ["X-Auth-Token", "Proxy-Authorization", "Cookie", "X-Goog-Api-Key", "api-key"]
)
def test_every_sensitive_user_header_is_a_secret(header):
    """One definition of "sensitive" (zqbench.redact) for the wire and for the outputs."""
    cfg = DialectConfig(model="m", extra_headers=((header, KEY), ("X-Request-Tag", "t1")))
    req = get_dialect("openai", cfg).build(RequestSpec("c", "p", 4))
    values = dict(req.headers)
    assert isinstance(values[header], Secret) and KEY not in repr(req.headers)
    assert not isinstance(values["X-Request-Tag"], Secret)


# ------------------------------------------------------------------ header values
@pytest.mark.parametrize(
    ("value", "want"),
    [
        ("1764400000.123456", 1764400000.123456),
        (" 1764400000 ", 1764400000.0),
        (None, None),
        ("", None),
        ("abc", None),
        ("nan", None),
        ("inf", None),
        ("-5", None),
        ("1,5", None),
        ("1e308", None),  # finite, but no clock: every duration from it would be infinite
        ("1e11", None),
        ("99999999999", 99999999999.0),
    ],
)
def test_parse_epoch(value, want):
    assert parse_epoch(value) == want


def test_retry_after():
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after": "0.25"}) == 0.25
    assert parse_retry_after({"retry-after": "0"}) == 0.0
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after-ms": "junk", "retry-after": "9"}) == 9.0
    assert parse_retry_after({}) is None
    for junk in ("-1", "nan", "soon", "", "Mon, 99 Foo 2026 25:61:61 GMT"):
        assert parse_retry_after({"retry-after": junk}) is None, junk


def test_retry_after_http_date():
    now = 1_764_400_000.0
    date = formatdate(now + 30, usegmt=True)
    assert parse_retry_after({"retry-after": date}, now=now) == 30.0
    assert parse_retry_after({"retry-after": formatdate(now - 30, usegmt=True)}, now=now) == 0.0
    # Default `now` is the wall clock.
    import time

    live = parse_retry_after({"retry-after": formatdate(time.time() + 60, usegmt=True)})
    assert live is not None and 55 <= live <= 61


def test_estimate_tokens():
    assert [estimate_tokens(n) for n in (0, 1, 2, 5, 6, 8, 400)] == [0, 1, 1, 1, 2, 2, 100]


# ------------------------------------------------------------------ ITL
def test_itl_too_few_chunks():
    assert summarize_itl([]) == (None, None, None)
    assert summarize_itl([5]) == (None, None, None)


def test_itl_known_answers():
    assert summarize_itl([0, 10]) == (10, 10, 10)
    # gaps 10, 30, 20 -> mean 20; n=3, rank ceil(2.97)=3 -> 30
    assert summarize_itl([0, 10, 40, 60]) == (20, 30, 30)
    # gaps 0, 0, 5 (chunks read together): mean 5/3 rounds to 2
    assert summarize_itl([7, 7, 7, 12]) == (2, 5, 5)


def test_itl_p99_rank_at_100_and_200_gaps():
    # 100 gaps 1..100: rank ceil(99) = 99 -> 99 (not the max).
    times = [0]
    for g in range(1, 101):
        times.append(times[-1] + g)
    assert summarize_itl(times) == (round(5050 / 100), 99, 100)
    # 200 gaps 1..200 in shuffled order: rank 198 -> 198.
    gaps = list(range(1, 201))
    gaps = gaps[::2] + gaps[1::2]
    times = [0]
    for g in gaps:
        times.append(times[-1] + g)
    mean, p99, mx = summarize_itl(times)
    assert (mean, p99, mx) == (round(sum(gaps) / 200), 198, 200)
    # 101 gaps: rank ceil(99.99) = 100 of 101.
    times = list(range(0, 102))
    times[-1] = 1000
    assert summarize_itl(times)[1:] == (1, 1000 - 100)
    assert math.ceil(0.99 * 101) == 100


def test_itl_of_many_gaps_is_the_same_order_statistic() -> None:
    """From NUMPY_FROM gaps on numpy selects the p99 (no Python sort at a response's end)."""
    rng = random.Random(3)
    for n, zeros in ((NUMPY_FROM - 1, 0.7), (NUMPY_FROM, 0.7), (5000, 0.0), (150_001, 0.995)):
        gaps = [0 if rng.random() < zeros else rng.randrange(10**9) for _ in range(n)]
        ordered = sorted(gaps)
        want = (round(sum(gaps) / n), ordered[(99 * n + 99) // 100 - 1], ordered[-1])
        assert summarize_gaps(array("q", gaps)) == want
        summary = ResponseSummary()
        t = 0
        summary.add_token(t)
        for g in gaps:
            t += g
            summary.add_token(t)
        assert summary.itl() == want == summarize_itl(summary.token_times)
    # Times that go back (never from a parser): the order statistic all the same.
    gaps = [rng.randrange(-50, 50) for _ in range(3000)]
    assert summarize_gaps(gaps)[1] == sorted(gaps)[(99 * 3000 + 99) // 100 - 1]


@pytest.mark.parametrize(
    "text", ['{"a":1}', ' {"a":1}', '{"a":1} \n', "[1]", '"s"', "3", "null", "\t{}"]
)
def test_loads_accepts_what_json_accepts(text):
    import json

    assert loads(text) == json.loads(text)


@pytest.mark.parametrize("text", ["", " ", "{", '{"a":1} x', "{}{}", "nope", "[1,]", "NaNx"])
def test_loads_rejects_what_json_rejects(text):
    with pytest.raises(ValueError):
        loads(text)
