"""The shared-prefix scenario against the reference server's own prefix cache: zqbench reads
the server's hit rate, and each response's cached tokens are exactly the shared blocks."""

from __future__ import annotations

import pyarrow.parquet as pq

from tests.core.conftest import MODEL
from zqbench.pipeline.run import RunOptions, run_scenario
from zqbench.summary import CacheCounters, CachedUsage
from zqbench.target.embedded import EmbeddedServer


def _run(server: EmbeddedServer, scenario: str, out, seed: int):  # type: ignore[no-untyped-def]
    return run_scenario(
        RunOptions.of(
            scenario=scenario,
            target=server.base_url,
            model=MODEL,
            duration_scale=0.15,  # 3 s at 10 req/s
            out=out,
            calibration="off",  # a byte a token: the shared prefix is 512 tokens exactly
            min_samples=20,
            api="openai",
            # A seed of this attempt's own (attempt_seed): this session's server kept other
            # runs' prompts, and a seed's synthetic prompts share their first words whatever
            # their length.
            seed=seed,
            html=False,  # nothing here reads report.html (~3 s of CPU a run)
        )
    )


def test_shared_prefixes_hit_the_reference_servers_cache_and_cold_prompts_do_not(
    ref_server: EmbeddedServer, tmp_path, attempt_seed: int
) -> None:
    warm = _run(ref_server, "shared-prefix", tmp_path / "warm", attempt_seed)
    cold = _run(ref_server, "shared-prefix-cold", tmp_path / "cold", attempt_seed)
    samples = pq.read_table(warm.out_dir / "samples.parquet").to_pylist()
    groups_seen = {s["source_row"] for s in samples}
    hits = [s for s in samples if s["cached_tokens"]]
    # Every request after its group's first finds the group's 512-token prefix: 32 blocks
    # of 16 tokens (BOS and 511 bytes), never its own suffix.
    assert all(s["cached_tokens"] == 512 and s["prompt_tokens"] == 544 for s in hits)
    assert len(hits) >= len(samples) - len(groups_seen)
    server = warm.summary.prefix_cache.server
    assert isinstance(server, CacheCounters) and server.hit_rate is not None
    assert server.hit_rate >= 0.5 and server.hits == 512 * len(hits)
    cold_server = cold.summary.prefix_cache.server
    assert isinstance(cold_server, CacheCounters) and cold_server.hits == 0
    cold_usage = cold.summary.prefix_cache.usage
    assert isinstance(cold_usage, CachedUsage) and cold_usage.cached_requests == 0
    # The sim engine charges prefill time for the tokens it computes: a hit's TTFT is lower,
    # by about 5 ms (512 tokens at 0.01 ms; medians 3.3 against 8.4 ms on a quiet machine).
    # A busy machine only adds time, and moved a median of 25-33 requests by 10 ms (13.7 ms
    # warm against 8.7 cold, twice in one CI run): the fastest request of each says it.
    assert warm.summary.metrics["ttft"].min < cold.summary.metrics["ttft"].min
