"""Telemetry beside a run: GPU utilization, the server's own queue metrics, gpu_density.

    density.py     gpu_density: mean GPU busy fraction while >= 1 request is in flight
    table.py       the telemetry Parquet tables in the run folder (one writer, one schema)
    sampler.py     what the samplers share: polling on absolute times, gpu_density in results
    nvml.py        NvmlSampler: a RunHook polling NVML at 10 Hz (local GPUs)
    prometheus.py  PrometheusScraper: a RunHook scraping /metrics (DCGM, vLLM, SGLang, TGI,
                   refserver)
    engines.py     the engines whose /metrics tell their queue, and their series' names
    discovery.py   discover: one bounded GET of the target's <origin>/metrics, the engine
                   recognised or why none; NoServerMetrics records the reason in a run
    server_queue.py  summary.json's server_queue from the scrapes: gauges, queue-time
                   percentiles from the histogram's growth (histogram_quantile)

Hooks record on the run's monotonic clock and write epoch times through one anchor per
hook, so their tables line up with the samples. A metric without data is absent, never 0.
"""
