"""A real llama.cpp server (llama-server built from source, the tiny random Llama) per session.

Set up by tests/llamacpp/setup.sh (`.ci/run` runs it). Where it is missing, the tests skip with
the reason; under CI=true a missing target is a failure, never a skip: CI must prove zqbench
against a second real engine.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.llamacpp.target import LlamaServer, free_port, llamacpp_available, start_llama_server
from tests.servers.process_group import need_engine


# Per module: stopped once its file is done, not kept (vLLM: 1.6 GB) beside the other
# engine, both pinned to core 0, for the rest of the run.
@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    need_engine("llama.cpp", llamacpp_available())
    log = tmp_path_factory.mktemp("llamacpp") / "llama-server.log"
    server = start_llama_server(free_port(), log)
    try:
        yield server
    finally:
        server.stop()
