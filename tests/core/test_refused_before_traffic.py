"""A scenario the run cannot honour is refused with exit 2 before any traffic (#44 item 6).

Each case runs against a programmed server whose own counts are the ground truth: it must
have received no request and accepted no connection. Before, `--distributed` with [stop]
rules or Retry-After follow-ups, and a prompt larger than any context, were found out
after the target had been contacted (probed, or loaded and judged invalid: exit 3 or 4).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.core.conftest import write_scenario, zqbench_here
from tests.servers import ProgrammedServer
from zqbench.errors import EXIT_USAGE

LOAD = """
name = "early"
api = "anthropic"
[load]
executor = "constant-arrival-rate"
rate = 10
duration = "1s"
[request]
max_tokens = 4
"""

SESSIONS = """
name = "early"
api = "anthropic"
[load]
executor = "sessions"
rate = 1
duration = "1s"
turns = {turns}
[request]
prompt_tokens = {tokens}
max_tokens = 4
"""
SECRET_ENV = "test-secret-0123456789abcdef"
# The target answers every request at once, the API checks and probes too: what refuses
# the run must be zqbench, before it asks anything.
PROGRAM = "x-program: /anthropic?n=1&every=1"


def _refused(tmp_path: Path, body: str, *flags: str) -> tuple[int, str, dict]:
    """The CLI's exit code and last stderr line, and the server's counts."""
    path = write_scenario(tmp_path, body)
    with ProgrammedServer() as server:
        result = zqbench_here(
            "run", str(path), "--target", server.url, "--model", "m", "--calibration", "off",
            "--out", str(tmp_path / "run"), "-q", "--header", PROGRAM, *flags,
        )  # fmt: skip
        counts = server.all_truth()
    assert not (tmp_path / "run").exists()  # nothing was written either
    return result.returncode, result.stderr.strip().splitlines()[-1], counts


DISTRIBUTED = ("--distributed", "--expect-workers", "1", "--worker-wait", "1")


@pytest.mark.parametrize(
    ("body", "flags", "message"),
    [
        (
            LOAD + "[stop.queue_growth]\nmin_requests = 2\n",
            (),
            "stop.queue_growth.min_requests = 2 must be >= 3: a slope's confidence bound "
            "needs 3 waits (n - 2 degrees of freedom)",
        ),
        (
            LOAD + "[stop.error_rate]\nabove = 0.5\n",
            DISTRIBUTED,
            "[stop] rules watch this machine's workers only: remove the [stop] table for a "
            "--distributed run",
        ),
        (
            LOAD + "[outcomes]\nretry_after_follow_ups = 5\n",
            DISTRIBUTED,
            "[outcomes] retry_after_follow_ups runs on this machine's workers only: remove it "
            "for a --distributed run",
        ),
        (
            LOAD.replace("max_tokens = 4", "max_tokens = 4\nprompt_tokens = 1e8"),
            (),
            "request.prompt_tokens = 100000000.0 is more than 10,000,000 tokens, past any "
            "model's context (the largest, 10M); give a prompt the target's context holds",
        ),
        (
            LOAD + '[[request.mix]]\nname = "huge"\nweight = 1\nprompt_tokens = 100_000_000\n',
            (),
            "request.mix[0].prompt_tokens = 100000000 is more than 10,000,000 tokens, past "
            "any model's context (the largest, 10M); give a prompt the target's context holds",
        ),
        (
            SESSIONS.format(turns=2, tokens="1e8"),
            (),
            "request.prompt_tokens = 100000000.0 is more than 10,000,000 tokens, past any "
            "model's context (the largest, 10M); give a prompt the target's context holds",
        ),
        (
            SESSIONS.format(turns=10_000, tokens=2000),
            (),
            "load.turns = 10000 sends 10000 messages of 2,000 tokens in a session's last "
            "turn (20,000,000 tokens before the answers), past any model's context (the "
            "largest, 10M); give fewer turns or shorter messages",
        ),
    ],
)
def test_refused_before_any_request(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    body: str,
    flags: tuple[str, ...],
    message: str,
) -> None:
    monkeypatch.setenv("ZQBENCH_SECRET", SECRET_ENV)
    code, line, counts = _refused(tmp_path, body, *flags)
    path = tmp_path / "t.toml"
    prefix = "zqbench: error: " + ("" if flags else f"{path}: ")
    assert (code, line) == (EXIT_USAGE, prefix + message)
    assert (counts["requests"], counts["conns"], counts["truth"]) == (0, 0, {})
