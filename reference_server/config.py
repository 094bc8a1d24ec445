"""Server configuration: one frozen record, from flags over an optional config.yaml.

The YAML keys are those of the original deployment guide, each with a real meaning
here (docs/reference-server.md has the table):

    model_path                 a preset name (tiny, small, ...) or a saved checkpoint path
    gpu_memory_utilization     fraction of the preallocated KV cache (slots x max_context
                               positions) that admission may reserve; a request reserves
                               prompt + max_tokens positions up front
    max_batch_size             sequence slots: the most requests computed at once
    max_concurrent_kernels     CPU: torch intra-op threads of the engine; CUDA: ignored
                               (one stream, decode steps replayed as CUDA graphs)
    dispatch_latency_target_us zero-queue also refuses a request whose wait for the next
                               step boundary would exceed this (expected end of the running
                               step); unset = refuse only when no slot is free
    kv_cache_dtype             dtype of the torch KV cache (auto, float32, float16, bfloat16)
    prefix_cache_blocks        blocks the prefix cache holds (LRU); 0 = no prefix cache
    prefix_cache_block_size    prompt tokens a prefix-cache block holds (vLLM's 16)
    step_shape                 dynamic (default): a decode step computes the running slots;
                               fixed: every slot (free ones padded and masked, as a CUDA-graph
                               replay of the full batch does), so its cost does not depend on
                               occupancy
    prefill_budget_tokens      fixed steps: prompt tokens prefilled at one step boundary; the
                               admitted prompts past it wait for the next (a longer prompt
                               alone); low-latency requests are never held back
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reference_server.model.prefix_cache import DEFAULT_BLOCK_SIZE, DEFAULT_BLOCKS
from reference_server.model.sim import SimCost

ENGINES = ("auto", "torch", "sim")
SCHEDULERS = ("zero-queue", "fifo")
DEVICES = ("auto", "cuda", "cpu")
KV_DTYPES = ("auto", "float32", "float16", "bfloat16")
HTTP_MODES = ("auto", "1", "2")
STEP_SHAPES = ("fixed", "dynamic")  # as reference_server.model.torch_runner.STEP_SHAPES

# YAML key -> ServerConfig field, where the guide's name differs from ours.
_YAML_ALIASES = {"model_path": "preset", "max_model_len": "max_context"}


@dataclass(frozen=True, slots=True)
class ServerConfig:
    engine: str = "auto"
    scheduler: str = "zero-queue"
    host: str = "127.0.0.1"
    port: int = 8000
    max_batch_size: int = 8
    preset: str = "tiny"  # or a checkpoint path (config.yaml: model_path)
    checkpoint_preset: str = "tiny"  # the architecture of a checkpoint given as model_path
    device: str = "auto"
    seed: int = 0
    served_model_name: str = "zq-reference"
    max_context: int = 2048  # prompt + output tokens per sequence (KV positions per slot)
    max_tokens_limit: int = 2048  # largest max_tokens a request may ask for
    default_max_tokens: int = 256  # OpenAI route, when the request names none
    thinking_tokens: int = 0  # each request thinks this many tokens first (a reasoning model)
    # Anthropic route: "omitted" streams a thinking block with its signature only, unless the
    # request's thinking.display asks for "summarized" (the newest Claude models' default)
    thinking_display: str = "summarized"
    body_limit: int = 32 * 1024 * 1024  # bytes, as the Messages API
    retry_after_s: float = 1.0  # Retry-After on refusals; 0 omits the header
    no_sdk_retry: bool = False  # send x-should-retry: false, so SDKs show raw refusals
    # Say when each request was received, dispatched and started (X-Request-*-Time headers
    # and zq_timing); off, the server is as silent about its queue as vLLM or llama.cpp.
    timing_headers: bool = True
    queue_timeout_s: float | None = None  # fifo: waits longer than this become 429
    api_key: str | None = field(default=None, repr=False)
    gpu_memory_utilization: float = 1.0
    max_concurrent_kernels: int | None = None
    dispatch_latency_target_us: float | None = None
    kv_cache_dtype: str = "auto"
    prefix_cache_blocks: int = DEFAULT_BLOCKS  # 0 turns the prefix cache off
    prefix_cache_block_size: int = DEFAULT_BLOCK_SIZE
    use_cuda_graphs: bool = True
    # dynamic, from measurement (docs/performance.md, "Step shapes on CPU"): on one CPU
    # core fixed steps keep it busy always, and the front end's work lands on the steps
    step_shape: str = "dynamic"
    # fixed steps: prompt tokens prefilled at one step boundary (the rest at the next)
    prefill_budget_tokens: int = 256
    http: str = "auto"
    ssl_cert: str | None = None
    ssl_key: str | None = None
    drain_timeout_s: float = 10.0
    body_timeout_s: float = 30.0  # a request body must arrive within this of its head
    idle_timeout_s: float = 30.0  # closes connections that send nothing for this long
    max_connections: int = 1024  # open connections; more wait in the listen backlog
    sim: SimCost = field(default_factory=SimCost)

    def __post_init__(self) -> None:
        _one_of("engine", self.engine, ENGINES)
        _one_of("scheduler", self.scheduler, SCHEDULERS)
        _one_of("device", self.device, DEVICES)
        _one_of("kv_cache_dtype", self.kv_cache_dtype, KV_DTYPES)
        _one_of("step_shape", self.step_shape, STEP_SHAPES)
        _one_of("http", self.http, HTTP_MODES)
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be 0..65535, got {self.port}")
        if self.max_batch_size < 1:
            raise ValueError("max_batch_size must be >= 1")
        if self.max_context < 2:
            raise ValueError("max_context must be >= 2")
        if not self.max_tokens_limit >= 1:
            raise ValueError("max_tokens_limit must be >= 1")
        if not 1 <= self.default_max_tokens <= self.max_tokens_limit:
            raise ValueError("default_max_tokens must be in 1..max_tokens_limit")
        if self.thinking_tokens < 0:
            raise ValueError("thinking_tokens must be >= 0")
        if self.thinking_display not in ("summarized", "omitted"):
            raise ValueError("thinking_display must be summarized or omitted")
        if self.body_limit < 1024:
            raise ValueError("body_limit must be >= 1024 bytes")
        if self.retry_after_s < 0:
            raise ValueError("retry_after must be >= 0")
        if self.queue_timeout_s is not None and self.queue_timeout_s <= 0:
            raise ValueError("queue_timeout must be > 0")
        if self.queue_timeout_s is not None and self.scheduler != "fifo":
            raise ValueError("queue_timeout applies to the fifo scheduler only")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError("gpu_memory_utilization must be in (0, 1]")
        if self.max_concurrent_kernels is not None and self.max_concurrent_kernels < 1:
            raise ValueError("max_concurrent_kernels must be >= 1")
        if self.dispatch_latency_target_us is not None and self.dispatch_latency_target_us <= 0:
            raise ValueError("dispatch_latency_target_us must be > 0")
        if (self.ssl_cert is None) != (self.ssl_key is None):
            raise ValueError("TLS needs both ssl_cert and ssl_key")
        if self.drain_timeout_s < 0:
            raise ValueError("drain_timeout must be >= 0")
        if self.body_timeout_s <= 0:
            raise ValueError("body_timeout must be > 0")
        if self.idle_timeout_s < 0.001:
            raise ValueError("idle_timeout must be >= 0.001 (granian counts milliseconds)")
        if self.prefix_cache_blocks < 0:
            raise ValueError("prefix_cache_blocks must be >= 0 (0 turns the cache off)")
        if self.prefix_cache_block_size < 1:
            raise ValueError("prefix_cache_block_size must be >= 1")
        if self.prefill_budget_tokens < 1:
            raise ValueError("prefill_budget_tokens must be >= 1")
        if self.max_connections < 1:
            raise ValueError("max_connections must be >= 1")
        if self.api_key is not None and not self.api_key:
            raise ValueError("api_key must not be empty")

    @property
    def kv_budget_tokens(self) -> int:
        return int(self.gpu_memory_utilization * self.max_batch_size * self.max_context)


def _one_of(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read config.yaml into ServerConfig keyword arguments; unknown keys are errors."""
    import yaml  # only needed with --config

    raw = yaml.safe_load(Path(path).read_text()) or {}
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a mapping at top level")
    names = {f.name for f in dataclasses.fields(ServerConfig)}
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = _YAML_ALIASES.get(key, key)
        if name == "sim":
            if not isinstance(value, dict):
                raise ValueError(f"{path}: sim must be a mapping of cost parameters")
            value = SimCost(**{k: float(v) for k, v in value.items()})
        elif name not in names or name == "api_key":
            raise ValueError(f"{path}: unknown key {key!r}")
        out[name] = value
    return out


def api_key_from_env(var: str) -> str:
    key = os.environ.get(var)
    if not key:
        raise ValueError(f"--api-key-env {var}: the variable is unset or empty")
    return key
