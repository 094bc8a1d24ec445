"""zqbench.target.launched: a server command launched in its own process group, ready when
it answers, stopped by the group's id (never by name), and stopped however the block ends;
on the bundled reference server, a real one."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from zqbench.errors import TargetError
from zqbench.target.embedded import free_port, get_health
from zqbench.target.launched import (
    LaunchedServer,
    ServerExited,
    ServerNotReady,
    accepts,
    group_alive,
)

PY = sys.executable
pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs Linux /proc")


def refserver(port: int, *extra: str) -> list[str]:
    return [PY, "-m", "reference_server", "--engine", "sim", "--port", str(port), *extra]


def wait_gone(pgid: int, within_s: float) -> bool:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if not group_alive(pgid):
            return True
        time.sleep(0.1)
    return False


def test_it_starts_the_command_answers_then_stops_its_whole_group_by_id(tmp_path: Path) -> None:
    port = free_port()
    # A child of the server's shell that would outlive a kill of the leader alone.
    cmd = ["bash", "-c", f"sleep 300 & exec {' '.join(refserver(port, '--max-batch-size', '3'))}"]
    server = LaunchedServer(
        cmd, f"http://127.0.0.1:{port}", tmp_path / "server.log", ready_timeout_s=60
    )
    with server:
        pgid = server.pid
        assert pgid is not None and os.getpgid(pgid) == pgid  # a group of its own
        assert os.getpgid(pgid) != os.getpgrp()
        assert get_health(server.base_url)["slots"] == 3  # the command's own flag
        assert server.ready_s is not None and 0 < server.ready_s < 60
    assert not group_alive(pgid), "the sleep child went with the group"
    assert not accepts("127.0.0.1", port), "the port is free for the next launch"
    assert server.exit_code is not None
    server.stop()  # idempotent
    assert (tmp_path / "server.log").stat().st_size > 0


def test_a_command_that_exits_before_it_is_ready_says_its_code_and_log_tail(tmp_path: Path) -> None:
    port = free_port()
    code = (
        "import sys\nfor i in range(30): print('line', i)\n"
        "print('error: \\x1b[31mno model')\nsys.exit(3)"
    )
    server = LaunchedServer(
        [PY, "-c", code], f"http://127.0.0.1:{port}", tmp_path / "s.log", ready_timeout_s=30
    )
    with pytest.raises(ServerExited) as caught:
        server.start()
    assert caught.value.message == (
        f"the server command exited with code 3 before http://127.0.0.1:{port} answered; "
        f"see {tmp_path / 's.log'}"
    )
    assert caught.value.tail[-1] == "error: \\x1b[31mno model"  # escaped, never obeyed
    assert len(caught.value.tail) == 12 and caught.value.tail[0] == "line 19"
    assert caught.value.exit_code == 3  # a TargetError: exit 3 where it is not caught


def test_a_command_that_never_answers_is_stopped_at_the_deadline(tmp_path: Path) -> None:
    port = free_port()
    code = "import time\nprint('loading', flush=True)\ntime.sleep(300)"
    server = LaunchedServer(
        [PY, "-c", code], f"http://127.0.0.1:{port}", tmp_path / "s.log", ready_timeout_s=1.5
    )
    t0 = time.monotonic()
    with pytest.raises(ServerNotReady) as caught:
        server.start()
    assert 1.5 <= time.monotonic() - t0 < 15
    assert caught.value.message.startswith(
        f"http://127.0.0.1:{port} did not answer GET /health or /v1/models within 1.5 s of the "
        "launch (raise --ready-timeout); see "
    )
    assert caught.value.tail == ["loading"]
    assert server.pid is None and server.exit_code == -signal.SIGTERM


def test_an_error_inside_the_block_stops_the_server(tmp_path: Path) -> None:
    port = free_port()
    server = LaunchedServer(
        refserver(port), f"http://127.0.0.1:{port}", tmp_path / "s.log", ready_timeout_s=60
    )
    with pytest.raises(RuntimeError, match="boom"), server:
        pgid = server.pid
        assert pgid is not None
        raise RuntimeError("boom")
    assert not group_alive(pgid) and not accepts("127.0.0.1", port)


def test_a_port_that_already_answers_is_refused_before_any_launch(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        marker = tmp_path / "ran"
        server = LaunchedServer(
            [PY, "-c", f"open({str(marker)!r}, 'w')"],
            f"http://127.0.0.1:{port}",
            tmp_path / "s.log",
            ready_timeout_s=5,
        )
        with pytest.raises(TargetError) as caught:
            server.start()
    assert caught.value.message == (
        f"127.0.0.1:{port} already accepts connections before the server command started; "
        "stop what listens there, or choose another port"
    )
    time.sleep(0.5)
    assert not marker.exists(), "nothing was launched"


def test_a_missing_program_is_a_launch_error_not_a_traceback(tmp_path: Path) -> None:
    server = LaunchedServer(
        ["/nonexistent/vllm", "serve"], f"http://127.0.0.1:{free_port()}", tmp_path / "s.log",
        ready_timeout_s=5,
    )  # fmt: skip
    with pytest.raises(ServerExited, match=r"^cannot start the server command /nonexistent/vllm: "):
        server.start()


def test_the_server_does_not_outlive_a_killed_zqbench(tmp_path: Path) -> None:
    """SIGKILL leaves no `finally`: the guard ends the group."""
    port = free_port()
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        from pathlib import Path
        from zqbench.target.launched import LaunchedServer
        log = Path({str(tmp_path / "s.log")!r})
        url = "http://127.0.0.1:{port}"
        s = LaunchedServer({refserver(port)!r}, url, log, ready_timeout_s=60).start()
        print(s.pid, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run(
        [PY, "-c", script], capture_output=True, text=True, timeout=90, check=False
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    pgid = int(proc.stdout.split()[0])
    assert wait_gone(pgid, 25), "the guard ended the server's group"
