"""Command line: flags over an optional config.yaml, then serve.

`main(argv)` returns an exit code (0 clean stop, 2 bad configuration); only
`__main__` calls sys.exit. argparse, not typer: the server must start fast and
import nothing heavy before it knows which engine it needs.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from reference_server.config import (
    DEVICES,
    ENGINES,
    HTTP_MODES,
    KV_DTYPES,
    SCHEDULERS,
    STEP_SHAPES,
    ServerConfig,
    api_key_from_env,
    load_yaml,
)

# Each flag fills the ServerConfig field of its own name, but these, whose fields name their
# unit, and the three read below.
_RENAMED = {
    "retry_after": "retry_after_s",
    "queue_timeout": "queue_timeout_s",
    "drain_timeout": "drain_timeout_s",
    "body_timeout": "body_timeout_s",
    "idle_timeout": "idle_timeout_s",
}
_NOT_FIELDS = ("config", "api_key", "api_key_env")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="reference_server",
        description="zqbench's reference inference server: a zero-queue endpoint and its "
        "queued (fifo) twin, over a small torch transformer or a calibrated simulation.",
    )
    a = p.add_argument
    a("--config", help="config.yaml (keys: see docs/reference-server.md); flags override it")
    a("--engine", choices=ENGINES, help="compute engine; auto = torch if importable, else sim")
    a("--scheduler", choices=SCHEDULERS, help="admission: zero-queue (refuse) or fifo (queue)")
    a("--host", help="bind address (default 127.0.0.1)")
    a("--port", type=int, help="TCP port (default 8000)")
    a("--max-batch-size", type=int, help="sequence slots: requests computed at once (default 8)")
    a("--preset", "--model-path", dest="preset", help="torch model preset or checkpoint")
    a("--device", choices=DEVICES, help="torch device (default auto: cuda if available)")
    a("--seed", type=int, help="weights and sampling seed (default 0)")
    a("--served-model-name", help="model id served and accepted (default zq-reference)")
    a("--max-context", type=int, help="prompt + output tokens per request (default 2048)")
    a("--max-tokens-limit", type=int, help="largest max_tokens accepted (default 2048)")
    a("--default-max-tokens", type=int, help="OpenAI route default max_tokens (default 256)")
    _answer_flags(a)
    a("--body-limit", type=int, help="request body limit in bytes (default 32 MiB)")
    a("--retry-after", type=float, help="Retry-After seconds on refusals; 0 omits (default 1)")
    no_retry = "send x-should-retry: false on refusals, so SDK clients do not retry them"
    a("--no-sdk-retry", action="store_const", const=True, help=no_retry)
    a("--queue-timeout", type=float, help="fifo: seconds a request may wait before 429")
    a("--gpu-memory-utilization", type=float, help="fraction of the KV cache admission may use")
    a("--max-concurrent-kernels", type=int, help="CPU: torch intra-op threads")
    a("--dispatch-latency-target-us", type=float, help="zero-queue: refuse if the step ends later")
    a("--kv-cache-dtype", choices=KV_DTYPES, help="torch KV cache dtype (default auto)")
    a(
        "--step-shape",
        choices=STEP_SHAPES,
        help="dynamic: a decode step computes the running slots (default); fixed: every "
        "slot, so its cost does not depend on occupancy",
    )
    a(
        "--prefill-budget-tokens",
        type=int,
        help="fixed steps: prompt tokens prefilled at one step boundary (default 256)",
    )
    a(
        "--prefix-cache-blocks",
        type=int,
        help="prefix cache size in blocks, LRU-evicted; 0 = off (default 1024)",
    )
    a("--prefix-cache-block-size", type=int, help="tokens a prefix-cache block holds (default 16)")
    a("--http", choices=HTTP_MODES, help="auto = HTTP/1.1 and h2c on one port (default)")
    a("--ssl-cert", help="TLS certificate (PEM); with --ssl-key enables https + ALPN h2")
    a("--ssl-key", help="TLS private key (PEM)")
    a("--drain-timeout", type=float, help="seconds SIGTERM waits for in-flight requests")
    a("--body-timeout", type=float, help="seconds a request body may take to arrive (default 30)")
    a("--idle-timeout", type=float, help="seconds a silent connection stays open (default 30)")
    a("--max-connections", type=int, help="open connections at most; more wait (default 1024)")
    a(
        "--api-key-env",
        metavar="VAR",
        help="require the API key held in environment VAR, on the API and on POST "
        "/start_profile and /stop_profile; without a key any client that reaches the port "
        "may start and stop profiling (each stop writes a trace with "
        "REFSERVER_TORCH_PROFILER_DIR set; the newest REFSERVER_TORCH_PROFILER_KEEP, "
        "default 8, are kept)",
    )
    a("--api-key", help="require this API key (prefer --api-key-env: argv is visible)")
    return p


def _answer_flags(a: Any) -> None:
    """What an answer holds and says: thinking, and the timing headers."""
    a(
        "--thinking-tokens",
        type=int,
        help="a reasoning model: every request thinks this many tokens before it answers, "
        "unless it sends thinking: {type: disabled} (default 0)",
    )
    a(
        "--thinking-display",
        choices=("summarized", "omitted"),
        help="Anthropic route: omitted streams each thinking block with only its signature, "
        "unless the request's thinking.display says summarized (default summarized)",
    )
    a(
        "--no-timing-headers",
        dest="timing_headers",
        action="store_const",
        const=False,
        help="send no X-Request-*-Time headers and no received/dispatch/start in zq_timing, "
        "as an engine that does not say when it dispatched (vLLM, llama.cpp)",
    )


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    values: dict[str, Any] = load_yaml(args.config) if args.config else {}
    for dest, v in vars(args).items():
        if dest not in _NOT_FIELDS and v is not None:
            values[_RENAMED.get(dest, dest)] = v
    if args.api_key_env:
        values["api_key"] = api_key_from_env(args.api_key_env)
    elif args.api_key:
        values["api_key"] = args.api_key
    return ServerConfig(**values)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = config_from_args(args)
    except (ValueError, TypeError, OSError) as exc:
        print(f"reference_server: configuration error: {exc}", file=sys.stderr)
        return 2
    from reference_server.server import serve  # imports granian only when serving

    try:
        return serve(config)
    except ValueError as exc:
        print(f"reference_server: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"reference_server: cannot start: {exc}", file=sys.stderr)
        return 3


if __name__ == "__main__":  # pragma: no cover
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
