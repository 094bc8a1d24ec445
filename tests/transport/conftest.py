from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from tests.servers.fixtures import (  # noqa: F401  (fixtures, used by name)
    blackhole_url,
    programmed_server,
    refused_url,
    tls_server,
)


@pytest.fixture(autouse=True)
def _collect_garbage() -> Iterator[None]:
    """Collect after each test so a leaked socket warns in the test that leaked it."""
    yield
    gc.collect()
