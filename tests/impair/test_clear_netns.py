"""`zqbench impair clear` removes what a killed run left, inside a namespace the test owns."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from tests.impair.netns import NetnsPair, netns_pair, require_root_and_nft

pytestmark = [pytest.mark.root, pytest.mark.slow]  # namespaces and a process per step

APPLY = """
from zqbench.impair import nft
nft.apply(nft.LossRules("run-a", ("10.1.1.1",), 80, 0.1))
nft.apply(nft.LossRules("run-b", ("10.1.1.1", "fd00::1"), 81, 0.2))
"""
# The `impair` command group on its own Typer app (zqbench.cli adds it to `zqbench`).
CLI = "import typer; from zqbench.cli.impair import register; a = typer.Typer(); register(a); a()"


@pytest.fixture
def ns() -> Iterator[NetnsPair]:
    require_root_and_nft()
    with netns_pair() as pair:
        yield pair


def _cli(pair: NetnsPair, *args: str) -> str:
    out = pair.run(pair.client, [sys.executable, "-c", CLI, "impair", *args])
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_clear_one_run_then_all(ns: NetnsPair) -> None:
    done = ns.run(ns.client, [sys.executable, "-c", APPLY])
    assert done.returncode == 0, done.stderr
    ruleset = ns.ruleset()
    assert ruleset.count('comment "zqbench run=run-a"') == 2  # one per direction
    assert ruleset.count('comment "zqbench run=run-b"') == 4  # two addresses
    assert "numgen random mod 10000 < 2000" in ruleset

    listed = _cli(ns, "list")
    assert listed.count("zqbench run=run-b") == 4

    assert _cli(ns, "clear", "--run", "run-a").strip() == "removed 2 rule(s) of 1 run(s): run-a"
    ruleset = ns.ruleset()
    assert "run=run-a" not in ruleset and ruleset.count("run=run-b") == 4

    assert _cli(ns, "clear").strip() == "removed 4 rule(s) of 1 run(s): run-b"
    assert "zqbench" not in ns.ruleset()  # the table is gone too
    assert _cli(ns, "clear").strip() == "no zqbench impairment rules found"
