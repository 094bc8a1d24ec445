"""`zqbench` command lines, each run to its end in a process of its own (tests/test_fuzz_cli.py).

    python -m tests.cli_case DEADLINE_S

reads one case per line on stdin (JSON: argv, output, cwd, env) and answers each with one
line, `{"code": EXIT_CODE}`, or `{"code": null}` when the case outlived DEADLINE_S and was
killed. The server imports zqbench once and forks each case from itself, a single-threaded
process, so a case costs its own work rather than an interpreter's start; a case that hangs
is killed with its process group (by PID) and fails its test instead of hanging the suite.
Everything a case writes, through Python or to its file descriptors (a thread's traceback,
an asyncio warning), lands in its output file.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import time
from typing import Any


def run_case(argv: list[str], output: str, cwd: str, env: dict[str, str]) -> int:
    """In a forked child: `zqbench ARGV` in `cwd` with exactly `env`, stdout and stderr both
    into `output`, in a process group of its own. Its exit code."""
    os.setsid()
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115 (the process's own)
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.stdin = open(0, closefd=False)  # noqa: SIM115
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.argv = ["zqbench", *argv]
    from zqbench.cli.app import main

    try:
        main()
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 0
    return 0


def _wait(pid: int, deadline_s: float) -> int | None:
    """The child's exit code (negative: the signal that ended it); None after killing its
    group at the deadline."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.005)
    os.killpg(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


# What the commands import when they run, loaded once before any fork (most of a case's
# time otherwise: `run` against a closed port is 1.2 s of imports and 1 ms of connecting).
PRELOAD = (
    "httpx", "numpy", "pandas", "pyarrow", "zqbench.cli.app", "zqbench.pipeline.run",
    "zqbench.pipeline.sweep", "zqbench.conform.runner", "zqbench.target.probe",
    "zqbench.distributed.worker", "zqbench.saved.report", "zqbench.saved.gate",
    "zqbench.saved.compare",
)  # fmt: skip


def serve(deadline_s: float) -> None:
    for name in PRELOAD:
        importlib.import_module(name)

    for line in sys.stdin:
        case: dict[str, Any] = json.loads(line)
        pid = os.fork()
        if pid == 0:
            code = 99
            try:
                code = run_case(**case)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        print(json.dumps({"code": _wait(pid, deadline_s)}), flush=True)


if __name__ == "__main__":
    serve(float(sys.argv[1]))
