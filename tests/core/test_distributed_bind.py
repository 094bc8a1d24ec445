"""The distributed master listens on loopback unless told otherwise (#25: it has no
authentication yet, so every interface would let anyone on the network join as a worker)."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap

import pytest

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

    bind, other = sys.argv[1], sys.argv[2]
    master = Master(MasterSettings(bind=bind), Path("."))
    port = int(master.address.rsplit(":", 1)[1])

    def reaches(host):
        try:
            socket.create_connection((host, port), timeout=1).close()
            return True
        except OSError:
            return False

    print(master.address, reaches("127.0.0.1"), reaches(other))
    master._close()
    """
)


def _other_address() -> str | None:
    """This machine's address on a non-loopback interface, if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.254", 9))  # TEST-NET: no packet is sent for a UDP connect
        except OSError:
            return None
        address = s.getsockname()[0]
    return None if address.startswith("127.") else address


def test_the_master_is_loopback_only_unless_widened() -> None:
    assert RunOptions(scenario="smoke").master_bind == "127.0.0.1:5557"
    other = _other_address()
    if other is None:
        pytest.skip("this machine has no address beside loopback to probe from")
    port = free_port()
    for bind, expected in ((f":{port}", ("127.0.0.1", True, False)),
                           (f"0.0.0.0:{port}", ("0.0.0.0", True, True))):  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-c", PROBE, bind, other],
            cwd=REPO, capture_output=True, text=True, timeout=60, check=True,
        )  # fmt: skip
        address, loopback, outside = done.stdout.split()
        assert (address.rsplit(":", 1)[0], loopback == "True", outside == "True") == expected


def test_the_flags_help_says_what_widening_it_means() -> None:
    from typer.testing import CliRunner

    text = " ".join(
        CliRunner().invoke(app, ["run", "--help"], env={"COLUMNS": "200"}).stdout.split()
    )
    assert "Loopback by default" in text and "no authentication yet" in text
