"""Headless Chromium driven over the DevTools protocol (loopback websocket), network blocked.

    with Chromium() as browser:
        page = browser.open(Path("report.html"))   # -> PageResult

Outside traffic is blocked three ways: a proxy that points at a closed loopback port and
a host resolver that resolves nothing (process level), plus DevTools' offline emulation
and URL blocking (page level). Every request other than file:// and data: is recorded,
as are console errors, uncaught exceptions and failed loads.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--proxy-server=127.0.0.1:9",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
)
PROBE_JS = """(async () => {
  const imgs = [...document.images];
  const decoded = await Promise.all(imgs.map(i => i.decode().then(() => true, () => false)));
  const banner = document.querySelector('#verdict');
  return JSON.stringify({
    images: imgs.map((i, k) => ({w: i.naturalWidth, h: i.naturalHeight, decoded: decoded[k]})),
    verdict: banner ? banner.dataset.verdict : null,
    banner: banner ? banner.innerText : null,
    rows: [...document.querySelectorAll('#verdict tr[data-expr]')].map(r => ({
      expr: r.dataset.expr, verdict: r.dataset.verdict,
      cells: [...r.cells].map(c => c.innerText)})),
    resources: performance.getEntriesByType('resource').map(e => e.name),
  });
})()"""


def find_chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class PageResult:
    probe: dict[str, Any]
    console_errors: list[str] = field(default_factory=list)
    failed_loads: list[str] = field(default_factory=list)
    outside_requests: list[str] = field(default_factory=list)


class Chromium:
    def __init__(self, timeout_s: float = 30.0) -> None:
        self.timeout_s = timeout_s
        self._next_id = 0
        self._events: list[dict[str, Any]] = []

    def __enter__(self) -> Chromium:
        import websocket  # websocket-client

        exe = find_chromium()
        if exe is None:
            raise RuntimeError("chromium is not installed")
        self._profile = tempfile.mkdtemp(prefix="zqbench-chromium-")
        self._proc = subprocess.Popen(
            [exe, *FLAGS, f"--user-data-dir={self._profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = Path(self._profile) / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout_s
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.monotonic() > deadline or self._proc.poll() is not None:
                self.__exit__(None, None, None)
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            targets = json.load(r)
        page = next(t for t in targets if t["type"] == "page")
        self._ws = websocket.create_connection(
            page["webSocketDebuggerUrl"], timeout=self.timeout_s, suppress_origin=True
        )
        return self

    def __exit__(self, *exc: object) -> None:
        if getattr(self, "_ws", None) is not None:
            self._ws.close()
        self._proc.terminate()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        shutil.rmtree(self._profile, ignore_errors=True)

    def _call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        call_id = self._next_id
        self._ws.send(json.dumps({"id": call_id, "method": method, "params": params}))
        while True:
            message = json.loads(self._ws.recv())
            if message.get("id") == call_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self._events.append(message)

    def _wait_event(self, method: str) -> None:
        if any(e.get("method") == method for e in self._events):
            return
        while True:
            message = json.loads(self._ws.recv())
            self._events.append(message)
            if message.get("method") == method:
                return

    def open(self, path: Path) -> PageResult:
        for domain in ("Runtime", "Log", "Network", "Page"):
            self._call(f"{domain}.enable")
        self._call("Network.setBlockedURLs", urls=["http://*", "https://*", "ws://*", "wss://*"])
        self._call(
            "Network.emulateNetworkConditions",
            offline=True,
            latency=0,
            downloadThroughput=-1,
            uploadThroughput=-1,
        )
        self._events.clear()
        self._call("Page.navigate", url=Path(path).resolve().as_uri())
        self._wait_event("Page.loadEventFired")
        value = self._call(
            "Runtime.evaluate", expression=PROBE_JS, awaitPromise=True, returnByValue=True
        )
        if "exceptionDetails" in value:
            raise RuntimeError(f"probe failed: {value['exceptionDetails']}")
        result = PageResult(json.loads(value["result"]["value"]))
        self._call("Runtime.evaluate", expression="1")  # flush events queued meanwhile
        for event in self._events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                result.console_errors.append(str(params["exceptionDetails"].get("text")))
            elif method == "Runtime.consoleAPICalled" and params["type"] in ("error", "assert"):
                result.console_errors.append(str(params.get("args")))
            elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
                result.console_errors.append(params["entry"].get("text", ""))
            elif method == "Network.loadingFailed":
                result.failed_loads.append(f"{params.get('errorText')} {params.get('requestId')}")
            elif method == "Network.requestWillBeSent":
                url = params["request"]["url"]
                if not url.startswith(("data:", "file:")):
                    result.outside_requests.append(url)
        return result


def chromium_required() -> bool:
    """CI installs chromium (.ci/run): there a missing browser fails instead of skipping."""
    return bool(os.environ.get("CI"))
