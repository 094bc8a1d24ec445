"""No orphans: `zqbench serve`, `zqbench run` (embedded server) and `run --workers 2`,
killed with SIGTERM or SIGKILL, leave no process of theirs behind.

Processes are found by PID in /proc (the tree is snapshotted while the parent lives:
once it dies its children are re-parented away from it), and every wait polls up to a
deadline. A zombie counts as gone: it no longer runs, only its exit status waits for
whoever adopted it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.core.conftest import MODEL, REPO, write_scenario
from zqbench.errors import TargetError
from zqbench.target.embedded import EmbeddedServer, free_port, get_health

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc"),
]

ORPHAN_DEADLINE_S = 5.0  # the bound: nothing left this long after the parent died
STARTUP_DEADLINE_S = 90.0  # a busy 2-core machine imports slowly; generous on purpose
GRACEFUL_EXIT_S = 60.0  # SIGTERM lets `run` analyze and write what it measured

LONG_RUN = """
name = "long"
description = "runs far longer than the test waits"
api = "anthropic"
[load]
executor = "constant-arrival-rate"
rate = 20
duration = "120s"
[request]
max_tokens = 8
stream = true
timeout = "20s"
prompt_tokens = 24
"""

SIGNALS = pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["term", "kill"])


# ---------------------------------------------------------------------- /proc


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, ppid) of a process, None when it no longer exists."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state, ppid = text[text.rindex(")") + 2 :].split()[:2]  # the name may hold spaces
    return state, int(ppid)


def running(pid: int) -> bool:
    status = _stat(pid)
    return status is not None and status[0] != "Z"


def descendants(root: int) -> set[int]:
    """Every running process below `root`, from the ppid field of /proc/*/stat."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (status := _stat(int(entry.name))) and status[0] != "Z":
            children.setdefault(status[1], []).append(int(entry.name))
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def poll(condition: Callable[[], bool], deadline_s: float) -> bool:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def assert_all_gone(pids: set[int], deadline_s: float = ORPHAN_DEADLINE_S) -> None:
    if not poll(lambda: not any(running(p) for p in pids), deadline_s):
        left = {p: cmdline(p).replace(b"\0", b" ")[:120] for p in pids if running(p)}
        pytest.fail(f"still running {deadline_s:.0f} s after the parent died: {left}")


# ---------------------------------------------------------------------- fixtures


class Launcher:
    """Starts `python -m zqbench ARGS` and remembers every process tree it was shown."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []
        self.seen: set[int] = set()

    def start(self, args: list[str]) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "zqbench", *args],
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.procs.append(proc)
        return proc

    def tree(self, proc: subprocess.Popen[bytes]) -> set[int]:
        """The parent and everything below it, now."""
        pids = {proc.pid, *descendants(proc.pid)}
        self.seen |= pids
        return pids

    def clean_up(self) -> None:
        """Kill by PID what a failed test left, so it cannot disturb the next one."""
        for proc in self.procs:
            self.seen |= descendants(proc.pid)
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=10)
        for pid in self.seen:
            if running(pid) and cmdline(pid).startswith(sys.executable.encode()):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


@pytest.fixture
def launcher() -> Iterator[Launcher]:
    launched = Launcher()
    try:
        yield launched
    finally:
        launched.clean_up()


def kill_and_check(proc: subprocess.Popen[bytes], tree: set[int], sig: int) -> None:
    """Send `sig` to the parent; nothing of `tree` may outlive it by more than 5 s."""
    proc.send_signal(sig)
    try:
        proc.wait(timeout=GRACEFUL_EXIT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"zqbench did not exit within {GRACEFUL_EXIT_S:.0f} s of {sig!r}")
    assert_all_gone(tree)


def wait_for(condition: Callable[[], bool], what: str) -> None:
    if not poll(condition, STARTUP_DEADLINE_S):
        pytest.fail(f"{what} within {STARTUP_DEADLINE_S:.0f} s")


# ---------------------------------------------------------------------- serve


def answers(base_url: str) -> bool:
    try:
        get_health(base_url, timeout_s=1.0)
    except TargetError:
        return False
    return True


@SIGNALS
def test_serve_leaves_no_server_behind(sig: int, launcher: Launcher) -> None:
    port = free_port()
    proc = launcher.start(["serve", "--engine", "sim", "--host", "127.0.0.1", "--port", str(port)])
    base_url = f"http://127.0.0.1:{port}"
    wait_for(lambda: answers(base_url), "the server did not answer /health")
    tree = launcher.tree(proc)
    kill_and_check(proc, tree, sig)
    assert not answers(base_url), "nothing serves the port any more"


# ---------------------------------------------------------------------- run


def run_args(tmp_path: Path, *extra: str) -> list[str]:
    scenario = write_scenario(tmp_path, LONG_RUN)
    out = tmp_path / "run"
    return ["run", str(scenario), "--out", str(out), "--quiet", "--calibration", "off", *extra]


def loading(out: Path, workers: int) -> bool:
    """Every worker has opened its sample stream: the schedule is about to start or running."""
    return all((out / f"samples.w{w}.arrows").exists() for w in range(workers))


@SIGNALS
def test_run_leaves_no_embedded_server_behind(sig: int, launcher: Launcher, tmp_path: Path) -> None:
    proc = launcher.start(run_args(tmp_path, "--server-engine", "sim"))

    def server_and_load() -> bool:
        servers = [p for p in descendants(proc.pid) if b"reference_server" in cmdline(p)]
        return bool(servers) and loading(tmp_path / "run", 1)

    wait_for(server_and_load, "the embedded server and the load did not start")
    tree = launcher.tree(proc)
    kill_and_check(proc, tree, sig)


@SIGNALS
def test_run_leaves_no_worker_behind(
    sig: int, launcher: Launcher, ref_server: EmbeddedServer, tmp_path: Path
) -> None:
    target = ["--target", ref_server.base_url, "--model", MODEL, "--workers", "2"]
    proc = launcher.start(run_args(tmp_path, *target))

    def workers_loading() -> bool:
        workers = [p for p in descendants(proc.pid) if b"spawn_main" in cmdline(p)]
        return len(workers) == 2 and loading(tmp_path / "run", 2)

    wait_for(workers_loading, "two workers did not start loading the target")
    tree = launcher.tree(proc)
    kill_and_check(proc, tree, sig)
