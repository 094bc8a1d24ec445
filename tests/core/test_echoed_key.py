"""#25 item 5: a target that echoes the API key in its error body never gets the key onto
the terminal. Before, `run`, `probe` and `conform` printed `400 invalid x-api-key: <key>`
verbatim (only sk-shaped strings were redacted); now the key's own value is redacted
wherever zqbench writes to stdout or stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from tests.servers.in_thread import read_body, send_json, serve

KEY = "zq-echo-key-1234567890"  # not sk-shaped: only its own value can redact it


class _Echo(BaseHTTPRequestHandler):
    """Every request: 400, the key it was sent quoted back in the error message."""

    def _answer(self) -> None:
        read_body(self)
        key = self.headers.get("x-api-key") or self.headers.get("authorization", "")
        error = {"type": "authentication_error", "message": f"invalid x-api-key: {key}"}
        send_json(self, 400, {"type": "error", "error": error})

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def echo_url() -> Iterator[str]:
    with serve(_Echo) as url:
        yield url


@pytest.mark.parametrize(
    "command",
    [
        ["probe", "-n", "2"],
        ["run", "smoke", "--out", "{tmp}/run"],
        ["conform", "--only", "api"],
    ],
    ids=["probe", "run", "conform"],
)
def test_an_echoed_key_is_redacted_on_the_terminal(
    echo_url: str, command: list[str], tmp_path: object
) -> None:
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    done = subprocess.run(
        [sys.executable, "-m", "zqbench", *args, "--target", echo_url, "--api", "anthropic",
         "--model", "m", "--api-key-env", "ZQ_ECHO_KEY"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "ZQ_ECHO_KEY": KEY},
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert KEY not in out
    assert "invalid x-api-key: <redacted>" in out  # the target's words still show
    assert "Traceback" not in out
