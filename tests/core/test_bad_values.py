"""#25 item 13: values that crashed (exit 5) are one-line usage errors (exit 2)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from zqbench.errors import OptionError, UsageError
from zqbench.outputs.registry import write_comparison
from zqbench.saved.compare import compare_runs
from zqbench.target.probe import ProbeOptions
from zqbench.transport.origin import parse_base_url

EXAMPLES = Path(__file__).resolve().parents[2] / "reports" / "examples"


@pytest.mark.parametrize(
    ("timeout", "problem"),
    [
        (math.nan, "must be greater than 0"),
        (-1.0, "must be greater than 0"),
        (-math.inf, "must be greater than 0"),
        (math.inf, "must be a finite number"),
    ],
)
def test_probe_refuses_a_timeout_it_cannot_honour(timeout: float, problem: str) -> None:
    with pytest.raises(OptionError) as err:
        ProbeOptions(target="http://127.0.0.1:9", timeout_s=timeout)
    assert (err.value.option, err.value.problem) == ("timeout_s", problem)


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/\x01x", "http://127.0.0.1:9/\r\nX-A: 1"])
def test_a_target_with_a_control_character_is_refused(url: str) -> None:
    with pytest.raises(UsageError, match=r"it contains a control character$"):
        parse_base_url(url)


def test_compare_out_on_an_existing_file_is_refused_in_one_line(tmp_path: Path) -> None:
    comparison = compare_runs([EXAMPLES / "smoke-fifo", EXAMPLES / "smoke-zero-queue"])
    target = tmp_path / "a-file"
    target.write_text("kept\n")
    with pytest.raises(UsageError) as err:
        write_comparison(comparison, target)
    assert err.value.message == f"{target} exists and is not a folder; choose another --out"
    assert target.read_text() == "kept\n"


@pytest.mark.parametrize("option", ["workers", "expect_workers"])
def test_a_worker_count_past_the_bound_is_refused_before_any_plan(option: str) -> None:
    """--workers 100000000 built a share per worker first: 2.4 GB in 20 s, no line at all."""
    from zqbench.pipeline.options import RunOptions

    extra = {"distributed": True} if option == "expect_workers" else {}
    with pytest.raises(OptionError) as err:
        RunOptions.of(scenario="smoke", **{option: 100_000_000}, **extra)  # type: ignore[arg-type]
    assert err.value.option == option
    assert "at most 1024 (one process, or machine, each)" in str(err.value)


@pytest.mark.parametrize(
    ("option", "value", "problem"),
    [
        ("max_connections", 0, "max_connections 0: must be at least 1"),
        (
            "max_connections",
            10**9,
            "max_connections 1000000000: at most 65535 (one TCP port each, to one target)",
        ),
        ("warm_connections", -1, "warm_connections -1: must be at least 0"),
        ("spin_us", -5, "spin_us -5: must be at least 0"),
    ],
)
def test_a_connection_pool_no_run_can_use_is_refused(option: str, value: int, problem: str):
    """--max-connections 0 left every send waiting for the whole run (#44)."""
    from zqbench.pipeline.options import RunOptions

    with pytest.raises(OptionError) as err:
        RunOptions.of(scenario="smoke", **{option: value})  # type: ignore[arg-type]
    assert str(err.value) == problem


EMPTY_TARGET = (
    "zqbench: error: --target '': is empty; give the endpoint's base URL (http://HOST:PORT), "
    "or leave --target out to start the bundled reference server"
)


@pytest.mark.parametrize(
    "argv",
    [["run", "smoke"], ["sweep", "smoke"], ["conform"], ["profile", "nsys", "smoke", "--dry-run"]],
)
def test_an_empty_target_is_refused_not_read_as_no_target(argv: list[str]) -> None:
    """`--target "$URL"` with URL unset ran the bundled server (conform passed, exit 0)."""
    from tests.core.conftest import zqbench_here

    result = zqbench_here(*argv, "--target", "")
    assert (result.returncode, result.stderr.strip()) == (2, EMPTY_TARGET)


def test_the_library_refuses_an_empty_target() -> None:
    from zqbench.pipeline.options import RunOptions

    with pytest.raises(OptionError) as err:
        RunOptions.of(scenario="smoke", target="  ")
    assert err.value.option == "target"


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["run", "smoke", "--server-scheduler", "fifo"], "--server-scheduler"),
        (["run", "smoke", "--server-engine", "sim"], "--server-engine"),
        (["run", "smoke", "--server-arg=--max-batch-size=2"], "--server-arg"),
        (["sweep", "smoke", "--server-scheduler", "fifo"], "--server-scheduler"),
        (["conform", "--server-scheduler", "fifo"], "--server-scheduler"),
        (["conform", "--server-max-batch-size", "8"], "--server-max-batch-size"),
    ],
)
def test_a_bundled_server_flag_with_a_target_is_refused(argv: list[str], flag: str) -> None:
    """Given with --target, a --server-* flag was silently ignored: a "fifo" run measured
    whatever the target was. Exit 2 before anything is sent (the target is unreachable)."""
    from tests.core.conftest import zqbench_here

    result = zqbench_here(*argv, "--target", "http://127.0.0.1:1")
    assert (result.returncode, result.stderr.strip()) == (
        2,
        f"zqbench: error: {flag} sets up the bundled reference server, which --target "
        f"replaces; drop {flag} or --target",
    )


@pytest.mark.parametrize("seed", [-5, 2**63])
def test_a_seed_no_generator_takes_is_refused_before_any_plan(seed: int) -> None:
    """--seed -5 was exit 5 once the first prompt was drawn, after the target was contacted."""
    from zqbench.pipeline.options import RunOptions
    from zqbench.pipeline.plan import make_plan

    with pytest.raises(OptionError) as err:
        make_plan(RunOptions.of(scenario="smoke", seed=seed).plan)
    assert (
        str(err.value) == f"seed {seed}: must be a whole number from 0 to 9,223,372,036,854,775,807"
    )


@pytest.mark.parametrize("seed", [0, 6_999_999, 7_000_000, 2**63 - 1])
def test_every_seed_fits_the_shared_prefix_source(seed: int) -> None:
    """Its suffix's seed was 7,000,000 - 1 - seed: negative from 7,000,000 on (exit 5)."""
    from zqbench.scenario import load_scenario
    from zqbench.sources.shared_prefix import fit

    scenario = load_scenario("shared-prefix")
    source = fit(scenario, seed, None)
    assert len(source.prefixes) == 8 and len(set(source.prefixes)) == 8
    assert source.suffix not in source.prefixes
