"""Prompt calibration: the fit, the per-target cache, both ways of counting tokens."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from zqbench.dialects.base import DialectConfig
from zqbench.errors import TargetError
from zqbench.target.calibrate import CACHE_ENV, cache_key, calibrate, fit, probe_sizes
from zqbench.target.embedded import EmbeddedServer

MODEL = "zq-reference"


def test_fit_recovers_a_line_and_sizes_prompts() -> None:
    """A tokenizer of 4 bytes per token plus 7 template tokens: 1000 tokens = 3972 bytes."""
    cal = fit([(400, 107), (4000, 1007), (40000, 10007)], "usage")
    assert cal.tokens_per_byte == pytest.approx(0.25)
    assert cal.base_tokens == pytest.approx(7.0)
    assert cal.bytes_for(1000) == 3972
    assert cal.bytes_for(3) == 1  # never an empty prompt
    with pytest.raises(ValueError, match="two byte lengths"):
        fit([(10, 11), (10, 11)], "usage")


def test_counts_that_ignore_the_prompt_are_rejected_not_extrapolated() -> None:
    """A server that reports the same usage for every prompt (a stub, a cache) has slope 0;
    sizing a 4K prompt from it would ask for an impossible number of bytes."""
    with pytest.raises(TargetError, match="tokens per byte is implausible"):
        fit([(64, 8), (256, 8), (1024, 8)], "usage")
    with pytest.raises(TargetError, match="implausible"):
        fit([(64, 1000), (256, 5000)], "usage")  # 20 tokens per byte


def test_probes_fit_a_small_context() -> None:
    assert probe_sizes(None) == (64, 256, 1024)
    assert max(probe_sizes(256)) <= 128


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    log = tmp_path_factory.mktemp("cal") / "server.log"
    with EmbeddedServer(engine="sim", max_batch_size=2, log_path=log) as srv:
        yield srv


@pytest.mark.parametrize(("api", "source"), [("anthropic", "count_tokens"), ("openai", "usage")])
def test_reference_server_is_one_token_per_byte_plus_bos(
    server: EmbeddedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, api: str, source: str
) -> None:
    """Anthropic counts with count_tokens; OpenAI with a max_tokens 1 request's usage."""
    cache = tmp_path / "calibration.json"
    monkeypatch.setenv(CACHE_ENV, str(cache))
    cal = calibrate(server.base_url, api, DialectConfig(model=MODEL), max_context=2048)
    assert cal.source == source
    assert cal.probes == ((16, 17), (64, 65), (256, 257), (1024, 1025))
    assert cal.bytes_for(4096) == 4095
    assert json.loads(cache.read_text())[cache_key(server.base_url, api, MODEL)]["source"] == source


def test_cache_is_used_until_refreshed(
    server: EmbeddedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cached line is trusted without probes (a planted one proves it), `use_cache=False`
    measures again."""
    cache = tmp_path / "calibration.json"
    monkeypatch.setenv(CACHE_ENV, str(cache))
    probes = [[400, 103], [4000, 1003]]  # a planted line: 0.25 tokens per byte, 3 tokens base
    planted = {"tokens_per_byte": 0.25, "base_tokens": 3.0, "source": "usage", "probes": probes}
    cache.write_text(json.dumps({cache_key(server.base_url, "openai", MODEL): planted}))
    config = DialectConfig(model=MODEL)
    used = calibrate(server.base_url, "openai", config)
    assert used.probes == ((400, 103), (4000, 1003))
    assert used.tokens_per_byte == pytest.approx(0.25) and used.base_tokens == pytest.approx(3.0)
    fresh = calibrate(server.base_url, "openai", config, use_cache=False)
    assert fresh.tokens_per_byte == pytest.approx(1.0)
