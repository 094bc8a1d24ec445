"""Synthetic prompts: exact byte length, determinism, different per seed."""

from __future__ import annotations

import pytest

from zqbench.sources.prompts import synth_prompt, synth_text


@pytest.mark.parametrize("tokens", [1, 2, 3, 4, 5, 6, 7, 17, 32, 33, 255, 1000, 4096])
def test_exact_byte_length(tokens: int) -> None:
    for seed in (0, 1, 12345):
        p = synth_prompt(tokens, seed)
        assert len(p.encode("utf-8")) == tokens - 1
        assert p.isascii()
        assert p == p.strip()


def test_deterministic_and_different_per_seed() -> None:
    synth_text.cache_clear()
    a = synth_prompt(256, 1)
    synth_text.cache_clear()
    assert synth_prompt(256, 1) == a
    others = {synth_prompt(256, s) for s in range(2, 50)}
    assert a not in others and len(others) == 48
    assert synth_prompt(256, 1)[:20] != synth_prompt(256, 2)[:20]


def test_words() -> None:
    p = synth_prompt(200, 9)
    words = p.split(" ")
    assert words[0] == "9:"
    assert all(w.isalpha() for w in words[1:-1])


def test_long_prompt_has_its_exact_size() -> None:
    synth_text.cache_clear()
    p = synth_prompt(131072, 4)
    assert len(p.encode()) == 131071


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_rejects_bad_sizes(bad: object) -> None:
    with pytest.raises(ValueError):
        synth_prompt(bad, 0)  # type: ignore[arg-type]
