"""`RequestSpec.keep_answer`: the answer's text kept, streamed or not, in both dialects."""

from __future__ import annotations

import pytest

from tests.dialects.frames import (
    A_BODY,
    A_STREAM,
    A_TEXT,
    JSON_HEADERS,
    O_BODY,
    O_STREAM,
    feed,
    split_at,
)
from zqbench.dialects import AnthropicDialect, OpenAIDialect
from zqbench.dialects.base import DialectConfig, RequestSpec

CONFIG = DialectConfig(model="m")


@pytest.mark.parametrize(
    ("dialect", "stream"), [(AnthropicDialect, A_STREAM), (OpenAIDialect, O_STREAM)]
)
def test_a_streamed_answer_is_kept_whole_however_it_is_cut(dialect: type, stream: bytes) -> None:
    spec = RequestSpec("c", "hi", 8, keep_answer=True)
    for cuts in ([], [7, 50, 51, 200], list(range(1, len(stream), 13))):
        summary = feed(dialect(CONFIG).parser(spec), split_at(stream, cuts))
        assert summary.error is None and "".join(summary.answer or ["<none>"]) == A_TEXT
    plain = feed(dialect(CONFIG).parser(RequestSpec("c", "hi", 8)), [stream])
    assert plain.answer is None  # not asked: nothing held


@pytest.mark.parametrize(("dialect", "body"), [(AnthropicDialect, A_BODY), (OpenAIDialect, O_BODY)])
def test_a_whole_body_answer_is_kept(dialect: type, body: bytes) -> None:
    spec = RequestSpec("c", "hi", 8, stream=False, keep_answer=True)
    summary = feed(dialect(CONFIG).parser(spec), [body], headers=JSON_HEADERS)
    assert "".join(summary.answer or ["<none>"]) == "Hello, wörld"
