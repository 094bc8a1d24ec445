"""Two network namespaces joined by a veth pair, created and removed by the test.

    client ns  zqc <-- veth, a private /30 --> zqs  server ns

Nothing is added to the host's namespace: the veth is created inside the client namespace
with its peer moved straight into the server namespace, and the nftables rules the tests
apply live in the client namespace. Deleting the namespaces removes everything in them
(interfaces, addresses, rules), which the context manager does even when the test fails.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def require_root_and_nft() -> None:
    """Skip (fail under CI=true, where the tests must run) without root, nft or ip."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root")
    missing += [tool for tool in ("nft", "ip") if shutil.which(tool) is None]
    if not missing:
        return
    reason = f"needs root, nftables and iproute2; missing: {', '.join(missing)}"
    if os.environ.get("CI") == "true":
        pytest.fail(reason + " (CI=true: the CI image must provide them)")
    pytest.skip(reason)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


@dataclass(frozen=True)
class NetnsPair:
    client: str
    server: str
    client_addr: str
    server_addr: str

    def popen(self, ns: str, args: list[str], log: Path) -> subprocess.Popen[bytes]:
        """Start `args` inside `ns` (`ip netns exec` execs it, so the PID is the program's)."""
        with open(log, "wb") as out:
            return subprocess.Popen(
                ["ip", "netns", "exec", ns, *args],
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )

    def run(
        self, ns: str, args: list[str], timeout: float = 30
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ip", "netns", "exec", ns, *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def ruleset(self, ns: str | None = None) -> str:
        """`nft list ruleset` inside a namespace (the client's by default)."""
        out = self.run(ns or self.client, ["nft", "list", "ruleset"])
        assert out.returncode == 0, out.stderr
        return out.stdout


@contextlib.contextmanager
def netns_pair() -> Iterator[NetnsPair]:
    tag = secrets.token_hex(3)
    client, server = f"zqt-{tag}-c", f"zqt-{tag}-s"
    net = f"10.250.{secrets.randbelow(256)}.{4 * secrets.randbelow(64)}"  # a /30 base
    base = net.rsplit(".", 1)
    last = int(base[1])
    c_addr, s_addr = f"{base[0]}.{last + 1}", f"{base[0]}.{last + 2}"
    created: list[str] = []
    try:
        for ns in (client, server):
            _ip("netns", "add", ns)
            created.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        _ip(
            "-n",
            client,
            "link",
            "add",
            "zqc",
            "type",
            "veth",
            "peer",
            "name",
            "zqs",
            "netns",
            server,
        )
        _ip("-n", client, "addr", "add", f"{c_addr}/30", "dev", "zqc")
        _ip("-n", server, "addr", "add", f"{s_addr}/30", "dev", "zqs")
        _ip("-n", client, "link", "set", "zqc", "up")
        _ip("-n", server, "link", "set", "zqs", "up")
        yield NetnsPair(client, server, c_addr, s_addr)
    finally:
        for ns in reversed(created):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10, check=False)


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 15) -> None:
    """SIGTERM by PID, then SIGKILL if it does not exit in time."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@contextlib.contextmanager
def reference_server(pair: NetnsPair, log: Path, port: int = 8000) -> Iterator[str]:
    """The reference server (sim engine) inside the server namespace; yields its base URL."""
    args = [sys.executable, "-m", "reference_server", "--engine", "sim"]
    args += ["--host", pair.server_addr, "--port", str(port), "--max-batch-size", "64"]
    proc = pair.popen(pair.server, args, log)
    url = f"http://{pair.server_addr}:{port}"
    try:
        probe = f"import urllib.request; urllib.request.urlopen('{url}/health', timeout=1).read()"
        deadline = time.monotonic() + 60
        while True:  # bounded: 60 s
            if proc.poll() is not None:
                raise RuntimeError(f"reference server exited: {log.read_text()[-2000:]}")
            if pair.run(pair.client, [sys.executable, "-c", probe]).returncode == 0:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("reference server not healthy within 60 s")
            time.sleep(0.3)
        yield url
    finally:
        stop_process(proc)
