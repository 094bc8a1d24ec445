"""#25 item 17: conform against a target that accepts connections and never answers took
332 s (every check waited out its timeout). The reachability check ends it at once."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from zqbench.cli import app


@pytest.fixture
def silent_url() -> Iterator[str]:
    """Connections are accepted (by the kernel's backlog) and never answered."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


def test_conform_stops_at_once_when_the_target_never_answers(silent_url: str) -> None:
    t0 = time.monotonic()
    result = CliRunner().invoke(app, ["conform", "--target", silent_url, "--timeout", "1"])
    elapsed = time.monotonic() - t0
    assert result.exit_code == 3
    assert result.output.strip().splitlines() == [
        f"zqbench: error: cannot reach {silent_url[7:]}: no answer within 1 s"
    ]
    assert elapsed < 30  # one bounded probe, not one timeout per check
