"""The distributed master listens on loopback unless told otherwise (#25: a master on every
interface is reachable from the whole network, secret or not)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from tests.core.conftest import REPO
from zqbench.cli.app import app
from zqbench.pipeline.options import RunOptions
from zqbench.target.embedded import free_port

# A master built as `zqbench run --distributed` builds it (Locust's gevent patches its
# process, so it gets one of its own), then probed from outside on two addresses.
PROBE = textwrap.dedent(
    """
    import socket, sys
    from pathlib import Path
    from zqbench.distributed.master import Master, MasterSettings

    master = Master(MasterSettings(secret=b"s" * 32, bind=sys.argv[1]), Path("."))
    port = int(master.address.rsplit(":", 1)[1])
    # The kernel's own table of listening sockets: the address the master bound.
    listening = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        host, hex_port = local.split(":")
        if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
            listening.add(socket.inet_ntoa(bytes.fromhex(host)[::-1]))
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        reached = True
    except OSError:
        reached = False
    print(master.address, ",".join(sorted(listening)), reached)
    master._close()
    """
)


def test_the_master_is_loopback_only_unless_widened() -> None:
    assert RunOptions.of(scenario="smoke").distribution.master_bind == "127.0.0.1:5557"
    port = free_port()
    for bind, expected in ((f":{port}", ("127.0.0.1", "127.0.0.1", "True")),
                           (f"0.0.0.0:{port}", ("0.0.0.0", "0.0.0.0", "True"))):  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-c", PROBE, bind],
            cwd=REPO, capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        address, listening, reached = done.stdout.split()
        assert (address.rsplit(":", 1)[0], listening, reached) == expected


def test_the_flags_help_says_what_widening_it_means() -> None:
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200"})
    text = " ".join(result.stdout.split())
    assert "Loopback by default" in text and "Only workers that prove the shared secret" in text
    assert "not encrypted" in text
