"""A check with nothing to judge skips, saying why; it never passes."""

from __future__ import annotations

from typing import cast

from zqbench.conform.checks.errors import _expect
from zqbench.conform.context import Target


def test_an_errors_check_without_a_case_skips() -> None:
    # errors.1 builds one case per required field the dialect names: none, nothing judged.
    result = _expect(cast(Target, None), [], 400)
    assert (result.status, result.reason) == (
        "skip",
        "no request to judge (the dialect names none for this check)",
    )
