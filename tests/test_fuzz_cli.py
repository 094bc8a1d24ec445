"""Seeded fuzzing of CLI values (#25 acceptance): `zqbench run`, `sweep`, `probe`, `conform`,
`worker`, `profile --dry-run`, `scenarios`, and `report`/`gate`/`compare` on a saved run,
each with one to four of its options set to hostile values (numbers at and past their
limits, durations, control characters, other scripts, flags as values, unknown flags).

Each case runs to its end in a process of its own, forked by tests/cli_case.py, bounded in
time: a case that outlives CASE_DEADLINE_S is killed and fails, with its command line. Every case
must end with an exit code zqbench documents other than 5, one `zqbench: error:` line when
it is a usage error, and no traceback anywhere in its output.

The options come from the commands themselves, so a new option is fuzzed without a change
here. Traffic goes only to 127.0.0.1:1, where nothing listens: every target the cases name
is loopback or malformed, every output folder is the case's own.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.reporting.synth import write_synthetic_run
from zqbench.cli.app import app

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # 500 processes, one after another

CASES = int(os.environ.get("ZQBENCH_FUZZ_CASES", "500"))  # fewer while editing
CASE_DEADLINE_S = 30.0  # a case takes 0.1-2 s; a busy machine is slow, not 30 s slow
CLOSED = "http://127.0.0.1:1"  # a privileged port nothing here listens on
EXIT_CODES = {0, 1, 2, 3, 4}  # docs/design.md, less 5 (a bug) and 130 (an interrupt)

# Base command lines; every relative path is inside the case's folder, where `run` is a
# saved run. `report` and `compare` start from a missing folder: rendering a real one takes
# 1-2 s, so they do so only when a case draws `run` for it.
COMMANDS: dict[str, list[str]] = {
    "run": ["run", "burst", "--target", CLOSED, "--out", "o"],
    "sweep": ["sweep", "burst", "--target", CLOSED, "--out", "o"],
    "probe": ["probe", "--target", CLOSED],
    "conform": ["conform", "--target", CLOSED, "--out", "o"],
    "worker": ["worker", "--master", "127.0.0.1:1", "--connect-timeout", "0.05", "--out", "o"],
    "profile": ["profile", "nsys", "burst", "--dry-run", "--target", CLOSED, "--out", "o"],
    "scenarios": ["scenarios"],
    "report": ["report", "missing"],
    "gate": ["gate", "run"],
    "compare": ["compare", "run", "missing", "--out", "cmp"],
}
WEIGHTS = {"run": 6, "sweep": 2, "probe": 2, "conform": 2, "worker": 2, "gate": 2}
# Where a command's positional arguments start (a drawn value replaces one of them).
POSITIONAL = {"run": 1, "sweep": 1, "profile": 2, "report": 1, "gate": 1, "compare": 1}

NUMBERS = ["0", "-1", "1", "2", "7", "0.5", "-0", "1e308", "1e400", "-1e400", "nan", "inf",
           "-inf", "1000000000", "99999999999999999999999", "1_000", "0x10", "1/2",
           "5%"]  # fmt: skip
DURATIONS = ["1s", "0s", "-1s", "1e400s", "100000h", "10ms", "1e-9s", "0.1s", "1h", "s", "1 s"]
WORDS = ["anthropic", "openai", "auto", "raw", "aiohttp", "httpx", "off", "fresh", "cached",
         "zero-queue", "fifo", "torch", "sim", "latency", "ttft", "errors", "all",
         "none"]  # fmt: skip
HOSTILE = ["", " ", "\x00", "a\nb", "a\r\nX-Injected: 1", "é", "∞", "日本", "%s", "{}", "--",
           "--target", "-h", "x" * 5000, "\x1b[31m", "$(id)", "../../../../tmp/x"]  # fmt: skip
TEXT = st.one_of(
    st.sampled_from(NUMBERS + DURATIONS + WORDS + HOSTILE),
    st.text(max_size=16),
)
# Options whose values reach the network or the disk get values that stay in bounds.
TARGETS = [CLOSED, "http://127.0.0.1:99999", "127.0.0.1:1", "http://[::1]:1", "unix:/x", "",
           "ftp://127.0.0.1:1", "http://", "http://u:p@127.0.0.1:1", "https://127.0.0.1:1",
           "http://localhost:1/v1", "http://127.0.0.1:1/\x00", "http://127.0.0.1:1/é",
           "http://127.0.0.1:0", " http://127.0.0.1:1"]  # fmt: skip
OUTS = ["o", "exists.txt", "link", "", "o/\x00", "/proc/zqbench-fuzz", "deep/" * 40 + "o"]
PATHS = ["burst", "mixed-length", "nope", "junk.toml", "missing.toml", ".", "/dev/null",
         "/dev/zero", "empty.jsonl", "bad.jsonl", "exists.txt", "link", "run", "run/summary.json",
         "/proc/self"]  # fmt: skip
TELEMETRY = ["prometheus:http://127.0.0.1:1/metrics", "prometheus:", "prometheus:ftp://x",
             "nvml", "nope", "", "prometheus:http://127.0.0.1:99999/m"]  # fmt: skip
MASTERS = ["127.0.0.1:1", "127.0.0.1:0", "127.0.0.1:99999", "[::1]:1", "abc", "", ":1",
           "tcp://127.0.0.1:1", "127.0.0.1"]  # fmt: skip
HEADERS = ["X-A: b", "X-A: b\r\nX-Injected: 1", "X-É: é", "bad", ":", "X-A:", "Host: evil",
           "Authorization: Bearer sk-fuzz", "Content-Length: 5", "x" * 9000 + ": v",
           "X-A: \x00"]  # fmt: skip
SLOS = ["latency:p99<1s", "errors:rate<1%", "nope<1", "latency:p99<1e400ms", "ttft:p50<",
        "latency:p99/p50<1.15", ""]  # fmt: skip
ENVS = ["ZQ_KEY", "NOPE", "", "PATH", "ZQ KEY", "é"]
# Keyed by flag (by name for an argument); every key must be one of the commands' (checked
# below), so a renamed flag never falls back to free values.
DOMAINS: dict[str, list[str]] = {
    "--target": TARGETS,
    "--out": OUTS,
    "--junit": OUTS,
    "--json": OUTS,
    "--dataset": PATHS,
    "scenario": PATHS,
    "run_dir": PATHS,
    "runs": PATHS,
    "--telemetry": TELEMETRY,
    "--master": MASTERS,
    "--master-bind": MASTERS,
    # Loopback only, and ports that are free or refused, never a well-known service's.
    "--metrics-port": ["0", "-1", "65536", "x", "1e3", "", "1.5"],
    "--metrics-host": ["127.0.0.1", "::1", "", " ", "not a host", "127.0.0.1:9", "localhost"],
    "--header": HEADERS,
    "--expect-header": HEADERS,
    "--slo": SLOS,
    "--api-key-env": ENVS,
    "--secret-env": ENVS,
    # A worker waits this long for its master: values a case outlives in seconds at most.
    # (0 and 1e308 wait as long as it takes, as documented: not among them.)
    # `sweep --server-cmd` launches what it is given: only commands that exit at once (the
    # target, 127.0.0.1:1, never answers, so a command that kept running would wait out
    # --ready-timeout).
    "--server-cmd": [
        f"{sys.executable} -c pass",
        "true --port {port}",
        "false",
        "",
        "  ",
        "{cap}",
        "'unclosed",
        "{}",
        "x}",
        "/nonexistent {port}",
        "true {port!r}",
    ],
    "--server-param": ["cap=1,2", "cap", "port=1", "=", "a=,", "cap=1,1", "x" * 300 + "=1"],
    "--ready-timeout": ["1s", "0s", "-1s", "abc", "1e400s", "nan"],
    "--connect-timeout": ["-1", "nan", "inf", "0.5", "0.001", "2s", "abc", "1e400", "", "1ms"],
}
NEVER = {"--help"}
# Rendering a real run's report again takes 2-3 s (30 s a suite run): the report tests do it.
SLOW = {"gate": {"--write"}}
UNKNOWN = ["--nope", "-x", "--target=", "stray", "--", "--workers=2=3", "-H"]


def _key(param: Any) -> str:
    """A parameter's key in DOMAINS: its longest flag, or an argument's name."""
    return str(max(param.opts, key=len)) if param.param_type_name == "option" else param.name


def _params(command: str) -> list[Any]:
    """The command's parameters (typer's own click classes: duck-typed)."""
    cmd = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    return [p for p in cmd.params if _key(p) not in NEVER | SLOW.get(command, set())]


PARAMS = {name: _params(name) for name in COMMANDS}


def test_every_bounded_value_list_names_a_real_parameter() -> None:
    keys = {_key(p) for params in PARAMS.values() for p in params}
    assert set(DOMAINS) <= keys, set(DOMAINS) - keys


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    names = [n for n in COMMANDS for _ in range(WEIGHTS.get(n, 1))]
    command = draw(st.sampled_from(names))
    argv = list(COMMANDS[command])
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.integers(0, 9)) == 0:
            argv.append(draw(st.sampled_from(UNKNOWN)))
            continue
        param = draw(st.sampled_from(PARAMS[command]))
        domain = DOMAINS.get(_key(param))
        value = draw(st.sampled_from(domain) if domain else TEXT)
        if param.param_type_name == "argument":
            if command in POSITIONAL:  # replace one of them
                at = POSITIONAL[command] + draw(st.integers(0, (command == "compare") * 1))
                argv[at] = value
            else:
                argv.insert(1, value)
        elif getattr(param, "is_flag", False):
            argv.append(param.opts[0])
        else:
            argv += [max(param.opts, key=len), value]
    return argv


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("fuzz-cli") / "run"
    write_synthetic_run(folder, n=120, duration_s=3.0)
    return folder


REPO = Path(__file__).resolve().parents[1]


class CaseServer:
    """tests/cli_case.py as a child process: one case in, its exit code out."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.cli_case", str(CASE_DEADLINE_S)],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(self, argv: list[str], output: Path, cwd: Path, env: dict[str, str]) -> int | None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        case = {"argv": argv, "output": str(output), "cwd": str(cwd), "env": env}
        self.proc.stdin.write(json.dumps(case) + "\n")
        self.proc.stdin.flush()
        # The server kills a case at its deadline; it answers within seconds of it.
        ready, _, _ = select.select([self.proc.stdout], [], [], CASE_DEADLINE_S + 60)
        assert ready, "the case server stopped answering"
        line = self.proc.stdout.readline()
        assert line, f"the case server ended (exit {self.proc.poll()})"
        code: int | None = json.loads(line)["code"]
        return code

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()  # its loop ends at end of input
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # by its PID
            self.proc.wait(15)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture(scope="module")
def cases() -> Iterator[CaseServer]:
    server = CaseServer()
    try:
        yield server
    finally:
        server.stop()


def _case_folder(root: Path, saved: Path) -> Path:
    """A folder with the files the value lists name: a run, junk, a file, a link."""
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    shutil.copytree(saved, root / "run")
    (root / "junk.toml").write_text("[load\nrate = = 3\n")
    (root / "empty.jsonl").write_text("")
    (root / "bad.jsonl").write_text('{"prompt": 1}\nnot json\n')
    (root / "exists.txt").write_text("a file\n")
    (root / "link").symlink_to(root / "exists.txt")
    return root


def _check(argv: list[str], code: int | None, output: str) -> None:
    shown = " ".join(repr(a) if not a.isprintable() or " " in a or not a else a for a in argv)
    assert code is not None, f"zqbench {shown}: still running after {CASE_DEADLINE_S} s\n{output}"
    assert code in EXIT_CODES, f"zqbench {shown}: exit {code}\n{output}"
    for bad in ("Traceback", "internal error", "never retrieved", "Exception ignored", "╭"):
        assert bad not in output, f"zqbench {shown}: {bad!r} in its output\n{output}"
    if code == 2:
        errors = [line for line in output.splitlines() if line.startswith("zqbench: error:")]
        assert len(errors) == 1, f"zqbench {shown}: exit 2 with {len(errors)} error lines\n{output}"


@settings(
    max_examples=CASES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(command_lines())
def test_a_command_line_ends_with_a_documented_exit_code(
    saved: Path, cases: CaseServer, tmp_path: Path, argv: list[str]
) -> None:
    root = _case_folder(tmp_path / "case", saved)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root),
        "XDG_CACHE_HOME": str(root / "cache"),
        "LANG": "C.UTF-8",
        "ZQ_KEY": "sk-fuzz-not-a-real-key",
        "ZQBENCH_SECRET": "fuzz-secret-" + "0" * 20,  # so that a worker gets as far as its master
    }
    output = root / "output.txt"
    began = time.monotonic()
    code = cases.run(argv, output, root, env)
    if log := os.environ.get("ZQBENCH_FUZZ_LOG"):  # what the cases did: a tally, by hand
        with open(log, "a") as f:
            took = round(time.monotonic() - began, 3)
            f.write(json.dumps({"code": code, "s": took, "argv": argv}) + "\n")
    _check(argv, code, output.read_text(errors="replace") if output.exists() else "")
